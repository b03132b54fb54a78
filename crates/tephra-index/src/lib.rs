//! tephra-index: the pure half of tephra's runtime on Kubernetes, as linkerd's
//! policy-controller splits its index from its runtime. Everything here is a plain function of
//! what it is given: no IO, no async runtime, no Kubernetes client (its dependencies have
//! none), so it is tested without a server. `tephra-kube` is the thin runtime around it: its
//! watchers feed [`state::State`] with [`observed::Update`]s, its loop runs a session and asks
//! [`tick::writes`] for every write the tick brings, and its executor carries out the
//! [`writes::Write`]s against the clusters.
//!
//! - [`observed`]: what the watchers report (kinds, objects, changes).
//! - [`convert`]: Kubernetes objects read into the scheduler core's model.
//! - [`state`]: the scheduler's picture of the world between sessions, around the core cache.
//! - [`writes`]: the writes a session's decisions call for, and the planner that keeps them to
//!   what changed.
//! - [`tick`]: one tick's writes, in one call.
//! - [`endpoint`]: where a member is reached.
//! - [`eta`]: waiting jobs' expected start, recomputed off the session's path.
//! - [`view`]: what the web UI shows of the fleet.
//! - [`history`]: what it shows over time: queue samples, jobs' reasons, failover.
//! - [`workload`]: Kubernetes' own PodGroups (the Workload API) read as the same gangs, and
//!   the condition written back on them.
//! - [`karmada`]: Karmada mode: Karmada's ResourceBindings scheduled whole onto members, and
//!   what tephra writes back on them.

pub mod convert;
pub mod endpoint;
pub mod eta;
pub mod history;
pub mod karmada;
pub mod observed;
pub mod state;
pub mod tick;
pub mod view;
pub mod workload;
pub mod writes;
