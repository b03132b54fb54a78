//! Devices in a session, as kube-scheduler's `DynamicResources` plugin decides them: whether a
//! pod's ResourceClaims let it run on a node ([`DeviceState::check`]), and which devices placing
//! it there allocates to each claim not allocated yet ([`DeviceState::place`]). A claim already
//! allocated pins its pods to the nodes its devices are reachable from. What a gang's claims
//! are allocated is undone with the gang when its statement is discarded, and becomes part of
//! its [`PreBind`](crate::decisions::PreBind) when it binds: each claim's allocation and
//! reservation, written before the pod is bound.
//!
//! Allocation ([`allocate`]) takes, request by request, devices of the slices the node reaches
//! (each pool's newest generation only) that no claim holds and that match the class's and the
//! request's selectors: exactly the count asked, or every matching device for `All`; devices of
//! requests under one `matchAttribute` constraint share the attribute's value.

use std::collections::{HashMap, HashSet};

use super::fit::{DeviceUnfit, Unfit};
use crate::cache::Snapshot;
use crate::decisions::DeviceBind;
use crate::model::{
    AllocatedDevice, AllocationMode, Attribute, ClaimAllocation, Device, Dra, Id, Labels,
    ResourceClaim, SliceNodes, TaskShape,
};

/// A device, by (driver, pool, name).
type DeviceKey = (String, String, String);

/// A device the node reaches, with its slice's driver, pool and node reach.
struct Visible<'a> {
    driver: &'a str,
    pool: &'a str,
    nodes: &'a SliceNodes,
    device: &'a Device,
}

impl Visible<'_> {
    fn key(&self) -> DeviceKey {
        (
            self.driver.to_string(),
            self.pool.to_string(),
            self.device.name.clone(),
        )
    }
}

/// The devices `claim` would be allocated on a node named `node` with `labels`, with `taken`
/// saying which devices other claims hold.
pub fn allocate(
    dra: &Dra,
    claim: &ResourceClaim,
    node: &str,
    labels: &Labels,
    taken: &dyn Fn(&DeviceKey) -> bool,
) -> Result<ClaimAllocation, DeviceUnfit> {
    if let Some(what) = &claim.unsupported {
        return Err(DeviceUnfit::Unsupported(what.clone()));
    }
    let visible: Vec<Visible> = dra
        .current_slices()
        .filter(|s| s.nodes.reach(node, labels))
        .flat_map(|s| {
            s.devices.iter().map(move |d| Visible {
                driver: &s.driver,
                pool: &s.pool,
                nodes: &s.nodes,
                device: d,
            })
        })
        .collect();
    // Each request's matching devices, in slice and device order.
    let mut matching: Vec<Vec<usize>> = Vec::new();
    for r in &claim.requests {
        let Some(class) = dra.classes.get(&r.class) else {
            return Err(DeviceUnfit::ClassMissing(r.name.clone(), r.class.clone()));
        };
        let mut m = Vec::new();
        for (i, v) in visible.iter().enumerate() {
            let mut ok = true;
            for s in class.selectors.iter().chain(&r.selectors) {
                match s.0.matches(v.driver, v.device) {
                    Ok(true) => {}
                    Ok(false) => {
                        ok = false;
                        break;
                    }
                    Err(e) => return Err(DeviceUnfit::Cel(claim.key(), e)),
                }
            }
            if ok {
                m.push(i);
            }
        }
        matching.push(m);
    }
    // The values the first constraint's attribute takes, to try in turn (one pass without).
    let constraint = claim.match_attributes.first();
    let values: Vec<Option<Attribute>> = match constraint {
        None => vec![None],
        Some((_, attr)) => {
            let mut vals: Vec<Attribute> =
                visible.iter().filter_map(|v| attribute(v, attr)).collect();
            vals.sort();
            vals.dedup();
            vals.into_iter().map(Some).collect()
        }
    };
    for value in values {
        if let Some(chosen) = choose(claim, &visible, &matching, taken, value.as_ref()) {
            let nodes = chosen.iter().map(|&(_, i)| visible[i].nodes).fold(
                SliceNodes::All,
                |acc, n| match (acc, n) {
                    (SliceNodes::Node(a), _) => SliceNodes::Node(a),
                    (_, SliceNodes::Node(b)) => SliceNodes::Node(b.clone()),
                    (SliceNodes::Selector(a), _) => SliceNodes::Selector(a),
                    (_, other) => other.clone(),
                },
            );
            let devices = chosen
                .into_iter()
                .map(|(r, i)| AllocatedDevice {
                    request: claim.requests[r].name.clone(),
                    driver: visible[i].driver.to_string(),
                    pool: visible[i].pool.to_string(),
                    device: visible[i].device.name.clone(),
                })
                .collect();
            return Ok(ClaimAllocation { devices, nodes });
        }
    }
    Err(DeviceUnfit::CannotAllocate)
}

