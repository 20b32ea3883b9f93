//! What the benches that drive a real `grace agent` share: starting one on
//! a data directory and stopping it.
#![allow(dead_code)] // each bench uses its own part

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use grace_agent::is_serving;

/// The `grace` binary built with the benches.
pub const GRACE: &str = env!("CARGO_BIN_EXE_grace");

/// The node the agent runs (`grace agent`'s default).
pub const NODE: &str = "local";

/// Starts `grace agent` on `dir` with the environment variables `env`
/// set (its standard output, the transitions, discarded; its errors
/// shown), and waits until it serves.
pub fn start_agent(dir: &Path, env: &[(&str, &str)]) -> Child {
    let child = Command::new(GRACE)
        .args(["agent", "--data-dir"])
        .arg(dir)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the agent starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_serving(dir) {
        assert!(Instant::now() < deadline, "the agent serves within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Stops the agent with SIGTERM; it must exit successfully.
pub fn stop_agent(agent: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status();
    let status = agent.wait().expect("the agent exits");
    assert!(status.success(), "agent exit: {status:?}");
}

/// The environment variable `key` parsed, or `default`.
pub fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
