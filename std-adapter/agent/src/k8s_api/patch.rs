//! The PATCH of a Pod: the three patch formats are [`crate::patch`]'s
//! (shared with `grace patch -p`); here their errors become the message
//! of the API's Invalid status.

use serde_json::Value;

/// RFC 7386 ([`crate::patch::merge`]).
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    crate::patch::merge(target, patch);
}

/// Strategic merge patch ([`crate::patch::apply`]: nothing changes on an
/// error).
pub(crate) fn strategic(target: &mut Value, patch: &Value) -> Result<(), String> {
    crate::patch::apply(crate::patch::PatchType::Strategic, target, patch)
        .map_err(|e| e.to_string())
}

/// RFC 6902 ([`crate::patch::json_patch`]).
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    crate::patch::json_patch(target, patch).map_err(|e| e.to_string())
}
