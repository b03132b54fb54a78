//! Failover in the state (fleet mode): a ResourceBinding whose graceful-eviction tasks name a
//! cluster it no longer runs in has its job's copies there set aside. Each becomes a ghost (a
//! pod of no job, under its own key, still holding its node, as another scheduler's pod does),
//! the declared pod waits to be placed again, and the job's PodGroup excludes the cluster, so
//! the session places the whole gang elsewhere while the old copy still counts where it is.
//! Pods of the job that the evicted member reports later (it answers again) join the ghosts.
//!
//! Graceful eviction is carried out here too, since the scheduler holds both the new
//! placement's pods and the members' clients: [`tephra_controllers::graceful_eviction`] says
//! when the old copy may go; its pods are then deleted in the old member, and the task leaves
//! the binding once that member answers and holds none of them.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::ResourceBinding;
use tephra_controllers::graceful_eviction::{NewPlacement, Verdict, assess};
use tephra_scheduler::cache::Event;

use super::{State, StateError};
use crate::convert;
use crate::watch::Obj;

impl State {
    /// The clusters `job` is being evicted from.
    pub fn evicted_from(&self, job: &str) -> Option<&BTreeSet<String>> {
        self.evicting.get(job)
    }

    /// A ResourceBinding changed: the clusters its tasks evict the job from are taken in.
    pub(super) fn binding(&mut self, now: i64, rb: &ResourceBinding) -> Result<(), StateError> {
        let job = convert::key(&rb.metadata);
        self.bindings.insert(job.clone(), Arc::new(rb.clone()));
        self.touched.insert(job.clone());
        let clusters: BTreeSet<String> = rb
            .spec
            .graceful_eviction_tasks
            .iter()
            .map(|t| t.from_cluster.clone())
            .filter(|c| !rb.spec.clusters.iter().any(|t| &t.name == c))
            .collect();
        self.evict(now, &job, clusters)
    }

    /// A ResourceBinding is gone: its job is evicted from nowhere (its ghosts stay until the
    /// pods behind them go).
    pub(super) fn unbind(&mut self, now: i64, job: &str) -> Result<(), StateError> {
        self.bindings.remove(job);
        self.evict(now, job, BTreeSet::new())
    }

    fn evict(&mut self, now: i64, job: &str, clusters: BTreeSet<String>) -> Result<(), StateError> {
        let old = self.evicting.get(job).cloned().unwrap_or_default();
        if clusters == old {
            return Ok(());
        }
        if clusters.is_empty() {
            self.evicting.remove(job);
        } else {
            self.evicting.insert(job.to_string(), clusters.clone());
        }
        for cluster in clusters.difference(&old) {
            tracing::info!(job, cluster = %cluster, "failover: the gang is placed again elsewhere");
            for key in self.cache.copy_in(job, cluster) {
                self.ghost(job, cluster, &key)?;
            }
        }
        // The PodGroup again: its policy now excludes the clusters.
        if let Some(g) = self.group_objects.get(job).cloned() {
            let cluster = self
                .groups
                .get(job)
                .map(|s| Arc::clone(&s.cluster))
                .unwrap_or_else(|| Arc::from(""));
            self.upsert(now, &cluster, Obj::PodGroup(Box::new((*g).clone())))?;
        }
        Ok(())
    }

