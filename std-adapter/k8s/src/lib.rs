//! # grace-k8s
//!
//! Conversions between Kubernetes' types ([k8s-openapi]) and grace's, both
//! ways, for Rust code that talks to a cluster (kube-rs, or any client of
//! k8s-openapi's types) and wants grace's deletion semantics:
//!
//! - [`record_from_pod`]: a `Pod` (or any object's `ObjectMeta`, with
//!   [`record_from_meta`]) as the [`Record`] grace-core decides on, with
//!   the Pod's containers as [`ContainerSpec`]s ([`container_specs`]);
//! - [`meta_from_record`] / [`apply_record`]: the record written back as
//!   an `ObjectMeta` (a merge patch's metadata), and [`phase_patch`] the
//!   status a kubelet would write;
//! - [`delete_options_from_wire`] / [`delete_options_to_wire`]:
//!   `DeleteOptions` as Kubernetes sends them (camelCase, a string
//!   resource version, a `dryRun` list) and as grace-core takes them.
//!
//! - with the `store` feature, [`pod_object`]: a Pod as the object a
//!   grace-std store holds (`to_object`, refusing what grace cannot run)
//!   and a stored object as a Pod with its status (`to_pod`).
//!
//! Every conversion that can fail returns a [`BridgeError`] naming the
//! field. grace-core stays `no_std` and free of this crate; this one needs
//! `alloc` (k8s-openapi does).
//!
//! ## Choosing the Kubernetes version
//!
//! k8s-openapi needs exactly one version feature, chosen by the final
//! crate, never by a library. This crate chooses none: your binary depends
//! on `k8s-openapi` with the version of your cluster:
//!
//! ```toml
//! [dependencies]
//! grace-k8s = "0.1"
//! k8s-openapi = { version = "0.29", features = ["v1_34"] }
//! ```
//!
//! ## Example
//!
//! ```
//! use grace_core::{DeleteOutcome, Lifecycle, Now, Strategy, decide_delete};
//! use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//!
//! let pod = Pod {
//!     metadata: ObjectMeta {
//!         name: Some("web".into()),
//!         uid: Some("5c8e7f3a".into()),
//!         resource_version: Some("12".into()),
//!         generation: Some(1),
//!         ..ObjectMeta::default()
//!     },
//!     spec: Some(PodSpec {
//!         node_name: Some("node-a".into()),
//!         termination_grace_period_seconds: Some(30),
//!         containers: vec![Container { name: "app".into(), ..Container::default() }],
//!         ..PodSpec::default()
//!     }),
//!     status: None,
//! };
//! let record = grace_k8s::record_from_pod::<4>(&pod)?;
//! // `kubectl delete pod web`: `{}` on the wire, no grace given (R1).
//! let options = grace_k8s::delete_options_from_wire(&Default::default())?;
//! let now = grace_core::WallTime::from_unix_millis(1_700_000_000_000);
//! let decision = decide_delete(&record, &Strategy::POD, &options, now)?;
//! assert_eq!(decision.outcome, DeleteOutcome::Graceful);
//! let meta = grace_k8s::meta_from_record(&decision.record);
//! assert_eq!(meta.deletion_grace_period_seconds, Some(30)); // R18
//! assert_eq!(meta.generation, Some(2)); // R25
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [k8s-openapi]: https://docs.rs/k8s-openapi

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "store")]
mod container_env;
#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod deletion_events;
mod error;
mod meta;
mod options;
#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod pod_object;
#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod pod_status;

pub use error::BridgeError;
pub use meta::{
    LATEST_TIME_SECONDS, apply_record, container_specs, meta_from_record, phase_patch,
    record_from_meta, record_from_pod, rfc3339, time,
};
pub use options::{delete_options_from_wire, delete_options_to_wire};

#[doc(no_inline)]
pub use grace_core::{ContainerSpec, DeleteOptions, Record};
