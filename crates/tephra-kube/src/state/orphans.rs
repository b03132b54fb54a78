//! Member copies whose declared pod is gone (fleet mode). A declared pod owns its copy in the
//! member it was placed in: when the pod is deleted on the control plane (its Job deleted,
//! aborted, suspended, restarted or expired, its PodGroup deleted, or the pod itself), or made
//! anew under the same name (a new uid), its old copy is an orphan. The orphan is set aside as a
//! ghost (it still holds its node until it is gone, but counts for no job) and deleted in its
//! member, asked again until the member confirms; a new declared pod of the same name is placed
//! only once the old copy is gone, so old and new never count together.
//!
//! Nothing of this is remembered but what the two sides show: a copy names the declared pod's
//! uid (`tephra.io/declared-uid`), so after a restart, or when a member that was down answers
//! again, the lists alone say which copies are orphans. A copy is judged only once the control
//! plane's pods have been listed; one seen without its declared pod (rather than one whose
//! deletion was watched) is an orphan only if it stays so for [`GRACE_MS`], since the two
//! clusters' watches need not deliver in the order things happened.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::well_known::{DECLARED_UID, PLANNED_CLUSTER};

use super::{State, StateError};
use crate::watch::Kind;
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
        match self.declared.get(key) {
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
        self.mirrored.remove(key);
        self.assumed.remove(key);
        self.aggregated.remove(key);
        self.keep_ghost(&job, cluster, key, ghost.name);
        Ok(())
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
