//! # grace-cli
//!
//! The `grace` command line, built on the `grace-std` library: [`run`]
//! (one command stopped like a pod), [`demo`], the node agent (the
//! `grace-agent` library, run by `grace agent`; with the `etcd` feature,
//! the agent of one node among several), the
//! kubectl-style store commands ([`kubectl`], object files in
//! [`manifest`], container output in [`logs`]) and `grace simulate`
//! (argument parsing and output over the `grace-sim` crate).
//!
//! This crate is the binary's; its modules are public so that its tests
//! can reach them, not as a library API.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The library's modules, under the names the CLI's code uses.
use grace_agent::api;
use grace_std::{api_server, clock, process, runtime, store};

pub mod agent_log;
pub mod apply;
pub mod command_error;
pub mod completion;
pub mod custom_columns;
pub mod demo;
pub mod describe;
pub mod escape;
pub mod field_error;
pub mod field_selector;
pub mod jsonpath;
pub mod k8s_pod;
pub mod kubectl;
pub mod logs;
pub mod manifest;
pub mod manifest_file;
pub mod namespace;
pub mod output;
pub mod patch;
pub mod resource;
pub mod run;
pub mod selector;
pub mod sort_by;
pub mod wait_for;
