//! Volumes in a session, as kube-scheduler's `VolumeRestrictions`, `VolumeBinding` and
//! `NodeVolumeLimits` decide them: whether a pod's claims let it run on a node ([`check`]), and
//! what placing it there gives each claim that is not bound yet ([`VolumeState::reserve`]): the
//! smallest matching PersistentVolume, or provisioning on that node. What a gang's pods were
//! given is undone with the gang when its statement is discarded, and becomes part of its
//! [`PreBind`](crate::decisions::PreBind) when it binds: the writes to make before the pod is bound (the volume's claim reference, the
//! claim's selected node), for the runtime to carry out and wait for.
//!
//! A claim is looked up in the cluster of the node: a cluster that lacks it cannot run the pod.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::fit::{Unfit, VolumeUnfit};
use crate::cache::Snapshot;
use crate::decisions::VolumeBind;
use crate::hash::{HashMap, HashSet};
use crate::model::volumes::{Delay, pick_volume};
use crate::model::{
    Id, Node, PersistentVolume, Storage, StorageClass, Task, TaskShape, TaskStatus,
};

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
    /// What the last shape checked needs of a node, in one cluster: a scan checks one shape
    /// against many nodes, and all but the node's labels stay the same until the next change.
    memo: RefCell<Option<Memo>>,
}

/// The node-independent part of checking one shape's claims in one cluster.
#[derive(Clone, Debug)]
struct Memo {
    shape: Arc<TaskShape>,
    cluster: Id,
    plan: Arc<Plan>,
}

/// What a shape's claims ask of a node, claim by claim in order, and the attachments they
/// make.
#[derive(Clone, Debug, Default)]
struct Plan {
    needs: Vec<Need>,
    /// (driver, handle) per claim that attaches, when the cluster has attach limits.
    attachments: Vec<(String, String)>,
}

/// What one claim asks of a node.
#[derive(Clone, Debug)]
enum Need {
    /// Its volume's node affinity allows the node.
    Volume(Arc<PersistentVolume>),
    /// It was given this node in the session.
    Node(Id),
    /// An earlier session wrote this node on it.
    Named(String),
    /// A delayed claim: one of these volumes (see [`pick_volume`]) that the pod's earlier
    /// claims do not take, else provisioning by this class where it allows the node.
    Delayed {
        candidates: Vec<(Arc<PersistentVolume>, bool)>,
        provision: Option<Arc<StorageClass>>,
    },
    /// It fails on every node, and the claims after it are not looked at.
    Fail(Unfit),
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
        self.memo.get_mut().take();

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
    pub fn check(&self, snap: &Snapshot, shape: &Arc<TaskShape>, node: Id) -> Result<(), Unfit> {
        if shape.rules.claims.is_empty() {
            return Ok(());
        }
        let Some(n) = snap.nodes.get(node) else {
            return Ok(());
        };
        let plan = self.plan(snap, shape, n);
        let unfit = |v: VolumeUnfit| Err(Unfit::Volume(v));
        let labels = &n.spec.labels;
        // Volumes this pod's earlier claims would take.
        let mut mine: Vec<&str> = Vec::new();
        for need in &plan.needs {
            match need {
                Need::Fail(u) => return Err(u.clone()),
                Need::Volume(pv) => {
                    if !pv.node_allows(labels) {
                        return unfit(VolumeUnfit::NodeConflict);
                    }
                }
                Need::Node(at) => {
                    if *at != node {
                        return unfit(VolumeUnfit::BindConflict);
                    }
                }
                Need::Named(name) => {
                    if *name != n.spec.name {
                        return unfit(VolumeUnfit::BindConflict);
                    }
                }
                Need::Delayed {
                    candidates,
                    provision,
                } => {
                    let candidates = candidates.iter().map(|(pv, pre)| (pv, *pre));
                    let picked = pick_volume(candidates, labels, &|v| mine.contains(&v));
                    match picked {
                        Some(pv) => mine.push(&pv.name),
                        None if provision.as_ref().is_some_and(|c| c.allows(labels)) => {}
                        None => return unfit(VolumeUnfit::BindConflict),
                    }
                }
            }
        }
        if self.limits
            && let Some(storage) = snap.storage.get(&n.spec.cluster)
        {
            self.check_limits(storage, n, node, &plan.attachments)?;
        }
        Ok(())
    }