/// The value of a fully qualified attribute of a visible device (an unqualified name in the
/// driver's own domain counts too).
fn attribute(v: &Visible, name: &str) -> Option<Attribute> {
    if let Some(a) = v.device.attributes.get(name) {
        return Some(a.clone());
    }
    let (domain, id) = name.split_once('/')?;
    (domain == v.driver)
        .then(|| v.device.attributes.get(id).cloned())
        .flatten()
}

/// Devices for every request, each `(request index, visible index)`, with the constrained
/// requests' devices sharing `value` of the constraint's attribute; `None` if they cannot all
/// be had.
fn choose(
    claim: &ResourceClaim,
    visible: &[Visible],
    matching: &[Vec<usize>],
    taken: &dyn Fn(&DeviceKey) -> bool,
    value: Option<&Attribute>,
) -> Option<Vec<(usize, usize)>> {
    let mut used: HashSet<usize> = HashSet::new();
    let mut out = Vec::new();
    for (r, req) in claim.requests.iter().enumerate() {
        let constrained = claim
            .match_attributes
            .first()
            .is_some_and(|(reqs, _)| reqs.is_empty() || reqs.contains(&req.name));
        let fits = |i: usize| {
            let v = &visible[i];
            !constrained
                || claim
                    .match_attributes
                    .first()
                    .is_none_or(|(_, attr)| attribute(v, attr).as_ref() == value)
        };
        match req.mode {
            AllocationMode::Exact(n) => {
                let mut got = 0;
                for &i in &matching[r] {
                    if got == n {
                        break;
                    }
                    if used.contains(&i) || taken(&visible[i].key()) || !fits(i) {
                        continue;
                    }
                    used.insert(i);
                    out.push((r, i));
                    got += 1;
                }
                if got < n {
                    return None;
                }
            }
            AllocationMode::All => {
                let all: Vec<usize> = matching[r].iter().copied().filter(|&i| fits(i)).collect();
                if all.is_empty()
                    || all
                        .iter()
                        .any(|&i| used.contains(&i) || taken(&visible[i].key()))
                {
                    return None;
                }
                for i in all {
                    used.insert(i);
                    out.push((r, i));
                }
            }
        }
    }
    Some(out)
}

/// Whether an allocation's devices may be used from a node.
fn reaches(a: &ClaimAllocation, node: &str, labels: &Labels) -> bool {
    a.nodes.reach(node, labels)
}

/// What the session allocated, and which devices every claim holds.
#[derive(Clone, Debug, Default)]
pub struct DeviceState {
    /// Devices held by an allocation, by cluster: those the cache knows, and the session's.
    taken: HashMap<Id, HashSet<DeviceKey>>,
    /// (cluster, claim `namespace/name`) → what the session allocated it.
    given: HashMap<(Id, String), ClaimAllocation>,
    /// The claims each task allocated, to undo.
    by_task: HashMap<Id, Vec<(Id, String)>>,
}

impl DeviceState {
    /// The devices held as a session opens on `snap`: every allocated claim's.
    pub fn open(snap: &Snapshot) -> Self {
        let mut s = Self::default();
        if snap.device_users.is_empty() {
            return s;
        }
        for (cluster, dra) in &snap.dra {
            let Some(id) = snap.cluster_id(cluster) else {
                continue;
            };
            let set = s.taken.entry(id).or_default();
            for c in dra.claims.values() {
                for d in c.allocation.iter().flat_map(|a| &a.devices) {
                    set.insert((d.driver.clone(), d.pool.clone(), d.device.clone()));
                }
            }
        }
        s
    }

    fn claim_key(shape: &TaskShape, claim: &str) -> String {
        format!("{}/{claim}", shape.namespace)
    }

