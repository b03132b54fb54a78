//! Members' copies that count for no job (fleet mode), set aside as ghosts: a ghost is a pod
//! of no job, under its own key, still holding its node (as another scheduler's pod does) until
//! it is gone from its member. Two things make them.
//!
//! **Orphans.** A declared pod owns its copy in the member it was placed in: when the pod is
//! deleted on the control plane (its Job deleted, aborted, suspended, restarted or expired, its
//! PodGroup deleted, or the pod itself), or made anew under the same name (a new uid), its old
//! copy is an orphan, set aside and deleted in its member, asked again until the member
//! confirms; a new declared pod of the same name is placed only once the old copy is gone, so
//! old and new never count together. Nothing of this is remembered but what the two sides
//! show: a copy names the declared pod's uid (`tephra.io/declared-uid`), so after a restart,
//! or when a member that was down answers again, the lists alone say which copies are orphans.
//! A copy is judged only once the control plane's pods have been listed; one seen without its
//! declared pod (rather than one whose deletion was watched) is an orphan only if it stays so
//! for [`GRACE_MS`], since the two clusters' watches need not deliver in the order things
//! happened.
//!
//! **Failover.** A ResourceBinding whose graceful-eviction tasks name a cluster it no longer
//! runs in has its job's copy there set aside ([`tephra_scheduler::Cache::copy_in`]), the
//! declared pods wait to be placed again, and the job's PodGroup excludes the cluster, so the
//! session places the whole gang elsewhere while the old copy still counts where it is. Pods of
//! the job that the evicted member reports later (it answers again) join the ghosts. Graceful
//! eviction is carried out here too, since the scheduler holds both the new placement's pods
//! and the members' clients: [`tephra_controllers::graceful_eviction`] says when the old copy
//! may go; its pods are then deleted in the old member, and the task leaves the binding once
//! that member answers and holds none of them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::ResourceBinding;
use tephra_api::well_known::{DECLARED_UID, PLANNED_CLUSTER};
use tephra_controllers::graceful_eviction::{NewPlacement, Verdict, assess};
use tephra_scheduler::cache::Event;

use super::{State, StateError};
use crate::convert;
use crate::observed::{Kind, Obj};
use crate::writes::Write;

/// How long a copy seen without its declared pod must stay so before it is deleted.
pub const GRACE_MS: i64 = 3_000;
/// How often the deletion of an orphan is asked again while its member still shows it.
const RETRY_MS: i64 = 10_000;

/// What the state keeps about member copies.
#[derive(Debug, Default)]
pub(super) struct Copies {
    /// Pod key → cluster → the declared uid the copy names (None: a copy made before copies
    /// named it).
    by_key: std::collections::HashMap<String, BTreeMap<String, Option<String>>>,
    /// Copies that look orphaned: (cluster, key) → since when (ms; None until the next sweep
    /// stamps it, `i64::MIN` when the deletion was watched).
    suspects: std::collections::HashMap<(String, String), Option<i64>>,
    /// Orphans set aside and being deleted: (cluster, key).
    orphans: std::collections::HashSet<(String, String)>,
}

/// Whether a member pod is a copy of a declared pod, and the uid it names.
pub(super) fn copy_of(p: &Pod) -> Option<Option<String>> {
    let a = p.metadata.annotations.as_ref()?;
    a.contains_key(PLANNED_CLUSTER)
        .then(|| a.get(DECLARED_UID).cloned())
}

impl State {
    /// Whether the control plane's pods have been listed (fleet mode).
    fn declared_synced(&self) -> bool {
        self.control
            .as_deref()
            .is_some_and(|c| self.is_synced(c, Kind::Pod))
    }

    /// Whether the copy of `key` in `cluster`, naming `uid`, has no declared pod to be a copy of.
    fn orphaned(&self, key: &str, uid: Option<&str>) -> bool {
        match self.declared.pods.get(key) {
            None => true,
            Some(d) => matches!((uid, d.uid()), (Some(a), Some(b)) if a != b),
        }
    }

