//! What follows a session in the cache, the same for every front end (the Kubernetes runtime,
//! the simulator, the test helpers): the session's decisions taken in as the writes will make
//! them true, a task set to a new status, and a moved gang's old copy set aside as ghosts.
//! Front ends keep their own bookkeeping (what they wrote, what they record) and no rule of
//! their own about the cache.

use std::sync::Arc;

use super::{Cache, CacheError, DraChange, Event, StorageChange};
use crate::decisions::Decisions;
use crate::model::{GhostOf, GroupPhase, PodSpec, TaskStatus};

/// What [`Cache::take`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// PodGroups whose phase changed, with the new phase, in the decisions' order.
    pub phases: Vec<(String, GroupPhase)>,
}

impl Cache {
    /// Takes a session's decisions in, so that the next session sees them:
    /// every bound task holds its node in status `bound` (`Binding` where the bind is written
    /// later and confirmed by a watcher, `Bound` where it takes effect at once); every volume
    /// given to a claim is the claim's, and every ResourceClaim allocated holds its
    /// allocation, assumed until a watcher shows them so (or [`Cache::unassume_claims`] if the
    /// bind fails); every evicted task that holds a node is `Releasing`; then the jobs the session saw change are
    /// forgotten (its own binds and evictions need no second look); each PodGroup takes its
    /// new phase, since the session's time; jobs that can never be placed are parked, jobs the
    /// enqueue votes refused rest, and the room the session reserved stays reserved.
    ///
    /// Decisions about tasks or jobs the cache no longer holds are skipped: they went away
    /// while the session ran.
    pub fn take(&mut self, d: &Decisions, bound: TaskStatus) -> Result<Taken, CacheError> {
        for b in &d.binds {
            let Some(mut spec) = self.task(&b.task).cloned() else {
                continue;
            };
            spec.status = bound;
            spec.placement = Some((b.cluster.clone(), b.node.clone()));
            // The shared GPUs it was bound with are its until it is gone.
            spec.gpus = b.gpus.clone();
            self.apply(Event::PodUpsert(spec))?;
            // Its node's lock is taken as it binds: no other vGPU pod goes there until a
            // watcher shows the lock released (or never taken).
            if b.gpu_lock {
                self.set_gpu_lock(&b.cluster, &b.node, Some(d.now))?;
            }
        }
        // The volumes given to its claims are theirs, and the ResourceClaims it allocated hold
        // their devices, until a watcher shows them so.
        for p in &d.prebinds {
            for v in &p.volumes {
                let Some(volume) = &v.volume else {
                    continue;
                };
                let (namespace, name) = v.claim.split_once('/').unwrap_or(("", &v.claim));
                self.apply(Event::Storage {
                    cluster: p.cluster.clone(),
                    change: StorageChange::Assume {
                        volume: volume.clone(),
                        claim: crate::model::ClaimRef {
                            namespace: namespace.to_string(),
                            name: name.to_string(),
                        },
                        pod: p.task.clone(),
                    },
                })?;
            }
            for dev in &p.devices {
                let Some(allocation) = &dev.allocation else {
                    continue;
                };
                self.apply(Event::Dra {
                    cluster: p.cluster.clone(),
                    change: DraChange::Assume {
                        claim: dev.claim.clone(),
                        allocation: allocation.clone(),
                        pod: p.task.clone(),
                    },
                })?;
            }
        }
        for e in &d.evictions {
            self.release(&e.task)?;
        }
        self.clear_changed();
        let mut taken = Taken::default();
        for g in &d.groups {
            let world = self.world();
            let Some(mut spec) = world
                .job_id(&g.job)
                .and_then(|id| world.jobs.get(id))
                .and_then(|j| j.group.clone())
            else {
                continue;
            };
            if spec.phase != g.phase {
                spec.phase = g.phase;
                spec.phase_since = d.now;
                self.apply(Event::PodGroupUpsert(spec))?;
                taken.phases.push((g.job.clone(), g.phase));
            }
        }
        self.park(&d.park);
        self.rest(&d.park, &d.groups);
        self.nominate(d.nominations());
        Ok(taken)
    }

    /// `pod`'s bind failed: the volumes its claims were assumed to be given and the
    /// allocations its ResourceClaims were (in any cluster) are free again.
    pub fn unassume_claims(&mut self, pod: &str) -> Result<(), CacheError> {
        let world = self.world();
        let unassume = || pod.to_string();
        let mut events = Vec::new();
        for (cluster, _) in world
            .storage
            .iter()
            .filter(|(_, s)| s.assumed().holds_for(pod))
        {
            let change = StorageChange::Unassume { pod: unassume() };
            events.push(Event::Storage {
                cluster: cluster.clone(),
                change,
            });
        }
        for (cluster, _) in world.dra.iter().filter(|(_, d)| d.assumed().holds_for(pod)) {
            let change = DraChange::Unassume { pod: unassume() };
            events.push(Event::Dra {
                cluster: cluster.clone(),
                change,
            });
        }
        for e in events {
            self.apply(e)?;
        }
        Ok(())
    }

