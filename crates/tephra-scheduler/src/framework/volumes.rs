//! Volumes in a session, as kube-scheduler's `VolumeRestrictions`, `VolumeBinding` and
//! `NodeVolumeLimits` decide them: whether a pod's claims let it run on a node ([`check`]), and
//! what placing it there gives each claim that is not bound yet ([`VolumeState::reserve`]): the
//! smallest matching PersistentVolume, or provisioning on that node. What a gang's pods were
//! given is undone with the gang when its statement is discarded, and becomes part of its
//! [`PreBind`](crate::decisions::PreBind) when it binds: the writes to make before the pod is bound (the volume's claim reference, the
//! claim's selected node), for the runtime to carry out and wait for.
//!
//! A claim is looked up in the cluster of the node: a cluster that lacks it cannot run the pod.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::fit::{Unfit, VolumeUnfit};
use crate::cache::Snapshot;
use crate::decisions::VolumeBind;
use crate::model::volumes::Delay;
use crate::model::{Id, Node, Storage, Task, TaskShape, TaskStatus};

/// What a claim was given in this session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Given {
    /// Bound to this PersistentVolume.
    Volume(String),
    /// Provisioned on this node.
    Node(Id),
}

/// What the session gave claims, and who uses which.
#[derive(Clone, Debug, Default)]
pub struct VolumeState {
    /// (cluster, claim `namespace/name`) → what it was given.
    given: HashMap<(Id, String), Given>,
    /// Volumes given in this session, by cluster.
    taken: HashSet<(Id, String)>,
    /// The claims each task gave something to, to undo.
    by_task: HashMap<Id, Vec<(Id, String)>>,
    /// How many pods on nodes use each claim, by cluster (a `ReadWriteOncePod` claim allows
    /// one). Terminating pods still count.
    in_use: HashMap<(Id, String), u32>,
    /// The volumes attached to each node, by CSI driver; kept only where attach limits exist.
    attached: HashMap<Id, BTreeMap<String, BTreeSet<String>>>,
    limits: bool,
}

fn on_node(status: TaskStatus) -> bool {
    status.holds_node() || status == TaskStatus::Pipelined
}

/// The (driver, handle) a claim of a pod occupies on its node, for attach limits: its volume's
/// CSI handle when bound, else one of its own under its class's provisioner.
fn attachment(storage: &Storage, key: &str, given: Option<&Given>) -> Option<(String, String)> {
    let claim = storage.claims.get(key)?;
    let volume = match given {
        Some(Given::Volume(v)) => Some(v.as_str()),
        _ => claim.volume.as_deref().filter(|_| claim.bound),
    };
    match volume.and_then(|v| storage.volumes.get(v)) {
        Some(pv) => pv.csi.clone(),
        None => storage
            .classes
            .get(&claim.class)
            .filter(|c| c.provisions())
            .map(|c| (c.provisioner.clone(), format!("claim:{key}"))),
    }
}

impl VolumeState {
    /// The claims in use and the volumes attached, as a session opens on `snap`: only pods
    /// that mount claims are looked at.
    pub fn open(snap: &Snapshot) -> Self {
        let mut s = Self {
            limits: snap.storage.values().any(|st| !st.attach_limits.is_empty()),
            ..Self::default()
        };
        for &task in &snap.claim_users {
            let Some(t) = snap.tasks.get(task) else {
                continue;
            };
            if !on_node(t.spec.status) {
                continue;
            }
            if let Some(node) = t.node {
                s.count(snap, t, node, 1);
            }
        }
        s
    }

    fn count(&mut self, snap: &Snapshot, t: &Task, node: Id, sign: i32) {
        let Some(n) = snap.nodes.get(node) else {
            return;
        };
        let storage = snap.storage.get(&n.spec.cluster);
        for name in &t.spec.shape.rules.claims {
            let key = format!("{}/{name}", t.spec.shape.namespace);
            let slot = (n.cluster, key.clone());
            let used = self.in_use.entry(slot.clone()).or_insert(0);
            *used = used.saturating_add_signed(sign);
            if *used == 0 {
                self.in_use.remove(&slot);
            }
            if !self.limits {
                continue;
            }
            let Some((driver, handle)) =
                storage.and_then(|st| attachment(st, &key, self.given.get(&slot)))
            else {
                continue;
            };
            let set = self
                .attached
                .entry(node)
                .or_default()
                .entry(driver)
                .or_default();
            if sign > 0 {
                set.insert(handle);
            } else {
                set.remove(&handle);
            }
        }
    }

