//! # grace-std
//!
//! grace on `std`: what turns the `grace-core` state machine into a working
//! system. This release holds the scenario format and the simulator behind
//! `grace simulate`; clocks, storage, the runtime and process control follow.
#![deny(missing_docs)]

pub mod clock;
pub mod scenario;
pub mod simulate;
pub mod timeline;

pub use clock::{Clock, ManualClock, SystemClock};
pub use scenario::{Scenario, ScenarioError, parse};
pub use simulate::{SimulateError, simulate};
pub use timeline::Timeline;
