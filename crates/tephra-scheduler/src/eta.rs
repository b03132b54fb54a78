//! Expected start times: the scheduler core run forward on a copy of the cache, as Slurm's
//! `squeue --start` answers "when will my job start". Pods that run end after the time the
//! caller expects them to take; at each moment a pod ends, one session runs on what is left
//! and places what it can, and the pods it starts end after their own expected time in turn.
//! Pods a session evicts (preempt, reclaim) free their room at once and are made again, to
//! wait anew, as their controller makes them.
//! A waiting job's expected start is the moment of the session after which it holds its gang
//! (minMember pods placed). It stops when every job that waited has started, when nothing more
//! ends within the horizon, or when the budget of sessions is spent.
//!
//! A job with fewer pods than its minMember (a Volcano Job's controller creates its pods only
//! once the PodGroup is admitted) is given stand-ins for the pods it lacks: its minResources
//! less what its pods ask, shared evenly, so that it is admitted, placed and holds room as it
//! will.
//!
//! No IO and no clock: the caller gives the time, the configuration and how long each pod
//! still runs; the cache it is given is not changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::cache::{Cache, Event};
use crate::model::{GroupPhase, PodSpec, TaskShape, TaskStatus};
use crate::resources::{PODS, Resources};
use crate::{SchedulerConfig, schedule};

/// How far a forecast may look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Seconds after `now` past which a start is "not within the horizon".
    pub horizon: i64,
    /// Sessions the forecast may run.
    pub sessions: u32,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            horizon: 24 * 3600,
            sessions: 2_000,
        }
    }
}

/// Why a waiting job never starts, whatever ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Never {
    /// The scheduler found it can never be placed (parked: no eligible cluster can ever hold
    /// its gang, or a pod of it fits no node that could ever take it).
    Fits,
    /// Its queue does not exist.
    NoQueue,
}

/// What a forecast found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Forecast {
    /// Each job that waited and starts within the horizon (`namespace/podgroup`): when, in
    /// seconds of the caller's clock.
    pub starts: BTreeMap<String, i64>,
    /// The jobs that waited and do not start within the horizon, though they could later.
    pub not_within: BTreeSet<String>,
    /// The jobs that waited and never start as the fleet is: why, for each.
    pub never: BTreeMap<String, Never>,
    /// The jobs that waited and had not started when the budget of sessions ran out: unknown.
    pub unresolved: BTreeSet<String>,
    /// Sessions run.
    pub sessions: u32,
    /// Whether the budget of sessions ran out before the horizon.
    pub cut_short: bool,
}

/// Whether a job (by its tasks and PodGroup) holds its gang: minMember pods placed.
fn started(cache: &Cache, job: &str) -> bool {
    let world = cache.world();
    let Some(j) = world.job(job) else {
        return false;
    };
    let placed = j
        .tasks
        .iter()
        .filter_map(|t| world.tasks.get(*t))
        .filter(|t| t.spec.status.is_ready())
        .count();
    placed as u32 >= j.min_member().max(1)
}

/// Adds to `c` the pods each job lacks to reach its minMember (see the module's notes), named
/// `<podgroup>-eta-<i>`.
fn stand_in(c: &mut Cache) {
    let mut missing: Vec<PodSpec> = Vec::new();
    {
        let world = c.world();
        for (_, job) in world.jobs.iter() {
            let Some(g) = job.group.as_ref() else {
                continue;
            };
            let tasks: Vec<_> = job
                .tasks
                .iter()
                .filter_map(|t| world.tasks.get(*t))
                .collect();
            // The roles minTaskMember asks pods of, one entry per pod lacking, then any role.
            let mut roles: Vec<&str> = Vec::new();
            for (role, min) in &g.min_task_member {
                let have = tasks.iter().filter(|t| t.spec.shape.role == *role).count() as u32;
                roles.extend((have..*min).map(|_| role.as_str()));
            }
            let short = g.min_member.saturating_sub(tasks.len() as u32) as usize;
            while roles.len() < short {
                roles.push("eta-stand-in");
            }
            let Some(min) = g.min_resources.filter(|_| !roles.is_empty()) else {
                continue;
            };
            if g.phase == GroupPhase::Completed {
                continue;
            }
            let mut asked = Resources::ZERO;
            for t in &tasks {
                asked.add(&t.spec.shape.request);
            }
            let left = min.minus(&asked).max(&Resources::ZERO);
            let n = roles.len() as i64;
            let mut request = Resources::ZERO;
            for slot in 0..crate::resources::MAX_RESOURCES {
                request.set(slot, (left.get(slot) + n - 1) / n);
            }
            request.set(PODS, 1);
            let shape = |role: &str| TaskShape {
                role: role.to_string(),
                request,
                node_selector: Default::default(),
                affinity: Vec::new(),
                tolerations: Vec::new(),
                priority: g.priority.unwrap_or(0),
                preemptable: true,
                namespace: g.namespace.clone(),
                priority_class: g.priority_class.clone(),
                rules: Default::default(),
            };
            for (i, role) in roles.into_iter().enumerate() {
                missing.push(PodSpec {
                    gpus: None,
                    namespace: g.namespace.clone(),
                    name: format!("{}-eta-{i}", g.name),
                    group: Some(g.name.clone()),
                    shape: Arc::new(shape(role)),
                    index: i as u32,
                    status: TaskStatus::Pending,
                    placement: None,
                    created: g.created,
                    lives_in: None,
                    planned: None,
                    ghost_of: None,
                    foreign: false,
                });
            }
        }
    }
    for pod in missing {
        let _ = c.apply(Event::PodUpsert(pod));
    }
}

