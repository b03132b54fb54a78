//! API defaults, shared by serde and the generated schemas (where the API server applies them).

/// The queue a Job or PodGroup uses when it names none.
pub const DEFAULT_QUEUE: &str = "default";
/// The root of the queue hierarchy.
pub const ROOT_QUEUE: &str = "root";

/// A DNS-1123 subdomain (the names of queues and priority classes), as Volcano's CRDs check it.
pub const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

pub(crate) fn queue() -> String {
    DEFAULT_QUEUE.to_string()
}

pub(crate) fn max_retry() -> i32 {
    3
}

pub(crate) fn weight() -> i32 {
    1
}
