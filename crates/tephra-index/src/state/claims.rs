//! Claims declared on the control plane (fleet mode): the PersistentVolumeClaims and
//! ResourceClaims a declared pod uses live on the control plane, and are copied to the member
//! the pod is placed in before its copy is created there (`prebind.rs`). Until a member has a
//! copy of its own, the scheduler sees each declared claim in every member as its copy would be
//! there: not bound, not allocated; once a member has one, that copy is what counts.

use std::collections::{HashMap, HashSet};

use tephra_scheduler::cache::{DraChange, Event, StorageChange};
use tephra_scheduler::model::{ResourceClaim, VolumeClaim};

use tephra_scheduler::Cache;

use super::StateError;

/// The claims declared on the control plane, and which members have copies of their own.
#[derive(Default)]
pub struct Declared {
    volumes: HashMap<String, VolumeClaim>,
    devices: HashMap<String, ResourceClaim>,
    /// (member, `pvc:` or `rc:` + `namespace/name`) of every claim a member has itself.
    in_member: HashSet<(String, String)>,
}

/// One declared claim, as its copy would be in a member before it is bound or allocated.
#[derive(Clone)]
pub enum DeclaredClaim {
    /// A PersistentVolumeClaim.
    Volume(VolumeClaim),
    /// A ResourceClaim.
    Device(ResourceClaim),
}

impl DeclaredClaim {
    fn slot(&self) -> String {
        match self {
            Self::Volume(c) => format!("pvc:{}", c.key()),
            Self::Device(c) => format!("rc:{}", c.key()),
        }
    }

    fn upsert(&self, cluster: &str) -> Event {
        let cluster = cluster.to_string();
        match self {
            Self::Volume(c) => Event::Storage {
                cluster,
                change: StorageChange::ClaimUpsert(c.clone()),
            },
            Self::Device(c) => Event::Dra {
                cluster,
                change: DraChange::ClaimUpsert(c.clone()),
            },
        }
    }

    fn delete(&self, cluster: &str) -> Event {
        let cluster = cluster.to_string();
        match self {
            Self::Volume(c) => Event::Storage {
                cluster,
                change: StorageChange::ClaimDelete(c.key()),
            },
            Self::Device(c) => Event::Dra {
                cluster,
                change: DraChange::ClaimDelete(c.key()),
            },
        }
    }
}

/// A claim as its copy in a member starts: not bound, not allocated, reserved for nobody.
fn as_copy(claim: DeclaredClaim) -> DeclaredClaim {
    match claim {
        DeclaredClaim::Volume(mut c) => {
            c.volume = None;
            c.bound = false;
            c.selected_node = None;
            c.lost = false;
            DeclaredClaim::Volume(c)
        }
        DeclaredClaim::Device(mut c) => {
            c.allocation = None;
            c.reserved_for.clear();
            c.resource_version.clear();
            DeclaredClaim::Device(c)
        }
    }
}

/// The member clusters the cache knows.
fn member_names(cache: &Cache) -> Vec<String> {
    cache
        .world()
        .clusters
        .iter()
        .map(|(_, c)| c.name.clone())
        .collect()
}

impl Declared {
    /// A claim declared on the control plane appeared or changed (`Some`), or is gone: its
    /// copy is seen in every member that has none of its own.
    pub(super) fn changed(
        &mut self,
        cache: &mut Cache,
        slot: &str,
        claim: Option<DeclaredClaim>,
    ) -> Result<(), StateError> {
        let old = self.get(slot);
        let fresh = claim.map(as_copy);
        match &fresh {
            Some(DeclaredClaim::Volume(c)) => {
                self.volumes.insert(c.key(), c.clone());
            }
            Some(DeclaredClaim::Device(c)) => {
                self.devices.insert(c.key(), c.clone());
            }
            None => self.remove(slot),
        }
        for m in member_names(cache) {
            if self.in_member.contains(&(m.clone(), slot.to_string())) {
                continue;
            }
            let event = match (&fresh, &old) {
                (Some(c), _) => c.upsert(&m),
                (None, Some(c)) => c.delete(&m),
                (None, None) => continue,
            };
            cache.apply(event)?;
        }
        Ok(())
    }

    /// A member's own claim appeared (`true`) or is gone: while it is there it counts, once
    /// gone the declared claim's copy does again (or nothing, if none is declared).
    pub(super) fn in_member(
        &mut self,
        cache: &mut Cache,
        cluster: &str,
        slot: &str,
        present: bool,
    ) -> Result<(), StateError> {
        let key = (cluster.to_string(), slot.to_string());
        if present {
            self.in_member.insert(key);
            return Ok(());
        }
        self.in_member.remove(&key);
        if let Some(c) = self.get(slot) {
            cache.apply(c.upsert(cluster))?;
        }
        Ok(())
    }

    /// A member (re)joined: every declared claim it has no copy of is seen there.
    pub(super) fn seed(&self, cache: &mut Cache, cluster: &str) -> Result<(), StateError> {
        for c in self.all() {
            if !self.in_member.contains(&(cluster.to_string(), c.slot())) {
                cache.apply(c.upsert(cluster))?;
            }
        }
        Ok(())
    }
    fn get(&self, slot: &str) -> Option<DeclaredClaim> {
        if let Some(k) = slot.strip_prefix("pvc:") {
            return self.volumes.get(k).cloned().map(DeclaredClaim::Volume);
        }
        slot.strip_prefix("rc:")
            .and_then(|k| self.devices.get(k).cloned())
            .map(DeclaredClaim::Device)
    }

    fn remove(&mut self, slot: &str) {
        if let Some(k) = slot.strip_prefix("pvc:") {
            self.volumes.remove(k);
        } else if let Some(k) = slot.strip_prefix("rc:") {
            self.devices.remove(k);
        }
    }

    fn all(&self) -> Vec<DeclaredClaim> {
        self.volumes
            .values()
            .cloned()
            .map(DeclaredClaim::Volume)
            .chain(self.devices.values().cloned().map(DeclaredClaim::Device))
            .collect()
    }
}