/// Forecasts when each job of `cache` that waits for its gang starts. `runs_for(pod)` is how
/// many seconds a pod still runs from the moment it runs (from `now` for one that runs already,
/// from its start for one the forecast starts).
pub fn forecast(
    cache: &Cache,
    config: &Arc<SchedulerConfig>,
    now: i64,
    runs_for: &dyn Fn(&PodSpec) -> i64,
    budget: Budget,
) -> Forecast {
    let mut c = cache.clone();
    stand_in(&mut c);
    let mut out = Forecast::default();
    let mut waiting: BTreeSet<String> = BTreeSet::new();
    // When each running pod ends: time → pods (`namespace/name`).
    let mut ends: BTreeMap<i64, Vec<(String, String)>> = BTreeMap::new();
    {
        let world = c.world();
        for (_, job) in world.jobs.iter() {
            let Some(g) = job.group.as_ref() else {
                continue;
            };
            if g.phase != GroupPhase::Completed && !started(&c, &job.key) {
                waiting.insert(job.key.clone());
            }
        }
        for (_, t) in world.tasks.iter() {
            if t.spec.status.holds_node() || t.spec.status == TaskStatus::Succeeded {
                let end = if t.spec.status == TaskStatus::Succeeded {
                    now
                } else {
                    now + runs_for(&t.spec).max(0)
                };
                ends.entry(end)
                    .or_default()
                    .push((t.spec.namespace.clone(), t.spec.name.clone()));
            }
        }
    }
    let mut t = now;
    let mut session = 0u64;
    // Sessions run again at the same moment after evictions.
    let mut again = 0u32;
    while !waiting.is_empty() {
        if out.sessions >= budget.sessions {
            out.cut_short = true;
            break;
        }
        session += 1;
        out.sessions += 1;
        let d = schedule(c.snapshot(), Arc::clone(config), t, session);
        let pending: BTreeMap<String, PodSpec> = d
            .binds
            .iter()
            .filter_map(|b| c.task(&b.task).map(|p| (b.task.clone(), p.clone())))
            .collect();
        let evicted: Vec<PodSpec> = d
            .evictions
            .iter()
            .filter_map(|e| c.task(&e.task).cloned())
            .collect();
        if c.take(&d, TaskStatus::Running).is_err() {
            break;
        }
        for (_, pod) in pending {
            ends.entry(t + runs_for(&pod).max(0))
                .or_default()
                .push((pod.namespace.clone(), pod.name.clone()));
        }
        let now_started: Vec<String> = waiting.iter().filter(|j| started(&c, j)).cloned().collect();
        for j in now_started {
            waiting.remove(&j);
            out.starts.insert(j, t);
        }
        // Pods evicted by the session (preempt, reclaim) are gone once their grace period
        // ends, and their controller makes them again: they wait to be placed anew. What they
        // free is placed by a session at the same moment (a few in a row at most).
        if !evicted.is_empty() {
            for pod in evicted {
                for v in ends.values_mut() {
                    v.retain(|(ns, n)| (ns, n) != (&pod.namespace, &pod.name));
                }
                let (namespace, name) = (pod.namespace.clone(), pod.name.clone());
                let _ = c.apply(Event::PodDelete { namespace, name });
                let _ = c.apply(Event::PodUpsert(PodSpec {
                    status: TaskStatus::Pending,
                    placement: None,
                    ..pod
                }));
            }
            ends.retain(|_, v| !v.is_empty());
            if again < 3 {
                again += 1;
                continue;
            }
        }
        again = 0;
        // On to the next moment a pod ends: what it frees is what the next session places.
        // (Sessions at `Decisions::wake_at` too, when an SLA or inqueue timeout runs out, took
        // five times the forecasting time on the Philly week and made the 90th percentile
        // worse.)
        let Some(next) = ends.keys().find(|k| **k > t).copied() else {
            break;
        };
        if next > now + budget.horizon {
            break;
        }
        t = next;
        let due: Vec<i64> = ends.range(..=t).map(|(k, _)| *k).collect();
        let mut emptied: BTreeSet<(String, String)> = BTreeSet::new();
        for k in due {
            for (namespace, name) in ends.remove(&k).unwrap_or_default() {
                if let Some(group) = c
                    .task(&format!("{namespace}/{name}"))
                    .and_then(|p| p.group.clone())
                {
                    emptied.insert((namespace.clone(), group));
                }
                let _ = c.apply(Event::PodDelete { namespace, name });
            }
        }
        // A job whose pods all ended is done: its PodGroup goes too.
        for (namespace, name) in emptied {
            let key = format!("{namespace}/{name}");
            let world = c.world();
            let empty = world.job(&key).is_none_or(|j| j.tasks.is_empty());
            if empty {
                let _ = c.apply(Event::PodGroupDelete { namespace, name });
            }
        }
    }
    // Never is not later: a job the sessions parked, or whose queue is missing, is told apart
    // from one the horizon cut off (or the budget did not reach).
    let world = c.world();
    for key in &waiting {
        let Some(id) = world.job_id(key) else {
            continue;
        };
        let queue = world.job(key).map(|j| j.queue().to_string());
        if queue.is_some_and(|q| !world.queues.contains_key(&q)) {
            out.never.insert(key.clone(), Never::NoQueue);
        } else if world.parked.contains(&id) {
            out.never.insert(key.clone(), Never::Fits);
        }
    }
    waiting.retain(|j| !out.never.contains_key(j));
    if out.cut_short {
        out.unresolved = waiting;
    } else {
        out.not_within = waiting;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Cluster;
    use crate::testing::{GangJob, Role, add_cluster, add_job, add_nodes};

    fn config() -> Arc<SchedulerConfig> {
        Arc::new(SchedulerConfig::default_config())
    }

    /// A job of one pod asking `cpu`, created at `created`.
    fn whole(name: &str, cpu: &str, created: i64) -> GangJob {
        let mut j = GangJob::new(name, vec![Role::new("w", 1, &[("cpu", cpu)])]);
        j.created = created;
        j
    }

    /// One node of 8 CPUs, all of it held by the running job `running`.
    fn one_full_node() -> Cache {
        let mut cache = Cache::new();
        add_cluster(&mut cache, Cluster::named("east")).expect("cluster");
        add_nodes(
            &mut cache,
            "east",
            "n",
            1,
            &[("cpu", "8"), ("memory", "32Gi")],
            &[],
        )
        .expect("node");
        add_job(&mut cache, &whole("running", "8", 0)).expect("job");
        let d = schedule(cache.snapshot(), config(), 0, 1);
        cache.take(&d, TaskStatus::Running).expect("taken");
        assert!(started(&cache, "default/running"));
        cache
    }

    /// A PodGroup without pods yet (its controller creates them once it is admitted) starts
    /// when its minResources fit, and holds them for its run; stand-ins fill its
    /// minTaskMember's roles.
    #[test]
    fn a_podgroup_without_its_pods_yet_is_stood_in_for() {
        let mut cache = one_full_node();
        for (name, created) in [("b", 1), ("c", 2)] {
            // minTaskMember too, as Volcano's job controller sets it.
            let mut j = whole(name, "8", created);
            j.roles[0].min = Some(1);
            add_job(&mut cache, &j).expect("job");
            cache
                .apply(Event::PodDelete {
                    namespace: "default".into(),
                    name: format!("{name}-w-0"),
                })
                .expect("pod deleted");
        }
        let f = forecast(&cache, &config(), 0, &|_| 100, Budget::default());
        assert_eq!(f.starts.get("default/b"), Some(&100), "{f:?}");
        assert_eq!(f.starts.get("default/c"), Some(&200), "{f:?}");
    }

    /// With preempt, a job of higher priority evicts the running one and starts at once, not
    /// when the running one would have ended. The evicted pod, made again, waits to be
    /// admitted anew, after the jobs admitted already.
    #[test]
    fn a_job_that_preempts_starts_at_once_and_its_victim_after_it() {
        let text = crate::config::DEFAULT_CONFIG.replace(
            "actions: \"enqueue, allocate, backfill\"",
            "actions: \"enqueue, allocate, preempt, backfill\"",
        );
        let config = Arc::new(SchedulerConfig::parse(&text).expect("config"));
        let mut cache = one_full_node();
        add_job(&mut cache, &whole("urgent", "8", 1).priority(100)).expect("job");
        add_job(&mut cache, &whole("later", "8", 2)).expect("job");
        add_job(&mut cache, &whole("last", "8", 3)).expect("job");
        let f = forecast(&cache, &config, 0, &|_| 100, Budget::default());
        assert_eq!(f.starts.get("default/urgent"), Some(&0), "{f:?}");
        assert_eq!(f.starts.get("default/later"), Some(&100), "{f:?}");
        assert_eq!(f.starts.get("default/last"), Some(&200), "{f:?}");
    }

    /// `running` holds the node for 100 s more; `b` (created first) and `c` each need the
    /// whole node for 50 s; `d` needs 16 CPUs.
    #[test]
    fn on_one_node_waiting_jobs_start_when_the_ones_before_them_end() {
        let mut cache = one_full_node();
        for (name, created) in [("b", 1), ("c", 2)] {
            add_job(&mut cache, &whole(name, "8", created)).expect("job");
        }
        add_job(&mut cache, &whole("d", "16", 3)).expect("job");
        let runs_for = |p: &PodSpec| {
            if p.name.starts_with("running") {
                100
            } else {
                50
            }
        };
        let f = forecast(&cache, &config(), 1_000, &runs_for, Budget::default());
        assert_eq!(f.starts.get("default/b"), Some(&1_100), "{f:?}");
        assert_eq!(f.starts.get("default/c"), Some(&1_150), "{f:?}");
        // Larger than any node: never, not "later".
        assert_eq!(f.never.get("default/d"), Some(&Never::Fits), "{f:?}");
        assert!(f.not_within.is_empty(), "{f:?}");
        assert!(!f.starts.contains_key("default/running"));
        // The cache it was given is as it was.
        assert!(!started(&cache, "default/b"));
    }

    #[test]
    fn a_start_past_the_horizon_is_not_within_it() {
        let mut cache = one_full_node();
        add_job(&mut cache, &whole("next", "8", 1)).expect("job");
        let budget = Budget {
            horizon: 3_600,
            ..Budget::default()
        };
        let f = forecast(&cache, &config(), 0, &|_| 7_200, budget);
        assert!(
            f.starts.is_empty() && f.not_within.contains("default/next"),
            "{f:?}"
        );
    }

    #[test]
    fn a_job_whose_queue_does_not_exist_never_starts_rather_than_later() {
        let mut cache = one_full_node();
        let lost = whole("lost", "1", 1)
            .queue("nowhere")
            .phase(GroupPhase::Pending);
        add_job(&mut cache, &lost).expect("job");
        add_job(&mut cache, &whole("next", "8", 2)).expect("job");
        let f = forecast(&cache, &config(), 0, &|_| 60, Budget::default());
        assert_eq!(f.never.get("default/lost"), Some(&Never::NoQueue), "{f:?}");
        assert_eq!(f.starts.get("default/next"), Some(&60), "{f:?}");
        assert!(f.not_within.is_empty(), "{f:?}");
    }

    #[test]
    fn a_job_not_reached_within_the_budget_is_unresolved_not_beyond_the_horizon() {
        let mut cache = one_full_node();
        for (name, created) in [("b", 1), ("c", 2)] {
            add_job(&mut cache, &whole(name, "8", created)).expect("job");
        }
        let budget = Budget {
            sessions: 2,
            ..Budget::default()
        };
        let f = forecast(&cache, &config(), 0, &|_| 60, budget);
        assert!(f.cut_short, "{f:?}");
        assert_eq!(f.starts.get("default/b"), Some(&60));
        assert!(
            f.unresolved.contains("default/c") && f.not_within.is_empty(),
            "{f:?}"
        );
    }
}
