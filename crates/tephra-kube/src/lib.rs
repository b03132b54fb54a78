//! tephra-kube: tephra's runtime on Kubernetes (see DESIGN.md, "The runtime around the core"),
//! the thin, IO-doing half around `tephra-index` (the pure index and planner, re-exported here
//! as [`convert`], [`state`], [`tick`] and [`writes`]).
//!
//! Watchers ([`watch`]) feed every Node, Pod, PodGroup, Queue, PriorityClass and
//! PodDisruptionBudget into the state ([`state`]), which holds the core cache. Every period, as
//! leader ([`leader`]), the loop ([`run`]) runs a session on a snapshot, plans in one call
//! ([`tick`]) the writes its decisions call for ([`writes`]) and hands them to the executor
//! ([`executor`], talking to the clusters of [`clients`]): binds,
//! evictions, PodGroup and Queue status, Events; in a fleet, a declared pod's copy in its member,
//! after its dependencies ([`deps`]). [`metrics`] carries Volcano's metric names, [`report`] fills
//! them after each session, and [`serve`] the `/metrics`, `/healthz` and `/readyz` endpoints. [`convert`] reads Kubernetes
//! objects into the core's model. The controllers of `tephra controller-manager`
//! have adapters here too: [`jobs`] (Volcano Jobs), [`bare_pods`] (a PodGroup for a pod
//! without one), [`queues`] (queue state and counts), [`cronjobs`] (Jobs on a schedule, by
//! the controller manager's [`clock`]) and [`jobflows`] (Jobs from templates in dependency
//! order), those two sharing [`owned_jobs`], all on the loop of [`reconciler`] ([`commands`] is how they take Commands);
//! [`events`] builds the Events the scheduler and controllers record. [`cluster_status`] probes
//! the members and writes their Cluster's Ready condition, summaries and taints;
//! [`failover`] takes a cluster out of a job's ResourceBinding, with a graceful-eviction task,
//! when its NoExecute taint is not tolerated or the job stays unhealthy there. [`ui`] serves
//! the web UI, and [`eta`] keeps waiting jobs' expected starts recomputed off the loop.
//! [`karmada`] is the Karmada mode: tephra as the scheduler of Karmada's ResourceBindings.

pub use tephra_index::{convert, state, tick, writes};

pub mod bare_pods;
pub mod brief;
pub mod clients;
pub mod clock;
pub mod cluster_status;
pub mod commands;
pub mod connect;
pub mod cronjobs;
pub mod deps;
pub mod eta;
pub mod events;
pub mod executor;
pub mod failover;
pub mod gone;
pub mod gpu_lock;
pub mod jobflows;
pub mod jobs;
pub mod karmada;
pub mod lanes;
pub mod leader;
pub mod logging;
pub mod members;
pub mod metrics;
pub mod owned_jobs;
pub mod place;
pub mod prebind;
pub mod queues;
pub mod reconciler;
pub mod report;
pub mod retry;
pub mod run;
pub mod serve;
pub mod slim;
pub mod ui;
pub mod virtual_node;
pub mod watch;
pub mod workload_api;
mod write_queues;

pub use run::{MemberSource, Options, Running, StartError, start};
