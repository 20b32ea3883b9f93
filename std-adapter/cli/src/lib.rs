//! # grace-cli
//!
//! The `grace` command line, built on the `grace-std` library: [`run`]
//! (one command stopped like a pod), [`demo`], the node [`agent`] (and,
//! with the `etcd` feature, the agent of one node among several), the
//! kubectl-style store commands ([`kubectl`], object files in
//! [`manifest`], container output in [`logs`]) and `grace simulate`
//! (argument parsing and output over the `grace-sim` crate).
//!
//! This crate is the binary's; its modules are public so that its tests
//! can reach them, not as a library API.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The library's modules, under the names the CLI's code uses.
use grace_std::{api, api_server, clock, process, runtime, store};

pub mod agent;
pub mod apply;
pub mod demo;
pub mod describe;
pub mod escape;
pub mod field_error;
pub mod k8s_pod;
pub mod kubectl;
pub mod logs;
pub mod manifest;
pub mod manifest_file;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod node_agent;
pub mod output;
pub mod resource;
pub mod run;
pub mod selector;
pub mod validate;