    /// Whether the ResourceClaims of a pod of `shape` let it run on `node`. With `empty`, as if
    /// no device were held (whether the node could ever serve them).
    pub fn check(
        &self,
        snap: &Snapshot,
        shape: &TaskShape,
        node: Id,
        empty: bool,
    ) -> Result<(), Unfit> {
        let claims = &shape.rules.device_claims;
        if claims.is_empty() {
            return Ok(());
        }
        let Some(n) = snap.nodes.get(node) else {
            return Ok(());
        };
        let unfit = |d: DeviceUnfit| Err(Unfit::Device(d));
        let Some(dra) = snap.dra.get(&n.spec.cluster) else {
            return unfit(DeviceUnfit::Missing(Self::claim_key(
                shape,
                claims[0].claim.as_deref().unwrap_or(&claims[0].name),
            )));
        };
        let held = self.taken.get(&n.cluster);
        // Devices this pod's earlier claims would take on the node.
        let mut mine: HashSet<DeviceKey> = HashSet::new();
        for pc in claims {
            let Some(name) = &pc.claim else {
                return unfit(DeviceUnfit::NotCreated(pc.name.clone()));
            };
            let key = Self::claim_key(shape, name);
            let Some(claim) = dra.claims.get(&key) else {
                return unfit(DeviceUnfit::Missing(key));
            };
            if claim.deleting {
                return unfit(DeviceUnfit::Deleting(name.clone()));
            }
            let allocated = if empty {
                claim.allocation.as_ref()
            } else {
                self.given
                    .get(&(n.cluster, key.clone()))
                    .or(claim.allocation.as_ref())
            };
            if let Some(a) = allocated {
                if !reaches(a, &n.spec.name, &n.spec.labels) {
                    return unfit(DeviceUnfit::NotAvailable);
                }
                continue;
            }
            let taken =
                |k: &DeviceKey| mine.contains(k) || (!empty && held.is_some_and(|h| h.contains(k)));
            let a = match allocate(dra, claim, &n.spec.name, &n.spec.labels, &taken) {
                Ok(a) => a,
                Err(e) => return unfit(e),
            };
            for d in a.devices {
                mine.insert((d.driver, d.pool, d.device));
            }
        }
        Ok(())
    }

    /// `task` is placed on `node` (`sign` 1) or taken off it (-1): its claims not allocated yet
    /// are allocated devices of the node, or given them back.
    pub fn place(&mut self, snap: &Snapshot, task: Id, node: Id, sign: i32) {
        let Some(t) = snap.tasks.get(task) else {
            return;
        };
        let shape = &t.spec.shape;
        if shape.rules.device_claims.is_empty() {
            return;
        }
        if sign < 0 {
            for slot in self.by_task.remove(&task).unwrap_or_default() {
                if let Some(a) = self.given.remove(&slot) {
                    let set = self.taken.entry(slot.0).or_default();
                    for d in a.devices {
                        set.remove(&(d.driver, d.pool, d.device));
                    }
                }
            }
            return;
        }
        let Some(n) = snap.nodes.get(node) else {
            return;
        };
        let Some(dra) = snap.dra.get(&n.spec.cluster) else {
            return;
        };
        let mut gave = Vec::new();
        for pc in &shape.rules.device_claims {
            let Some(name) = &pc.claim else { continue };
            let key = Self::claim_key(shape, name);
            let slot = (n.cluster, key.clone());
            if self.given.contains_key(&slot) {
                continue;
            }
            let Some(claim) = dra.claims.get(&key) else {
                continue;
            };
            if claim.allocation.is_some() {
                continue;
            }
            let held = self.taken.entry(n.cluster).or_default();
            let taken = |k: &DeviceKey| held.contains(k);
            let Ok(a) = allocate(dra, claim, &n.spec.name, &n.spec.labels, &taken) else {
                continue;
            };
            for d in &a.devices {
                held.insert((d.driver.clone(), d.pool.clone(), d.device.clone()));
            }
            self.given.insert(slot.clone(), a);
            gave.push(slot);
        }
        if !gave.is_empty() {
            self.by_task.entry(task).or_default().extend(gave);
        }
    }

    /// What must be written before `task` is bound to `node`: each of its claims allocated in
    /// this session (with the allocation), and each allocated earlier but not reserved for it.
    pub fn prebind(&self, snap: &Snapshot, task: Id, node: Id) -> Vec<DeviceBind> {
        let (Some(t), Some(n)) = (snap.tasks.get(task), snap.nodes.get(node)) else {
            return Vec::new();
        };
        let Some(dra) = snap.dra.get(&n.spec.cluster) else {
            return Vec::new();
        };
        let shape = &t.spec.shape;
        let mut out = Vec::new();
        for pc in &shape.rules.device_claims {
            let Some(name) = &pc.claim else { continue };
            let key = Self::claim_key(shape, name);
            let given = self.given.get(&(n.cluster, key.clone()));
            let reserved = dra
                .claims
                .get(&key)
                .is_some_and(|c| c.reserved_for.contains(&t.spec.name));
            if given.is_none() && reserved {
                continue;
            }
            out.push(DeviceBind {
                claim: key,
                allocation: given.cloned(),
            });
        }
        out
    }
}
