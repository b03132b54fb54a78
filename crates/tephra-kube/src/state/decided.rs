//! What follows a session in the state: its decisions taken into the cache at once (binds
//! assumed, evictions releasing, new phases), counts to report, bind failures and the deadline
//! of gangs they leave short, and the ResourceBindings of placed jobs.

use std::collections::BTreeSet;
use std::sync::Arc;

use tephra_scheduler::model::TaskStatus;
use tephra_scheduler::{Decisions, SchedulerConfig, Step};

use super::State;

impl State {
    /// A ResourceBinding write for every job that got binds in `d`: every placed task of the
    /// job, with its cluster and node.
    pub fn bindings(&self, d: &Decisions) -> Vec<crate::writes::Write> {
        let world = self.cache.world();
        let jobs: BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
        let mut out = Vec::new();
        for job in jobs {
            let Some(j) = world.job_id(job).and_then(|id| world.jobs.get(id)) else {
                continue;
            };
            if j.implicit {
                continue;
            }
            let placed: Vec<(String, String, String, String)> = j
                .tasks
                .iter()
                .filter_map(|&t| world.tasks.get(t))
                .filter_map(|t| {
                    let (c, n) = t.spec.placement.clone()?;
                    Some((t.key.clone(), t.spec.shape.role.clone(), c, n))
                })
                .collect();
            let uid = self.groups.get(job).and_then(|g| g.uid.clone());
            out.push(crate::writes::resource_binding(job, uid, &placed));
        }
        out
    }

    /// `status.nominatedNodeName` writes for what `d` reserves (pods pipelined on room being
    /// freed, and room held for gangs): set when a pod's nomination is new or moved, cleared
    /// when it lapses while the pod still waits, and once the pod is bound. Pods that no member
    /// holds yet (declared on the control plane) are not nominated.
    pub fn nominations(&mut self, d: &Decisions) -> Vec<crate::writes::Write> {
        use std::collections::HashMap;
        let now: HashMap<&str, (&str, &str)> = d
            .pipelined
            .iter()
            .chain(d.nominations())
            .filter(|b| !self.declared.contains_key(&b.task) || self.mirrored.contains(&b.task))
            .map(|b| (b.task.as_str(), (b.cluster.as_str(), b.node.as_str())))
            .collect();
        let split = |key: &str| {
            let (ns, name) = key.split_once('/').unwrap_or(("default", key));
            (ns.to_string(), name.to_string())
        };
        let mut out = Vec::new();
        for (key, (cluster, node)) in &now {
            let fresh = (cluster.to_string(), node.to_string());
            if self.nominated.get(*key) == Some(&fresh) {
                continue;
            }
            let (namespace, name) = split(key);
            out.push(crate::writes::Write::Nominate {
                cluster: fresh.0.clone(),
                namespace,
                name,
                node: Some(fresh.1.clone()),
            });
            self.nominated.insert(key.to_string(), fresh);
        }
        let lapsed: Vec<String> = self
            .nominated
            .keys()
            .filter(|k| !now.contains_key(k.as_str()))
            .cloned()
            .collect();
        for key in lapsed {
            let Some((cluster, _)) = self.nominated.remove(&key) else {
                continue;
            };
            if self.task(&key).is_none() {
                continue;
            }
            let (namespace, name) = split(&key);
            out.push(crate::writes::Write::Nominate {
                cluster,
                namespace,
                name,
                node: None,
            });
        }
        out
    }

