//! tephra's controllers, as pure functions over state (no IO, no clock). The Kubernetes
//! runtime and the simulator call the same functions.

pub mod job;