    /// Whether the claims of a pod of `shape` let it run on `node`.
    pub fn check(&self, snap: &Snapshot, shape: &TaskShape, node: Id) -> Result<(), Unfit> {
        let claims = &shape.rules.claims;
        if claims.is_empty() {
            return Ok(());
        }
        let Some(n) = snap.nodes.get(node) else {
            return Ok(());
        };
        let unfit = |v: VolumeUnfit| Err(Unfit::Volume(v));
        let ns = &shape.namespace;
        let Some(storage) = snap.storage.get(&n.spec.cluster) else {
            return unfit(VolumeUnfit::ClaimNotFound(claims[0].clone()));
        };
        // Volumes this pod's earlier claims would take.
        let mut mine: Vec<String> = Vec::new();
        let mut new_attachments: Vec<(String, String)> = Vec::new();
        for name in claims {
            let key = format!("{ns}/{name}");
            let Some(claim) = storage.claims.get(&key) else {
                return unfit(VolumeUnfit::ClaimNotFound(name.clone()));
            };
            if claim.deleting {
                return unfit(VolumeUnfit::ClaimDeleting(name.clone()));
            }
            if claim.lost {
                return unfit(VolumeUnfit::ClaimLost(name.clone()));
            }
            let slot = (n.cluster, key.clone());
            if claim.access_modes.once_pod() && self.in_use.get(&slot).copied().unwrap_or(0) > 0 {
                return unfit(VolumeUnfit::OncePodConflict);
            }
            match self.given.get(&slot) {
                Some(Given::Volume(v)) => {
                    let ok = storage
                        .volumes
                        .get(v)
                        .is_some_and(|pv| pv.node_allows(&n.spec.labels));
                    if !ok {
                        return unfit(VolumeUnfit::NodeConflict);
                    }
                }
                Some(Given::Node(at)) => {
                    if *at != node {
                        return unfit(VolumeUnfit::BindConflict);
                    }
                }
                None => self.check_claim(storage, claim, n, &mut mine)?,
            }
            if self.limits
                && let Some(a) = attachment(storage, &key, self.given.get(&slot))
            {
                new_attachments.push(a);
            }
        }
        if self.limits {
            self.check_limits(storage, n, node, &new_attachments)?;
        }
        Ok(())
    }

    /// One claim the session gave nothing yet, on node `n`.
    fn check_claim(
        &self,
        storage: &Storage,
        claim: &crate::model::VolumeClaim,
        n: &Node,
        mine: &mut Vec<String>,
    ) -> Result<(), Unfit> {
        let unfit = |v: VolumeUnfit| Err(Unfit::Volume(v));
        match storage.delay(claim) {
            Delay::Bound => {
                let volume = claim.volume.as_deref().unwrap_or_default();
                match storage.volumes.get(volume) {
                    None => unfit(VolumeUnfit::VolumeMissing),
                    Some(pv) if !pv.node_allows(&n.spec.labels) => unfit(VolumeUnfit::NodeConflict),
                    Some(_) => Ok(()),
                }
            }
            Delay::Immediate => unfit(VolumeUnfit::UnboundImmediate),
            Delay::Delayed => {
                if let Some(selected) = &claim.selected_node {
                    return if *selected == n.spec.name {
                        Ok(())
                    } else {
                        unfit(VolumeUnfit::BindConflict)
                    };
                }
                let cluster = n.cluster;
                let taken = |v: &str| {
                    mine.iter().any(|m| m == v) || self.taken.contains(&(cluster, v.to_string()))
                };
                if let Some(pv) = storage.matching_volume(claim, &n.spec.labels, &taken) {
                    mine.push(pv.name.clone());
                    return Ok(());
                }
                let provisions = storage
                    .classes
                    .get(&claim.class)
                    .is_some_and(|c| c.provisions() && c.allows(&n.spec.labels));
                if provisions {
                    Ok(())
                } else {
                    unfit(VolumeUnfit::BindConflict)
                }
            }
        }
    }