    /// Records that the node lock for shared GPUs of `node` in `cluster` was taken at `at`
    /// (`None`: released), as a runtime that plays the device plugin sees it.
    pub fn set_gpu_lock(
        &mut self,
        cluster: &str,
        node: &str,
        at: Option<i64>,
    ) -> Result<(), CacheError> {
        let world = self.world();
        let Some(mut spec) = world
            .node_id(cluster, node)
            .and_then(|id| world.nodes.get(id))
            .map(|n| n.spec.clone())
        else {
            return Ok(());
        };
        if spec.gpu_lock == at {
            return Ok(());
        }
        spec.gpu_lock = at;
        self.apply(Event::NodeUpsert(spec))
    }

    /// The task `key` (`namespace/name`) as the cache holds it.
    pub fn task(&self, key: &str) -> Option<&PodSpec> {
        let world = self.world();
        world
            .task_id(key)
            .and_then(|id| world.tasks.get(id))
            .map(|t| &t.spec)
    }

    /// Sets the task `key` to `status` at `placement` (`None`: it holds no node). Returns
    /// whether the cache holds the task.
    pub fn set_task(
        &mut self,
        key: &str,
        status: TaskStatus,
        placement: Option<(String, String)>,
    ) -> Result<bool, CacheError> {
        let Some(mut spec) = self.task(key).cloned() else {
            return Ok(false);
        };
        spec.status = status;
        if placement.is_none() {
            spec.gpus = None;
        }
        spec.placement = placement;
        self.apply(Event::PodUpsert(spec))?;
        Ok(true)
    }

    /// The task `key` is being evicted: if it is bound or running, it is `Releasing` where it
    /// is, holding its node until it is gone. Returns whether it was.
    pub fn release(&mut self, key: &str) -> Result<bool, CacheError> {
        let Some(t) = self.task(key) else {
            return Ok(false);
        };
        if !matches!(t.status, TaskStatus::Bound | TaskStatus::Running) {
            return Ok(false);
        }
        let at = t.placement.clone();
        self.set_task(key, TaskStatus::Releasing, at)
    }

    /// The tasks of `job` that make its copy in `cluster`: those placed there, finished ones
    /// included (a copy moves whole and starts over elsewhere, as a workload Karmada moves is
    /// made anew), except those already leaving (`Releasing`: they are being deleted there
    /// anyway). In the job's task order.
    pub fn copy_in(&self, job: &str, cluster: &str) -> Vec<String> {
        let world = self.world();
        let Some(j) = world.job_id(job).and_then(|id| world.jobs.get(id)) else {
            return Vec::new();
        };
        j.tasks
            .iter()
            .filter_map(|&t| world.tasks.get(t))
            .filter(|t| t.spec.status != TaskStatus::Releasing)
            .filter(|t| t.spec.placement.as_ref().is_some_and(|(c, _)| c == cluster))
            .map(|t| t.key.clone())
            .collect()
    }

    /// Sets the task `key`, its job's copy in `cluster`, aside: the task leaves its job (which
    /// places it again) and its ghost ([`ghost`]) keeps its node. Returns the ghost, or `None`
    /// when the cache does not hold the task.
    pub fn set_aside(&mut self, key: &str, cluster: &str) -> Result<Option<PodSpec>, CacheError> {
        let Some(spec) = self.task(key).cloned() else {
            return Ok(None);
        };
        let (namespace, name) = (spec.namespace.clone(), spec.name.clone());
        let ghost = self.ghost(spec, cluster);
        self.apply(Event::PodDelete { namespace, name })?;
        self.apply(Event::PodUpsert(ghost.clone()))?;
        Ok(Some(ghost))
    }

    /// The ghost ([`ghost`]) of `spec` in `cluster`, counted for the queue of the job `spec`
    /// names (as the cache holds it now; the default queue for a job it does not hold).
    pub fn ghost(&self, spec: PodSpec, cluster: &str) -> PodSpec {
        let world = self.world();
        let queue = spec
            .group
            .as_ref()
            .and_then(|g| world.job_id(&format!("{}/{g}", spec.namespace)))
            .and_then(|id| world.jobs.get(id))
            .map_or(tephra_api::defaults::DEFAULT_QUEUE, |j| j.queue())
            .to_string();
        ghost(spec, cluster, queue)
    }
}

/// The ghost of a pod of a moved gang in `cluster`, which the cluster still runs until it is
/// deleted there: a pod of no job, under its own name (`name~cluster`), that keeps its node
/// and status, that nothing may preempt (its gang is already being moved), and that counts
/// for `queue` while the pod it copies holds no node ([`GhostOf`]).
pub fn ghost(mut spec: PodSpec, cluster: &str, queue: String) -> PodSpec {
    let pod = std::mem::take(&mut spec.name);
    spec.name = ghost_name(&pod, cluster);
    spec.ghost_of = Some(Arc::new(GhostOf { pod, queue }));
    spec.group = None;
    if spec.shape.preemptable {
        let mut shape = (*spec.shape).clone();
        shape.preemptable = false;
        spec.shape = Arc::new(shape);
    }
    spec
}

/// The name of pod `name`'s ghost in `cluster`.
pub fn ghost_name(name: &str, cluster: &str) -> String {
    format!("{name}~{cluster}")
}
