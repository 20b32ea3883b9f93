//! Pods as the CLI reads and shows them: the conversions are grace-k8s's
//! ([`grace_k8s::pod_object`]); this module names them for the CLI's code
//! (object files, `grace get -o json|yaml`, label selectors).

pub use grace_k8s::pod_object::{
    PodError, PodObject, check_label, ignored_fields, to_object, to_pod,
};
