//! Karmada's graceful eviction, for one task on a ResourceBinding: when may the old copy of a
//! gang (the pods in `fromCluster`) be deleted? Gracefully (the default): once the new
//! placement has all of the gang's minMember pods Running, or once the task's grace period
//! (else the controller's timeout) has passed since it was made. An empty placement never
//! counts as healthy: with nowhere else to run, the old copy stays until the timeout.
//! `Directly` deletes at once; `Never` keeps the old pods (the task stays as the record);
//! `suppressDeletion: true` holds the deletion until a user sets it false, which deletes.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tephra_api::policy::PurgeMode;
use tephra_api::work::{GracefulEvictionTask, ResourceBinding};
use tephra_scheduler::cache::World;
use tephra_scheduler::model::TaskStatus;

/// What a failover controller (taint manager, application failover) decides for one binding.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// The binding with the clusters it leaves taken out and their tasks added, when any.
    pub binding: Option<ResourceBinding>,
    /// The clusters taken out.
    pub evicted: Vec<String>,
    /// When to look again (a toleration runs out), in ms.
    pub wake_ms: Option<i64>,
}

impl Decision {
    /// Whether the pass changes nothing and needs no second look.
    pub fn is_nothing(&self) -> bool {
        self.binding.is_none() && self.evicted.is_empty() && self.wake_ms.is_none()
    }
}

/// What a failover controller puts on the tasks it adds.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskTemplate {
    /// The controller (`TaintManager`, `ApplicationFailover`).
    pub producer: &'static str,
    /// Why.
    pub reason: &'static str,
    /// How the old copy goes.
    pub purge_mode: PurgeMode,
    /// The longest wait for the new placement, in seconds.
    pub grace_period_seconds: Option<i32>,
}

/// `rb` without the `clusters` it is evicted from, with a task for each (`message(cluster)`
/// says why) unless one is already there.
pub fn evict_from(
    rb: &ResourceBinding,
    clusters: &[String],
    template: &TaskTemplate,
    message: impl Fn(&str) -> String,
    now_ms: i64,
) -> ResourceBinding {
    let mut next = rb.clone();
    next.spec.clusters.retain(|c| !clusters.contains(&c.name));
    let now = Time(Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH));
    for cluster in clusters {
        let tasks = &mut next.spec.graceful_eviction_tasks;
        if tasks.iter().any(|t| &t.from_cluster == cluster) {
            continue;
        }
        tasks.push(GracefulEvictionTask {
            from_cluster: cluster.clone(),
            purge_mode: Some(template.purge_mode),
            reason: template.reason.into(),
            message: Some(message(cluster)),
            producer: template.producer.into(),
            grace_period_seconds: template.grace_period_seconds,
            suppress_deletion: None,
            creation_timestamp: Some(now.clone()),
        });
    }
    next
}

/// How the new placement of the gang runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewPlacement {
    /// Clusters the binding places the gang in now (the evicted one no longer among them).
    pub clusters: usize,
    /// Pods of the gang Running there.
    pub running: u32,
    /// The gang's minMember.
    pub min_member: u32,
}

impl NewPlacement {
    /// How `job` runs now, as the scheduler's cache holds it: the clusters its pods are placed
    /// in ([`TaskStatus::is_placed`]; a moved gang's old copy is set aside as ghosts, which are
    /// no longer its pods, so these are its new place), its pods Running, and its minMember.
    pub fn of(world: &World, job: &str) -> Self {
        let Some(j) = world.job_id(job).and_then(|id| world.jobs.get(id)) else {
            return Self {
                clusters: 0,
                running: 0,
                min_member: 1,
            };
        };
        let mut clusters = BTreeSet::new();
        let mut running = 0u32;
        for t in j.tasks.iter().filter_map(|&t| world.tasks.get(t)) {
            if let (Some((c, _)), true) = (&t.spec.placement, t.spec.status.is_placed()) {
                clusters.insert(c.as_str());
                running += u32::from(t.spec.status == TaskStatus::Running);
            }
        }
        Self {
            clusters: clusters.len(),
            running,
            min_member: j.group.as_ref().map_or(1, |g| g.min_member),
        }
    }

    /// Whether the gang runs whole in its new place.
    pub fn healthy(&self) -> bool {
        self.clusters > 0 && self.running >= self.min_member.max(1)
    }
}

/// What to do with a task now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Delete the old pods and drop the task.
    Purge,
    /// Not yet: look again at this time (ms) or when the placement changes.
    Wait {
        /// When the timeout runs out.
        until_ms: i64,
    },
    /// Keep the old pods and the task (`Never`, or deletion suppressed).
    Hold,
}