    /// A member's pod was seen: if it is a copy, it is remembered, and suspected when its
    /// declared pod is not there.
    pub(super) fn copy_seen(&mut self, cluster: &str, key: &str, p: &Pod) {
        let Some(uid) = copy_of(p) else {
            return;
        };
        let orphaned = self.declared_synced() && self.orphaned(key, uid.as_deref());
        self.copies
            .by_key
            .entry(key.to_string())
            .or_default()
            .insert(cluster.to_string(), uid);
        if orphaned {
            self.copies
                .suspects
                .entry((cluster.to_string(), key.to_string()))
                .or_insert(None);
        }
    }

    /// A member's pod is gone. Returns whether it was an orphan being deleted (the declared pod
    /// of the same name, if any, may now be placed).
    pub(super) fn copy_gone(&mut self, cluster: &str, key: &str) -> bool {
        if let Some(by_cluster) = self.copies.by_key.get_mut(key) {
            by_cluster.remove(cluster);
            if by_cluster.is_empty() {
                self.copies.by_key.remove(key);
            }
        }
        let at = (cluster.to_string(), key.to_string());
        self.copies.suspects.remove(&at);
        self.copies.orphans.remove(&at)
    }

    /// The declared pod `key` was deleted (`uid: None`) or seen with `uid`: its copies that it
    /// no longer owns are orphans at once, since the change itself was watched.
    pub(super) fn declared_changed(&mut self, key: &str, uid: Option<&str>) {
        let Some(by_cluster) = self.copies.by_key.get(key) else {
            return;
        };
        let stale: Vec<String> = by_cluster
            .iter()
            .filter(|(_, copy)| match uid {
                None => true,
                Some(u) => copy.as_deref().is_some_and(|c| c != u),
            })
            .map(|(c, _)| c.clone())
            .collect();
        for cluster in stale {
            self.copies
                .suspects
                .insert((cluster, key.to_string()), Some(i64::MIN));
        }
    }

    /// Whether an old copy of `key` is still being deleted somewhere: the declared pod of that
    /// name waits for it.
    pub(super) fn old_copy_left(&self, key: &str) -> bool {
        self.copies.by_key.get(key).is_some_and(|by_cluster| {
            by_cluster
                .keys()
                .any(|c| self.copies.orphans.contains(&(c.clone(), key.to_string())))
        })
    }

    /// The control plane's pods were (re)listed: every copy is judged again.
    pub(super) fn judge_copies(&mut self) {
        if !self.declared_synced() {
            return;
        }
        let orphaned: Vec<(String, String)> = self
            .copies
            .by_key
            .iter()
            .flat_map(|(key, by_cluster)| {
                by_cluster
                    .iter()
                    .filter(|(_, uid)| self.orphaned(key, uid.as_deref()))
                    .map(|(c, _)| (c.clone(), key.clone()))
            })
            .collect();
        for at in orphaned {
            self.copies.suspects.entry(at).or_insert(None);
        }
    }

