//! Errors as Kubernetes answers them: a `metav1.Status` with the matching
//! HTTP code, worded as kube-apiserver words them (kubectl prints
//! `Error from server (REASON): MESSAGE`).

use serde_json::{Value, json};

use crate::api::{ApiError, ErrorKind};

/// A failed request, as the API answers it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Status {
    /// The HTTP code.
    pub code: u16,
    /// Kubernetes' reason (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// What happened.
    pub message: String,
    /// The object's name, if it is about one.
    pub name: Option<String>,
    /// For Invalid (422): the field and message of each cause.
    pub causes: Vec<(String, String)>,
    /// The resource the name is of (`details.kind`).
    pub kind: &'static str,
}

impl Status {
    fn new(code: u16, reason: &'static str, message: String) -> Status {
        Status {
            code,
            reason,
            message,
            name: None,
            causes: Vec::new(),
            kind: "pods",
        }
    }

    /// 404 for a pod: `pods "NAME" not found`.
    pub fn pod_not_found(name: &str) -> Status {
        Status {
            name: Some(name.to_owned()),
            ..Status::new(404, "NotFound", format!("pods \"{name}\" not found"))
        }
    }

    /// 404 for a namespace this agent does not serve.
    pub fn namespace_not_found(namespace: &str) -> Status {
        Status {
            name: Some(namespace.to_owned()),
            kind: "namespaces",
            ..Status::new(
                404,
                "NotFound",
                format!("namespaces \"{namespace}\" not found"),
            )
        }
    }

    /// 404 for a path that is not served.
    pub fn not_served() -> Status {
        Status::new(
            404,
            "NotFound",
            "the server could not find the requested resource".to_owned(),
        )
    }

    /// 405 for a verb a served path does not take.
    pub fn method_not_allowed(method: &str, what: &str) -> Status {
        Status::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({method} {what})"
            ),
        )
    }

    /// 400 with a message.
    pub fn bad_request(message: impl Into<String>) -> Status {
        Status::new(400, "BadRequest", message.into())
    }

    /// 409 AlreadyExists.
    pub fn already_exists(name: &str) -> Status {
        Status {
            name: Some(name.to_owned()),
            ..Status::new(
                409,
                "AlreadyExists",
                format!("pods \"{name}\" already exists"),
            )
        }
    }

    /// 409 Conflict: a precondition or a stale resourceVersion.
    pub fn conflict(name: &str, why: &str) -> Status {
        Status {
            name: Some(name.to_owned()),
            ..Status::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on pods \"{name}\": {why}"),
            )
        }
    }

    /// 422 Invalid, with one cause.
    pub fn invalid(name: &str, field: &str, message: &str) -> Status {
        Status {
            name: Some(name.to_owned()),
            causes: vec![(field.to_owned(), message.to_owned())],
            ..Status::new(
                422,
                "Invalid",
                format!("Pod \"{name}\" is invalid: {field}: {message}"),
            )
        }
    }

    /// 403 for a user who may not do `verb` on `resource` (`pods`,
    /// `pods/log`) in `namespace` (`None`: across namespaces), as
    /// kube-apiserver's authorizer words it.
    pub fn forbidden(
        user: &str,
        verb: &str,
        resource: &str,
        name: Option<&str>,
        namespace: Option<&str>,
    ) -> Status {
        let base = resource.split('/').next().unwrap_or(resource);
        let what = name.map_or_else(|| base.to_owned(), |n| format!("{base} \"{n}\""));
        let scope = namespace.map_or_else(
            || "at the cluster scope".to_owned(),
            |ns| format!("in the namespace \"{ns}\""),
        );
        Status::new(
            403,
            "Forbidden",
            format!(
                "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"\" {scope}"
            ),
        )
    }

    /// 410 Gone: a watch from a revision the store no longer keeps.
    pub fn expired(message: String) -> Status {
        Status::new(410, "Expired", message)
    }

    /// 429 TooManyRequests: over a connection or watch quota.
    pub fn too_many(message: String) -> Status {
        Status::new(429, "TooManyRequests", message)
    }

    /// 503 ServiceUnavailable: the agent cannot start what the request
    /// needs (a thread: the machine is out of processes or threads); the
    /// client may try again.
    pub fn unavailable(message: String) -> Status {
        Status::new(503, "ServiceUnavailable", message)
    }

    /// 500 InternalError.
    pub fn internal(message: String) -> Status {
        Status::new(500, "InternalError", message)
    }

    /// The agent's own error for a request about `name`, in Kubernetes'
    /// terms.
    pub fn from_api(name: &str, e: ApiError) -> Status {
        match e.kind {
            ErrorKind::NotFound => Status::pod_not_found(name),
            ErrorKind::AlreadyExists => Status::already_exists(name),
            ErrorKind::Conflict => Status::conflict(name, &e.message),
            ErrorKind::Invalid => Status::invalid(name, "metadata", &e.message),
            ErrorKind::Forbidden => Status::new(403, "Forbidden", e.message),
            ErrorKind::BadRequest => Status::bad_request(e.message),
            ErrorKind::Internal => Status::internal(e.message),
        }
    }

    /// The `metav1.Status` JSON.
    pub fn to_json(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
            let kind = match (self.code, self.kind) {
                (422, "namespaces") => "Namespace",
                (422, _) => "Pod",
                (_, kind) => kind,
            };
            details.insert("kind".into(), json!(kind));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|(field, message)| {
                    json!({"reason": "FieldValueInvalid", "message": message, "field": field})
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if !details.is_empty()
            && let Some(map) = status.as_object_mut()
        {
            map.insert("details".into(), Value::Object(details));
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_worded_as_kube_apiserver_words_it() {
        let s = Status::pod_not_found("x").to_json();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["message"], "pods \"x\" not found");
        assert_eq!(s["details"]["kind"], "pods");
    }

    #[test]
    fn invalid_carries_its_causes() {
        let s = Status::invalid("bad", "spec.containers", "Required value").to_json();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][0]["field"], "spec.containers");
    }
}
