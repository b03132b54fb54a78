//! What one session brings, in one call: from the session's decisions and the state, every
//! write the tick hands to the executor, in order: binds, evictions and status ([`Planner`]),
//! recounted PodGroups, ResourceBindings, declared pods' status, aggregated binding status,
//! nominations, graceful evictions that ran out, stray pods and the conditions of pods that
//! wait, orphaned copies, and gangs left
//! short by failed binds past their deadline. No IO: the loop in `run.rs` passes the clock.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra_scheduler::Decisions;

use crate::state::State;
use crate::writes::{Planner, Write, evict_gang};

/// The clock of one tick.
pub struct Clock {
    /// Now, in seconds (the session's time).
    pub now: i64,
    /// Now, in milliseconds.
    pub now_ms: i64,
    /// Now, for conditions' `lastTransitionTime`.
    pub stamp: Time,
}

/// How long things may take before the tick acts on them.
pub struct Deadlines {
    /// A graceful-eviction task's timeout, in ms.
    pub graceful_eviction_ms: i64,
    /// How long a gang may stay short after failed binds, in seconds.
    pub gang_bind_s: i64,
}

/// Every write that session `d` brings.
pub fn writes(
    state: &mut State,
    planner: &mut Planner,
    d: &Decisions,
    clock: &Clock,
    deadlines: &Deadlines,
) -> Vec<Write> {
    let mut writes = {
        let state = &*state;
        let mut w = planner.plan(
            d,
            &|job| state.group(job).cloned(),
            &|pod| state.declared(pod).cloned(),
            &|cluster, job| state.extender_plan(cluster, job),
            &clock.stamp,
        );
        w.extend(planner.recount(d, state.recounted(), &|job| state.group(job).cloned()));
        w
    };
    writes.extend(state.bindings(d));
    writes.extend(state.take_status_writes());
    writes.extend(state.aggregated_statuses(&clock.stamp));
    writes.extend(state.nominations(d));
    writes.extend(state.graceful_evictions(clock.now_ms, deadlines.graceful_eviction_ms));
    writes.extend(state.stray_pods(clock.now_ms));
    writes.extend(state.unschedulable_pods(d));
    writes.extend(state.hypernode_statuses());
    match state.orphan_deletions(clock.now_ms) {
        Ok(w) => writes.extend(w),
        Err(e) => tracing::warn!(error = %e, "member copies of deleted pods not set aside"),
    }
    for (job, held) in state.expired_gangs(clock.now, deadlines.gang_bind_s) {
        tracing::warn!(job = %job, pods = held.len(), "gang still below minMember after failed binds: evicted whole");
        writes.extend(evict_gang(
            &job,
            &held,
            state.group(&job).cloned(),
            deadlines.gang_bind_s,
        ));
    }
    for_kube_groups(state, writes, clock)
}

/// The writes meant for Volcano PodGroups, turned into what a Kubernetes PodGroup takes where
/// the gang is one (the Workload API front end): its decided status kept in the state and the
/// condition it implies written, and its Events about a `scheduling.k8s.io` object.
fn for_kube_groups(state: &mut State, writes: Vec<Write>, clock: &Clock) -> Vec<Write> {
    use crate::writes::Involved;
    if !state.has_kube_groups() {
        return writes;
    }
    let mut out = Vec::with_capacity(writes.len());
    for mut w in writes {
        match &mut w {
            Write::Event {
                kind,
                namespace,
                group,
                ..
            } if *kind == Involved::PodGroup
                && state.is_kube_group(&format!("{namespace}/{group}")) =>
            {
                *kind = Involved::KubePodGroup;
            }
            Write::GroupStatus {
                namespace,
                name,
                status,
                ..
            } => {
                let job = format!("{namespace}/{name}");
                if state.is_kube_group(&job) {
                    let status = std::mem::take(status);
                    out.extend(state.kube_group_decided(clock.now, &job, status, &clock.stamp));
                    continue;
                }
            }
            _ => {}
        }
        out.push(w);
    }
    out
}