/// The verdict on `task` at `now_ms`, with `timeout_ms` the controller's default
/// (`--graceful-eviction-timeout`) for a task that gives no grace period.
pub fn assess(
    task: &GracefulEvictionTask,
    new: NewPlacement,
    now_ms: i64,
    timeout_ms: i64,
) -> Verdict {
    match task.suppress_deletion {
        Some(true) => return Verdict::Hold,
        Some(false) => return Verdict::Purge,
        None => {}
    }
    match task.purge_mode.unwrap_or(PurgeMode::Gracefully) {
        PurgeMode::Directly => return Verdict::Purge,
        PurgeMode::Never => return Verdict::Hold,
        PurgeMode::Gracefully => {}
    }
    if new.healthy() {
        return Verdict::Purge;
    }
    let made = task
        .creation_timestamp
        .as_ref()
        .map_or(now_ms, |t| t.0.as_millisecond());
    let wait = task
        .grace_period_seconds
        .map_or(timeout_ms, |s| i64::from(s.max(0)) * 1000);
    let until_ms = made + wait;
    if now_ms >= until_ms {
        Verdict::Purge
    } else {
        Verdict::Wait { until_ms }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn task(
        mode: Option<PurgeMode>,
        grace: Option<i32>,
        suppress: Option<bool>,
    ) -> GracefulEvictionTask {
        GracefulEvictionTask {
            from_cluster: "east".into(),
            purge_mode: mode,
            reason: "TaintUntolerated".into(),
            message: None,
            producer: "TaintManager".into(),
            grace_period_seconds: grace,
            suppress_deletion: suppress,
            creation_timestamp: Some(Time(Timestamp::from_millisecond(0).expect("t"))),
        }
    }

    const RUNNING: NewPlacement = NewPlacement {
        clusters: 1,
        running: 8,
        min_member: 8,
    };
    const STARTING: NewPlacement = NewPlacement {
        clusters: 1,
        running: 5,
        min_member: 8,
    };
    const NOWHERE: NewPlacement = NewPlacement {
        clusters: 0,
        running: 0,
        min_member: 8,
    };

    #[test]
    fn the_old_copy_goes_once_the_new_one_runs_whole() {
        let t = task(None, None, None);
        assert_eq!(
            assess(&t, STARTING, 1_000, 600_000),
            Verdict::Wait { until_ms: 600_000 }
        );
        assert_eq!(assess(&t, RUNNING, 1_000, 600_000), Verdict::Purge);
    }

    #[test]
    fn an_empty_placement_never_counts_as_healthy_but_the_timeout_ends_the_wait() {
        let t = task(Some(PurgeMode::Gracefully), Some(30), None);
        let empty_but_zero = NewPlacement {
            min_member: 0,
            ..NOWHERE
        };
        assert_eq!(
            assess(&t, empty_but_zero, 1_000, 600_000),
            Verdict::Wait { until_ms: 30_000 }
        );
        assert_eq!(assess(&t, NOWHERE, 30_000, 600_000), Verdict::Purge);
    }

    #[test]
    fn directly_purges_at_once_never_and_suppression_hold_and_unsuppressing_purges() {
        assert_eq!(
            assess(&task(Some(PurgeMode::Directly), None, None), NOWHERE, 0, 1),
            Verdict::Purge
        );
        assert_eq!(
            assess(
                &task(Some(PurgeMode::Never), None, None),
                RUNNING,
                1 << 40,
                1
            ),
            Verdict::Hold
        );
        assert_eq!(
            assess(&task(None, None, Some(true)), RUNNING, 1 << 40, 1),
            Verdict::Hold
        );
        assert_eq!(
            assess(&task(None, None, Some(false)), NOWHERE, 0, 1),
            Verdict::Purge
        );
    }

    #[test]
    fn the_new_placement_is_where_the_jobs_own_pods_are_placed_and_how_many_run() {
        use tephra_scheduler::Cache;
        use tephra_scheduler::model::{Cluster, GroupPhase};
        use tephra_scheduler::testing::{GPU8, GangJob, Role, add_cluster, add_job, add_nodes};
        let mut c = Cache::new();
        for name in ["east", "west"] {
            add_cluster(&mut c, Cluster::named(name)).expect("cluster");
            add_nodes(&mut c, name, name, 1, GPU8, &[]).expect("nodes");
        }
        let job = GangJob::new("g", vec![Role::new("w", 3, &[("cpu", "1")])])
            .phase(GroupPhase::Running)
            .min_member(3);
        add_job(&mut c, &job).expect("job");
        assert_eq!(
            NewPlacement::of(c.world(), "default/g"),
            NewPlacement {
                clusters: 0,
                running: 0,
                min_member: 3
            }
        );
        let set = |c: &mut Cache, i: usize, status, node: &str| {
            let at = Some((node.to_string(), format!("{node}-0")));
            c.set_task(&format!("default/g-w-{i}"), status, at)
                .expect("set");
        };
        set(&mut c, 0, TaskStatus::Running, "west");
        set(&mut c, 1, TaskStatus::Binding, "west");
        // Its old copy in east, set aside, is no longer the job's.
        set(&mut c, 2, TaskStatus::Running, "east");
        c.set_aside("default/g-w-2", "east").expect("aside");
        let now = NewPlacement::of(c.world(), "default/g");
        assert_eq!(
            now,
            NewPlacement {
                clusters: 1,
                running: 1,
                min_member: 3
            }
        );
        assert!(!now.healthy());
        // A finished pod is not placed, and a job the cache does not hold runs nowhere.
        set(&mut c, 1, TaskStatus::Succeeded, "west");
        assert_eq!(NewPlacement::of(c.world(), "default/g").clusters, 1);
        assert_eq!(NewPlacement::of(c.world(), "default/none").clusters, 0);
    }
}
