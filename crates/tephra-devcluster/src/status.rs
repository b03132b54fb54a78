//! The API server's errors as Kubernetes `Status` objects: the HTTP code, `reason`, `details`
//! and the exact messages of apimachinery's error constructors, which `kubectl` prints and
//! kube-rs decodes.

use serde_json::{Value, json};

/// One cause of an `Invalid` (or conflict) error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldManagerConflict`, ...
    pub reason: String,
    /// What is wrong, without the field.
    pub message: String,
    /// The field path, e.g. `spec.tasks[0].replicas`.
    pub field: String,
}

/// An error answer of the API server.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, `Invalid`, ...).
    pub reason: &'static str,
    /// The message `kubectl` prints.
    pub message: String,
    /// `details` (name, group, kind, causes, retryAfterSeconds), when any.
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `pods` for the core group, `jobs.batch.volcano.sh` otherwise (`GroupResource.String()`).
pub fn group_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// `details` as apimachinery encodes them: empty fields are left out.
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = serde_json::Map::new();
    for (k, v) in [("name", name), ("group", group), ("kind", kind)] {
        if !v.is_empty() {
            d.insert(k.into(), json!(v));
        }
    }
    Value::Object(d)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }

    /// `Retry-After` seconds, when the details carry them.
    pub fn retry_after(&self) -> Option<u64> {
        self.details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
            .filter(|s| *s > 0)
    }

    /// 404 `<gr> "<name>" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", group_resource(group, resource)),
        )
        .with_details(details(name, group, resource))
    }

    /// 404 for a path the server does not serve.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 `<gr> "<name>" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!(
                "{} {name:?} already exists",
                group_resource(group, resource)
            ),
        )
        .with_details(details(name, group, resource))
    }

    /// 409 Conflict with apimachinery's `Operation cannot be fulfilled on ...` wording.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                group_resource(group, resource)
            ),
        )
        .with_details(details(name, group, resource))
    }

    /// 409 for a stale `resourceVersion` (the optimistic-lock message).
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and \
             try again",
        )
    }

    /// 422 Invalid: `<Kind>[.<group>] "<name>" is invalid: ...`, one cause per field.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let text = |c: &Cause| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        };
        let summary = match causes.as_slice() {
            [one] => text(one),
            many => format!("[{}]", many.iter().map(text).collect::<Vec<_>>().join(", ")),
        };
        let causes_json: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        Self::new(
            422,
            "Invalid",
            format!("{qualified} {name:?} is invalid: {summary}"),
        )
        .with_details({
            let mut d = details(name, group, kind);
            d["causes"] = json!(causes_json);
            d
        })
    }

    /// 422 with one `FieldValueInvalid` or `FieldValueRequired` cause.
    pub fn invalid_field(group: &str, kind: &str, name: &str, field: &str, message: &str) -> Self {
        let reason = if message == "Required value" {
            "FieldValueRequired"
        } else {
            "FieldValueInvalid"
        };
        Self::invalid(
            group,
            kind,
            name,
            vec![Cause {
                reason: reason.into(),
                message: message.into(),
                field: field.into(),
            }],
        )
    }

    /// 422 without field causes (a JSON patch whose `test` failed, ...).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden: `<gr> "<name>" is forbidden: <why>`.
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let gr = group_resource(group, resource);
        let message = if name.is_empty() {
            format!("{gr} is forbidden: {why}")
        } else {
            format!("{gr} {name:?} is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(details(name, group, resource))
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 410 Expired (a resourceVersion or continue token older than the kept history).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType for a patch type the resource does not take.
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        let _ = content_type;
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 429 TooManyRequests with causes (an eviction a disruption budget forbids).
    pub fn too_many_requests(message: &str, causes: Vec<Cause>, retry_after: u64) -> Self {
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message}))
            .collect();
        let mut d = json!({"causes": causes});
        if retry_after > 0 {
            d["retryAfterSeconds"] = json!(retry_after);
        }
        Self::new(429, "TooManyRequests", message).with_details(d)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// An injected server failure with the given 5xx code.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, "tephra-devcluster: injected failure")
    }
}

/// The `Status` body of a success without an object (`delete` of most kinds, `binding`).
pub fn success(code: Option<u16>, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some(c) = code {
        s["code"] = json!(c);
    }
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_messages_read_as_the_api_servers() {
        let one = ApiError::invalid_field("", "Pod", "bad", "spec.containers", "Required value");
        assert_eq!(
            one.message,
            "Pod \"bad\" is invalid: spec.containers: Required value"
        );
        let cr = ApiError::invalid(
            "batch.volcano.sh",
            "Job",
            "j",
            vec![
                Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "a".into(),
                    field: "spec.x".into(),
                },
                Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "b".into(),
                    field: "spec.y".into(),
                },
            ],
        );
        assert_eq!(
            cr.message,
            "Job.batch.volcano.sh \"j\" is invalid: [spec.x: a, spec.y: b]"
        );
        assert_eq!(cr.to_status()["details"]["causes"][1]["field"], "spec.y");
        assert_eq!(cr.to_status()["code"], 422);
    }

    #[test]
    fn not_found_names_the_group_resource() {
        let e = ApiError::not_found("batch.volcano.sh", "jobs", "j1");
        assert_eq!(e.message, "jobs.batch.volcano.sh \"j1\" not found");
        assert_eq!(
            ApiError::not_found("", "pods", "p").message,
            "pods \"p\" not found"
        );
    }
}
