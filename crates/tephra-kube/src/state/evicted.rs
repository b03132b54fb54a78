//! Failover in the state (fleet mode): a ResourceBinding whose graceful-eviction tasks name a
//! cluster it no longer runs in has its job's copies there set aside. Each becomes a ghost (a
//! pod of no job, under its own key, still holding its node, as another scheduler's pod does),
//! the declared pod waits to be placed again, and the job's PodGroup excludes the cluster, so
//! the session places the whole gang elsewhere while the old copy still counts where it is.
//! Pods of the job that the evicted member reports later (it answers again) join the ghosts.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::ResourceBinding;
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::PodSpec;

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
            let placed: Vec<PodSpec> = {
                let world = self.cache.world();
                world
                    .job_id(job)
                    .and_then(|id| world.jobs.get(id))
                    .map(|j| {
                        j.tasks
                            .iter()
                            .filter_map(|t| world.tasks.get(*t))
                            .filter(|t| {
                                t.spec.placement.as_ref().is_some_and(|(c, _)| c == cluster)
                            })
                            .map(|t| t.spec.clone())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for spec in placed {
                self.ghost(cluster, spec)?;
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

    /// Sets a job's copy in `cluster` aside as a ghost, and declares its pod again.
    fn ghost(&mut self, cluster: &str, spec: PodSpec) -> Result<(), StateError> {
        let key = format!("{}/{}", spec.namespace, spec.name);
        self.cache.apply(Event::PodDelete {
            namespace: spec.namespace.clone(),
            name: spec.name.clone(),
        })?;
        self.mirrored.remove(&key);
        self.assumed.remove(&key);
        if self.aggregated.remove(&key).is_some() {
            self.status_writes.push(crate::writes::Write::DeclaredStatus {
                namespace: spec.namespace.clone(),
                name: spec.name.clone(),
                status: serde_json::json!({
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "False",
                        "reason": "EvictedFromMember",
                        "message": format!("its gang is evicted from member cluster {cluster}; it waits to be placed again")}],
                }),
            });
        }
        self.put_ghost(cluster, &key, spec)?;
        if let Some(p) = self.declared.get(&key).cloned() {
            let control = self.control.clone().unwrap_or_else(|| Arc::from(""));
            self.upsert(0, &control, Obj::Pod(Box::new((*p).clone())))?;
        }
        Ok(())
    }

    fn put_ghost(&mut self, cluster: &str, key: &str, mut spec: PodSpec) -> Result<(), StateError> {
        let name = format!("{}~{cluster}", spec.name);
        spec.name.clone_from(&name);
        spec.group = None;
        let mut shape = (*spec.shape).clone();
        shape.preemptable = false;
        spec.shape = Arc::new(shape);
        self.ghosts
            .insert((cluster.to_string(), key.to_string()), name);
        Ok(self.cache.apply(Event::PodUpsert(spec))?)
    }

    /// A member's pod of a job evicted from that member: kept as a ghost. Returns false when
    /// the pod is not one (the caller takes it as usual).
    pub(super) fn member_pod_of_evicted(
        &mut self,
        cluster: &Arc<str>,
        p: &Pod,
    ) -> Result<bool, StateError> {
        let Some(group) = convert::group_of(p) else {
            return Ok(false);
        };
        let ns = p
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let job = format!("{ns}/{group}");
        let key = convert::key(&p.metadata);
        let ghosted = self
            .ghosts
            .contains_key(&(cluster.to_string(), key.clone()));
        let evicted = self
            .evicting
            .get(&job)
            .is_some_and(|c| c.contains(&**cluster));
        if !ghosted && !evicted {
            return Ok(false);
        }
        let Some(spec) = convert::pod(cluster, p, &self.ours, self.cache.names_mut())? else {
            return Ok(true);
        };
        self.put_ghost(cluster, &key, spec)?;
        Ok(true)
    }

    /// A member's pod that was a ghost is gone. Returns false when it was not one.
    pub(super) fn ghost_gone(&mut self, cluster: &str, key: &str) -> Result<bool, StateError> {
        let Some(name) = self.ghosts.remove(&(cluster.to_string(), key.to_string())) else {
            return Ok(false);
        };
        let namespace = key
            .split_once('/')
            .map_or("default", |(ns, _)| ns)
            .to_string();
        self.cache.apply(Event::PodDelete { namespace, name })?;
        Ok(true)
    }
}
