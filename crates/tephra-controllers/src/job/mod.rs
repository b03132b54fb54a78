//! Volcano's job controller, as pure functions: a Job in, what to write out.
//!
//! - [`gang`]: the Job's gang plan (Volcano's defaults) and the gang the scheduler sees;
//! - [`names`]: the names of a Job's PodGroup and pods, and the owner reference to the Job;
//! - [`pods`]: the PodGroup and the pods the controller creates for a Job;
//! - [`plugins`]: the job plugins (`env`, `svc`, `pytorch`, `mpi`, `ssh`), a trait and a
//!   registry, one file each;
//! - [`observe`]: the Job's pods as the controller reads them, and the status counts;
//! - [`policy`]: the events the pods show and the lifecycle policies' actions for them;
//! - [`lifecycle`]: the state machine (phases, actions, how pods are killed);
//! - [`reconcile()`]: one pass over one Job, tying the above together.

pub mod gang;
pub mod lifecycle;
pub mod names;
pub mod observe;
pub mod plugins;
pub mod pods;
pub mod policy;
pub mod reconcile;

pub use gang::{GangPlan, JobError, TaskPlan, plan};
pub use reconcile::{Observed, Outcome, Write, reconcile};