    /// The orphans confirmed by now are set aside, and the deletions due are returned: one
    /// per orphan whose member answers, asked again every [`RETRY_MS`] until it is gone.
    pub fn orphan_deletions(&mut self, now_ms: i64) -> Result<Vec<Write>, StateError> {
        let suspects: Vec<((String, String), Option<i64>)> = self
            .copies
            .suspects
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for ((cluster, key), since) in suspects {
            let uid = self
                .copies
                .by_key
                .get(&key)
                .and_then(|b| b.get(&cluster))
                .cloned();
            let still = uid.is_some_and(|u| self.orphaned(&key, u.as_deref()));
            if !still || !self.declared_synced() {
                self.copies.suspects.remove(&(cluster, key));
                continue;
            }
            let since = match since {
                Some(t) => t,
                None => {
                    self.copies
                        .suspects
                        .insert((cluster.clone(), key.clone()), Some(now_ms));
                    now_ms
                }
            };
            if now_ms.saturating_sub(since) < GRACE_MS {
                continue;
            }
            self.copies.suspects.remove(&(cluster.clone(), key.clone()));
            self.set_orphan_aside(&cluster, &key)?;
        }
        let mut out = Vec::new();
        for (cluster, key) in &self.copies.orphans {
            let answers = self.members.get(cluster).is_some_and(|(_, r)| *r)
                && self.is_synced(cluster, Kind::Pod);
            let at = (cluster.clone(), key.clone());
            let sent = self.purged.get(&at).copied();
            if !answers || sent.is_some_and(|t| now_ms - t < RETRY_MS) {
                continue;
            }
            self.purged.insert(at, now_ms);
            let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
            out.push(Write::Purge {
                cluster: cluster.clone(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
        Ok(out)
    }

    /// Sets the orphaned copy of `key` in `cluster` aside: a ghost that holds its node but
    /// counts for no job (already one, if a failover set it aside).
    fn set_orphan_aside(&mut self, cluster: &str, key: &str) -> Result<(), StateError> {
        tracing::info!(
            cluster,
            pod = key,
            "its declared pod is gone: the member's copy is deleted"
        );
        self.copies
            .orphans
            .insert((cluster.to_string(), key.to_string()));
        if self
            .ghosts
            .contains_key(&(cluster.to_string(), key.to_string()))
        {
            return Ok(());
        }
        let Some(job) = self
            .cache
            .task(key)
            .filter(|s| s.placement.as_ref().is_some_and(|(c, _)| c == cluster))
            .map(|s| {
                s.group
                    .as_ref()
                    .map(|g| format!("{}/{g}", s.namespace))
                    .unwrap_or_default()
            })
        else {
            return Ok(());
        };
        let Some(ghost) = self.cache.set_aside(key, cluster)? else {
            return Ok(());
        };
        self.declared.mirrored.remove(key);
        self.assumed.remove(key);
        self.declared.aggregated.remove(key);
        self.keep_ghost(&job, cluster, key, ghost.name);
        Ok(())
    }
}

impl State {
    /// The clusters `job` is being evicted from.
    pub fn evicted_from(&self, job: &str) -> Option<&BTreeSet<String>> {
        self.evicting.get(job)
    }

    /// A ResourceBinding changed: the clusters its tasks evict the job from are taken in.
    pub(super) fn binding(&mut self, now: i64, rb: &ResourceBinding) -> Result<(), StateError> {
        let job = convert::key(&rb.metadata);
        self.bindings.insert(job.clone(), Arc::new(rb.clone()));
        self.aggregation.touch(job.clone());
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
        self.declared.mirrored.remove(key);
        self.assumed.remove(key);
        self.declared.waits_again(
            key,
            "EvictedFromMember",
            format!(
                "its gang is evicted from member cluster {cluster}; it waits to be placed again"
            ),
        );
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
        let Some(mut spec) = convert::pod(cluster, p, &self.ours, self.cache.names_mut())? else {
            return Ok(true);
        };
        // Counted for the queue of the job it was a copy of.
        if spec.group.is_none() {
            spec.group = job.split_once('/').map(|(_, g)| g.to_string());
        }
        let ghost = self.cache.ghost(spec, cluster);
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
                    && self.is_synced(&from, crate::observed::Kind::Pod);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(uid: Option<&str>) -> Pod {
        let mut annotations = BTreeMap::from([(PLANNED_CLUSTER.to_string(), "west".to_string())]);
        if let Some(u) = uid {
            annotations.insert(DECLARED_UID.into(), u.into());
        }
        let mut p = Pod::default();
        p.metadata.annotations = Some(annotations);
        p
    }

    #[test]
    fn only_a_pod_tephra_placed_is_a_copy_and_it_names_its_declared_uid() {
        assert_eq!(copy_of(&Pod::default()), None);
        assert_eq!(copy_of(&copy(None)), Some(None));
        assert_eq!(copy_of(&copy(Some("u1"))), Some(Some("u1".into())));
    }
}
