//! API defaults, shared by serde and the generated schemas (where the API server applies them).

/// The queue a Job or PodGroup uses when it names none.
pub const DEFAULT_QUEUE: &str = "default";
/// The root of the queue hierarchy.
pub const ROOT_QUEUE: &str = "root";

pub(crate) fn queue() -> String {
    DEFAULT_QUEUE.to_string()
}

pub(crate) fn max_retry() -> i32 {
    3
}

pub(crate) fn weight() -> i32 {
    1
}