    fn check_limits(
        &self,
        storage: &Storage,
        n: &Node,
        node: Id,
        new: &[(String, String)],
    ) -> Result<(), Unfit> {
        let Some(limits) = storage.attach_limits.get(&n.spec.name) else {
            return Ok(());
        };
        let attached = self.attached.get(&node);
        for (driver, limit) in limits {
            let have = attached.and_then(|a| a.get(driver));
            let mut more: BTreeSet<&str> = BTreeSet::new();
            for (d, h) in new {
                if d == driver && !have.is_some_and(|s| s.contains(h)) {
                    more.insert(h);
                }
            }
            let total = have.map_or(0, BTreeSet::len) + more.len();
            if !more.is_empty() && total > *limit as usize {
                return Err(Unfit::Volume(VolumeUnfit::TooManyVolumes));
            }
        }
        Ok(())
    }

    /// `task` is placed on `node` (`sign` 1) or taken off it (-1): its delayed claims are given
    /// a volume or provisioning there, or given back, and its claims counted as in use.
    pub fn place(&mut self, snap: &Snapshot, task: Id, node: Id, sign: i32) {
        let Some(t) = snap.tasks.get(task) else {
            return;
        };
        if t.spec.shape.rules.claims.is_empty() {
            return;
        }
        if sign < 0 {
            self.count(snap, t, node, -1);
            for slot in self.by_task.remove(&task).unwrap_or_default() {
                if let Some(Given::Volume(v)) = self.given.remove(&slot) {
                    self.taken.remove(&(slot.0, v));
                }
            }
            return;
        }
        let Some(n) = snap.nodes.get(node) else {
            return;
        };
        if let Some(storage) = snap.storage.get(&n.spec.cluster) {
            let mut gave = Vec::new();
            for name in &t.spec.shape.rules.claims {
                let key = format!("{}/{name}", t.spec.shape.namespace);
                let slot = (n.cluster, key.clone());
                if self.given.contains_key(&slot) {
                    continue;
                }
                let Some(claim) = storage.claims.get(&key) else {
                    continue;
                };
                if storage.delay(claim) != Delay::Delayed || claim.selected_node.is_some() {
                    continue;
                }
                let cluster = n.cluster;
                let taken = |v: &str| self.taken.contains(&(cluster, v.to_string()));
                let given = match storage.matching_volume(claim, &n.spec.labels, &taken) {
                    Some(pv) => Given::Volume(pv.name.clone()),
                    None => Given::Node(node),
                };
                if let Given::Volume(v) = &given {
                    self.taken.insert((cluster, v.clone()));
                }
                self.given.insert(slot.clone(), given);
                gave.push(slot);
            }
            if !gave.is_empty() {
                self.by_task.entry(task).or_default().extend(gave);
            }
        }
        self.count(snap, t, node, 1);
    }

    /// What must be written before `task` is bound to `node`: each of its claims that is not
    /// bound yet, with the volume it was given (none when provisioned, or when an earlier
    /// session gave it the node).
    pub fn prebind(&self, snap: &Snapshot, task: Id, node: Id) -> Vec<VolumeBind> {
        let (Some(t), Some(n)) = (snap.tasks.get(task), snap.nodes.get(node)) else {
            return Vec::new();
        };
        let Some(storage) = snap.storage.get(&n.spec.cluster) else {
            return Vec::new();
        };
        let mut volumes = Vec::new();
        for name in &t.spec.shape.rules.claims {
            let key = format!("{}/{name}", t.spec.shape.namespace);
            let Some(claim) = storage.claims.get(&key) else {
                continue;
            };
            if claim.bound {
                continue;
            }
            let volume = match self.given.get(&(n.cluster, key.clone())) {
                Some(Given::Volume(v)) => Some(v.clone()),
                _ => None,
            };
            volumes.push(VolumeBind { claim: key, volume });
        }
        volumes
    }
}