    /// Sets a pod of a job's copy in `cluster` aside as a ghost
    /// ([`tephra_scheduler::Cache::set_aside`]), and declares it again.
    fn ghost(&mut self, job: &str, cluster: &str, key: &str) -> Result<(), StateError> {
        let Some(ghost) = self.cache.set_aside(key, cluster)? else {
            return Ok(());
        };
        self.mirrored.remove(key);
        self.assumed.remove(key);
        if self.aggregated.remove(key).is_some()
            && let Some((namespace, name)) = key.split_once('/')
        {
            self.status_writes.push(crate::writes::Write::DeclaredStatus {
                namespace: namespace.to_string(),
                name: name.to_string(),
                status: serde_json::json!({
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "False",
                        "reason": "EvictedFromMember",
                        "message": format!("its gang is evicted from member cluster {cluster}; it waits to be placed again")}],
                }),
            });
        }
        self.keep_ghost(job, cluster, key, ghost.name);
        self.declare_again(key)
    }

    /// Remembers that the member's pod `key` in `cluster`, of `job`, is the ghost `name`.
    pub(super) fn keep_ghost(&mut self, job: &str, cluster: &str, key: &str, name: String) {
        self.ghosts.insert(
            (cluster.to_string(), key.to_string()),
            (name, job.to_string()),
        );
    }

    /// A member's pod of a job evicted from that member: kept as a ghost. Returns false when
    /// the pod is not one (the caller takes it as usual).
    pub(super) fn member_pod_of_evicted(
        &mut self,
        cluster: &Arc<str>,
        p: &Pod,
    ) -> Result<bool, StateError> {
        let key = convert::key(&p.metadata);
        let ghost = self.ghosts.get(&(cluster.to_string(), key.clone()));
        let job = match (ghost, convert::group_of(p)) {
            (Some((_, job)), _) => job.clone(),
            (None, Some(group)) => {
                let ns = p.metadata.namespace.as_deref().unwrap_or("default");
                let job = format!("{ns}/{group}");
                let evicted = self
                    .evicting
                    .get(&job)
                    .is_some_and(|c| c.contains(&**cluster));
                if !evicted {
                    return Ok(false);
                }
                job
            }
            (None, None) => return Ok(false),
        };
        let Some(spec) = convert::pod(cluster, p, &self.ours, self.cache.names_mut())? else {
            return Ok(true);
        };
        let ghost = tephra_scheduler::cache::ghost(spec, cluster);
        self.keep_ghost(&job, cluster, &key, ghost.name.clone());
        self.cache.apply(Event::PodUpsert(ghost))?;
        Ok(true)
    }

    /// A member's pod that was a ghost is gone. Returns false when it was not one.
    pub(super) fn ghost_gone(&mut self, cluster: &str, key: &str) -> Result<bool, StateError> {
        let Some((name, _)) = self.ghosts.remove(&(cluster.to_string(), key.to_string())) else {
            return Ok(false);
        };
        self.purged.remove(&(cluster.to_string(), key.to_string()));
        let namespace = key
            .split_once('/')
            .map_or("default", |(ns, _)| ns)
            .to_string();
        self.cache.apply(Event::PodDelete { namespace, name })?;
        Ok(true)
    }

    /// Graceful eviction, for every binding with tasks: the deletions of old copies that are
    /// due (asked again every `RETRY_MS` until the member confirms), and the tasks that are
    /// done. `timeout_ms` is the wait for a task that gives no grace period.
    pub fn graceful_evictions(
        &mut self,
        now_ms: i64,
        timeout_ms: i64,
    ) -> Vec<crate::writes::Write> {
        const RETRY_MS: i64 = 10_000;
        let mut out = Vec::new();
        let bindings: Vec<(String, Arc<ResourceBinding>)> = self
            .bindings
            .iter()
            .filter(|(_, rb)| !rb.spec.graceful_eviction_tasks.is_empty())
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        for (job, rb) in bindings {
            let placement = NewPlacement::of(self.cache.world(), &job);
            let mut left = Vec::new();
            let mut done = false;
            for task in &rb.spec.graceful_eviction_tasks {
                let verdict = assess(task, placement, now_ms, timeout_ms);
                if verdict != Verdict::Purge {
                    left.push(task.clone());
                    continue;
                }
                let from = task.from_cluster.clone();
                let copies: Vec<String> = self
                    .ghosts
                    .iter()
                    .filter(|((c, _), (_, j))| *c == from && *j == job)
                    .map(|((_, key), _)| key.clone())
                    .collect();
                // The member must answer, and hold none of them, before the task may go:
                // otherwise its old pods would come back as the job's own.
                let answers = self.members.get(&from).is_some_and(|(_, r)| *r)
                    && self.is_synced(&from, crate::watch::Kind::Pod);
                if copies.is_empty() && (answers || !self.members.contains_key(&from)) {
                    done = true;
                    tracing::info!(job = %job, cluster = %from, "graceful eviction done");
                    continue;
                }
                left.push(task.clone());
                for key in copies {
                    let sent = self.purged.get(&(from.clone(), key.clone())).copied();
                    if sent.is_some_and(|t| now_ms - t < RETRY_MS) || !answers {
                        continue;
                    }
                    self.purged.insert((from.clone(), key.clone()), now_ms);
                    let (namespace, name) = key.split_once('/').unwrap_or(("default", &key));
                    out.push(crate::writes::Write::Purge {
                        cluster: from.clone(),
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                    });
                }
            }
            if done {
                let (namespace, name) = job.split_once('/').unwrap_or(("default", &job));
                out.push(crate::writes::Write::EvictionTasks {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    tasks: left,
                });
            }
        }
        out
    }
}