    /// The plan of `shape`'s claims in the cluster of `n`, worked out once until a change.
    fn plan(&self, snap: &Snapshot, shape: &Arc<TaskShape>, n: &Node) -> Arc<Plan> {
        if let Some(m) = self.memo.borrow().as_ref()
            && Arc::ptr_eq(&m.shape, shape)
            && m.cluster == n.cluster
        {
            return Arc::clone(&m.plan);
        }
        let plan = Arc::new(self.build_plan(snap, shape, n));
        *self.memo.borrow_mut() = Some(Memo {
            shape: Arc::clone(shape),
            cluster: n.cluster,
            plan: Arc::clone(&plan),
        });
        plan
    }

    /// Each claim of `shape` in turn, as far as the first that fails on every node.
    fn build_plan(&self, snap: &Snapshot, shape: &TaskShape, n: &Node) -> Plan {
        let claims = &shape.rules.claims;
        let mut plan = Plan::default();
        let fail = |plan: &mut Plan, v: VolumeUnfit| plan.needs.push(Need::Fail(Unfit::Volume(v)));
        let Some(storage) = snap.storage.get(&n.spec.cluster) else {
            fail(&mut plan, VolumeUnfit::ClaimNotFound(claims[0].clone()));
            return plan;
        };
        for name in claims {
            let key = format!("{}/{name}", shape.namespace);
            let Some(claim) = storage.claims.get(&key) else {
                fail(&mut plan, VolumeUnfit::ClaimNotFound(name.clone()));
                break;
            };
            if claim.deleting {
                fail(&mut plan, VolumeUnfit::ClaimDeleting(name.clone()));
                break;
            }
            if claim.lost {
                fail(&mut plan, VolumeUnfit::ClaimLost(name.clone()));
                break;
            }
            let slot = (n.cluster, key.clone());
            if claim.access_modes.once_pod() && self.in_use.get(&slot).copied().unwrap_or(0) > 0 {
                fail(&mut plan, VolumeUnfit::OncePodConflict);
                break;
            }
            let given = self.given.get(&slot);
            let need = match given {
                Some(Given::Volume(v)) => match storage.volumes.get(v) {
                    Some(pv) => Need::Volume(Arc::clone(pv)),
                    None => Need::Fail(Unfit::Volume(VolumeUnfit::NodeConflict)),
                },
                Some(Given::Node(at)) => Need::Node(*at),
                None => self.claim_need(storage, claim, n.cluster),
            };
            let failed = matches!(need, Need::Fail(_));
            plan.needs.push(need);
            if failed {
                break;
            }
            if self.limits
                && let Some(a) = attachment(storage, &key, given)
            {
                plan.attachments.push(a);
            }
        }
        plan
    }

    /// What one claim the session gave nothing yet asks of a node of `cluster`.
    fn claim_need(
        &self,
        storage: &Storage,
        claim: &crate::model::VolumeClaim,
        cluster: Id,
    ) -> Need {
        let fail = |v: VolumeUnfit| Need::Fail(Unfit::Volume(v));
        match storage.delay(claim) {
            Delay::Bound => {
                let volume = claim.volume.as_deref().unwrap_or_default();
                match storage.volumes.get(volume) {
                    None => fail(VolumeUnfit::VolumeMissing),
                    Some(pv) => Need::Volume(Arc::clone(pv)),
                }
            }
            Delay::Immediate => fail(VolumeUnfit::UnboundImmediate),
            Delay::Delayed => match &claim.selected_node {
                Some(selected) => Need::Named(selected.clone()),
                None => Need::Delayed {
                    candidates: storage
                        .volume_candidates(claim)
                        .filter(|(pv, _)| !self.taken.contains(&(cluster, pv.name.clone())))
                        .map(|(pv, pre)| (Arc::clone(pv), pre))
                        .collect(),
                    provision: storage
                        .classes
                        .get(&claim.class)
                        .filter(|c| c.provisions())
                        .cloned(),
                },
            },
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
        self.memo.get_mut().take();

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