    /// Runs one session at `now` and takes its decisions into the cache at once, as the
    /// writes will make them true ([`tephra_scheduler::Cache::take`]): bound pods hold their
    /// nodes (`Binding`, assumed until the watchers show them bound), evicted pods are
    /// releasing, PodGroups are in their new phase.
    pub fn session(
        &mut self,
        config: Arc<SchedulerConfig>,
        now: i64,
        id: u64,
        observe: &mut dyn FnMut(Step<'_>, bool),
    ) -> Decisions {
        let d =
            tephra_scheduler::schedule_observed(self.cache.snapshot(), config, now, id, observe);
        self.recount();
        // A refusal leaves the cache as observed; the next session decides again.
        match self.cache.take(&d, TaskStatus::Binding) {
            Ok(taken) => {
                for (job, phase) in taken.phases {
                    self.phases.insert(job, (phase, now));
                }
            }
            Err(e) => tracing::warn!(error = %e, "a session's decisions not taken into the cache"),
        }
        for b in &d.binds {
            self.assumed
                .insert(b.task.clone(), (b.cluster.clone(), b.node.clone()));
        }
        d
    }

    /// Jobs whose pods changed since the last session, with their running, succeeded and
    /// failed counts where they differ from what their PodGroup's status says.
    fn recount(&mut self) {
        let world = self.cache.world();
        let mut fresh = Vec::new();
        for &id in &world.changed_jobs {
            let Some(job) = world.jobs.get(id) else {
                continue;
            };
            if self.bindings.contains_key(&job.key) {
                self.touched.insert(job.key.clone());
            }
            let Some(seen) = self.groups.get(&job.key) else {
                continue;
            };
            let mut counts = [0i32; 3];
            for t in job.tasks.iter().filter_map(|&t| world.tasks.get(t)) {
                match t.spec.status {
                    TaskStatus::Running => counts[0] += 1,
                    TaskStatus::Succeeded => counts[1] += 1,
                    TaskStatus::Failed => counts[2] += 1,
                    _ => {}
                }
            }
            let s = &seen.status;
            if counts != [s.running, s.succeeded, s.failed] {
                fresh.push((job.key.clone(), counts));
            }
        }
        self.recounted = fresh;
    }

    /// The counts [`State::session`] found changed, for the planner.
    pub fn recounted(&self) -> &[(String, [i32; 3])] {
        &self.recounted
    }

    fn task(&self, key: &str) -> Option<tephra_scheduler::model::PodSpec> {
        self.cache.task(key).cloned()
    }

    fn set_task(&mut self, key: &str, status: TaskStatus, placement: Option<(String, String)>) {
        // The pod is known to the cache, so the upsert cannot name an unknown cluster.
        let _ = self.cache.set_task(key, status, placement);
    }

    /// The scheduler configuration changed: jobs set aside as never placeable are tried again.
    pub fn config_changed(&mut self) {
        self.cache.unpark_all();
    }

    /// A bind failed at `now`: the pod is pending again, for the next session to place, and
    /// its gang is watched until it is whole again or its deadline passes.
    pub fn bind_failed(&mut self, pod: &str, now: i64) {
        if self.assumed.remove(pod).is_some()
            && let Some(t) = self.task(pod)
            && t.status == TaskStatus::Binding
        {
            self.set_task(pod, TaskStatus::Pending, None);
            if let Some(group) = &t.group {
                self.partial
                    .entry(format!("{}/{group}", t.namespace))
                    .or_insert(now);
            }
        }
    }

    /// Gangs left partly bound by failed binds for longer than `deadline` seconds: each job
    /// with the pods that hold a node, to evict whole so that the gang is placed again. A gang
    /// that reached its minimum again, or is gone, is forgotten.
    pub fn expired_gangs(
        &mut self,
        now: i64,
        deadline: i64,
    ) -> Vec<(String, Vec<(String, String)>)> {
        let world = self.cache.world();
        let mut expired = Vec::new();
        self.partial.retain(|job, since| {
            let Some(j) = world.job_id(job).and_then(|id| world.jobs.get(id)) else {
                return false;
            };
            if j.tally.ready >= i32::try_from(j.min_member()).unwrap_or(i32::MAX) {
                return false;
            }
            if now - *since < deadline {
                return true;
            }
            let held: Vec<(String, String)> = j
                .tasks
                .iter()
                .filter_map(|&t| world.tasks.get(t))
                .filter(|t| {
                    matches!(
                        t.spec.status,
                        TaskStatus::Binding | TaskStatus::Bound | TaskStatus::Running
                    )
                })
                .filter_map(|t| Some((t.key.clone(), t.spec.placement.clone()?.0)))
                .collect();
            expired.push((job.clone(), held));
            false
        });
        for (_, held) in &expired {
            for (task, _) in held {
                if let Some(t) = self.task(task) {
                    // Binding too: the gang is evicted whole, bound or not yet.
                    let at = t.placement.clone();
                    self.set_task(task, TaskStatus::Releasing, at);
                }
            }
        }
        expired
    }
}
