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

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use super::fit::{DeviceUnfit, Unfit};
use crate::cache::Snapshot;
use crate::decisions::DeviceBind;
use crate::model::{
    AllocatedDevice, AllocationMode, Attribute, ClaimAllocation, Device, Dra, Id, Labels,
    ResourceClaim, ResourceSlice, Selector, SliceNodes, TaskShape,
};

/// A device by its address in the snapshot of the session, which holds every slice for as long
/// as the session runs: telling devices apart then costs no string.
type DeviceRef = usize;

fn device_ref(d: &Device) -> DeviceRef {
    std::ptr::from_ref(d) as usize
}

/// Hashes addresses: multiply-mix each word, then fold the high bits down (addresses are
/// aligned, so their low bits carry nothing). The device maps are looked up for every device
/// of every node a scan checks, where SipHash would cost more than the lookup.
#[derive(Clone, Copy, Debug, Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type ByAddr = BuildHasherDefault<AddrHasher>;

/// A device the node reaches, with its slice's driver, pool and node reach.
#[derive(Clone, Copy)]
struct Visible<'a> {
    driver: &'a str,
    pool: &'a str,
    nodes: &'a SliceNodes,
    device: &'a Device,
}

/// Whether a selector matches each device of a slice, in order (an error is a CEL runtime
/// error on that device).
pub type SliceMatch = Arc<[Result<bool, String>]>;

/// A selector on a slice's devices: [`match_slice`], or a cache of it.
pub type Matcher<'m> = dyn Fn(&Selector, &ResourceSlice) -> SliceMatch + 'm;

/// [`Matcher`] without a cache.
pub fn match_slice(s: &Selector, slice: &ResourceSlice) -> SliceMatch {
    slice
        .devices
        .iter()
        .map(|d| s.0.matches(&slice.driver, d))
        .collect()
}

/// The devices `claim` would be allocated on a node named `node` with `labels`, with `taken`
/// saying which devices other claims hold and `matches` evaluating selectors.
pub fn allocate(
    dra: &Dra,
    claim: &ResourceClaim,
    node: &str,
    labels: &Labels,
    taken: &dyn Fn(&Device) -> bool,
    matches: &Matcher,
) -> Result<ClaimAllocation, DeviceUnfit> {
    choose_devices(dra, claim, node, labels, taken, matches).map(|c| allocation(claim, &c))
}

/// The allocation of the devices chosen for `claim`'s requests.
fn allocation(claim: &ResourceClaim, chosen: &[(usize, Visible)]) -> ClaimAllocation {
    let nodes = chosen
        .iter()
        .map(|(_, v)| v.nodes)
        .fold(SliceNodes::All, |acc, n| match (acc, n) {
            (SliceNodes::Node(a), _) => SliceNodes::Node(a),
            (_, SliceNodes::Node(b)) => SliceNodes::Node(b.clone()),
            (SliceNodes::Selector(a), _) => SliceNodes::Selector(a),
            (_, other) => other.clone(),
        });
    let devices = chosen
        .iter()
        .map(|(r, v)| AllocatedDevice {
            request: claim.requests[*r].name.clone(),
            driver: v.driver.to_string(),
            pool: v.pool.to_string(),
            device: v.device.name.clone(),
        })
        .collect();
    ClaimAllocation { devices, nodes }
}

/// The devices of [`allocate`], each with the index of the request it serves, before they are
/// written down as an allocation.
fn choose_devices<'a>(
    dra: &'a Dra,
    claim: &ResourceClaim,
    node: &'a str,
    labels: &'a Labels,
    taken: &dyn Fn(&Device) -> bool,
    matches: &Matcher,
) -> Result<Vec<(usize, Visible<'a>)>, DeviceUnfit> {
    if let Some(what) = &claim.unsupported {
        return Err(DeviceUnfit::Unsupported(what.clone()));
    }
    let slices: Vec<&ResourceSlice> = dra.slices_for(node, labels).collect();
    let visible: Vec<Visible> = slices
        .iter()
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
    let mut matching: Vec<Vec<usize>> = Vec::with_capacity(claim.requests.len());
    for r in &claim.requests {
        let Some(class) = dra.classes.get(&r.class) else {
            return Err(DeviceUnfit::ClassMissing(r.name.clone(), r.class.clone()));
        };
        let mut m = Vec::new();
        let mut first = 0;
        for slice in &slices {
            let results: Vec<SliceMatch> = class
                .selectors
                .iter()
                .chain(&r.selectors)
                .map(|s| matches(s, slice))
                .collect();
            for j in 0..slice.devices.len() {
                let mut ok = true;
                for result in &results {
                    match result.get(j) {
                        Some(Ok(true)) => {}
                        Some(Ok(false)) | None => {
                            ok = false;
                            break;
                        }
                        Some(Err(e)) => return Err(DeviceUnfit::Cel(claim.key(), e.clone())),
                    }
                }
                if ok {
                    m.push(first + j);
                }
            }
            first += slice.devices.len();
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
            return Ok(chosen.into_iter().map(|(r, i)| (r, visible[i])).collect());
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
    taken: &dyn Fn(&Device) -> bool,
    value: Option<&Attribute>,
) -> Option<Vec<(usize, usize)>> {
    let mut used: Vec<usize> = Vec::new();
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
                    if used.contains(&i) || taken(visible[i].device) || !fits(i) {
                        continue;
                    }
                    used.push(i);
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
                        .any(|&i| used.contains(&i) || taken(visible[i].device))
                {
                    return None;
                }
                for i in all {
                    used.push(i);
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
    /// Selector results of the session, by (selector, device): a class's selector is evaluated
    /// once per device, whatever the number of pods and nodes looked at.
    matched: RefCell<HashMap<(usize, usize), SliceMatch, ByAddr>>,
    /// Devices held by an allocation, by cluster: those the cache knows, and the session's.
    taken: HashMap<Id, HashSet<DeviceRef, ByAddr>>,
    /// (cluster, claim `namespace/name`) → what the session allocated it.
    given: HashMap<(Id, String), Given>,
    /// The claims each task allocated, to undo.
    by_task: HashMap<Id, Vec<(Id, String)>>,
    /// What the last shape checked asks of a node in one cluster: a scan checks one shape
    /// against many nodes, and only the node changes until the next placement.
    memo: RefCell<Option<Memo>>,
}

/// An allocation the session made, with the devices it holds.
#[derive(Clone, Debug)]
struct Given {
    allocation: ClaimAllocation,
    devices: Vec<DeviceRef>,
}

/// The node-independent part of checking one shape's claims in one cluster.
#[derive(Clone, Debug)]
struct Memo {
    shape: Arc<TaskShape>,
    cluster: Id,
    empty: bool,
    needs: Arc<Vec<Need>>,
}

/// What one of a pod's claims asks of a node, in order.
#[derive(Clone, Debug)]
enum Need {
    /// It fails on every node, and the claims after it are not looked at.
    Fail(Unfit),
    /// Allocated already: the node must reach its devices.
    Allocated(ClaimAllocation),
    /// Devices to allocate on the node.
    Allocate(Arc<ResourceClaim>),
}

impl DeviceState {
    /// `s` on the devices of a slice, remembered for the session.
    fn cached(&self, s: &Selector, slice: &ResourceSlice) -> SliceMatch {
        let key = (
            Arc::as_ptr(&s.0) as *const () as usize,
            std::ptr::from_ref(slice) as usize,
        );
        if let Some(r) = self.matched.borrow().get(&key) {
            return Arc::clone(r);
        }
        let r = match_slice(s, slice);
        self.matched.borrow_mut().insert(key, Arc::clone(&r));
        r
    }

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
            let held: HashSet<(&str, &str, &str)> = dra
                .claims
                .values()
                .flat_map(|c| c.allocation.iter().flat_map(|a| &a.devices))
                .map(|d| (d.driver.as_str(), d.pool.as_str(), d.device.as_str()))
                .collect();
            if held.is_empty() {
                continue;
            }
            let set = s.taken.entry(id).or_default();
            for slice in dra.slices().values() {
                for d in &slice.devices {
                    if held.contains(&(slice.driver.as_str(), slice.pool.as_str(), &d.name)) {
                        set.insert(device_ref(d));
                    }
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
        shape: &Arc<TaskShape>,
        node: Id,
        empty: bool,
    ) -> Result<(), Unfit> {
        if shape.rules.device_claims.is_empty() {
            return Ok(());
        }
        let Some(n) = snap.nodes.get(node) else {
            return Ok(());
        };
        let needs = self.needs(snap, shape, n.cluster, &n.spec.cluster, empty);
        let held = if empty {
            None
        } else {
            self.taken.get(&n.cluster)
        };
        // Devices this pod's earlier claims would take on the node.
        let mut mine: Vec<DeviceRef> = Vec::new();
        for need in needs.iter() {
            let claim = match need {
                Need::Fail(u) => return Err(u.clone()),
                Need::Allocated(a) => {
                    if !reaches(a, &n.spec.name, &n.spec.labels) {
                        return Err(Unfit::Device(DeviceUnfit::NotAvailable));
                    }
                    continue;
                }
                Need::Allocate(claim) => claim,
            };
            let Some(dra) = snap.dra.get(&n.spec.cluster) else {
                return Err(Unfit::Device(DeviceUnfit::Missing(claim.key())));
            };
            let taken = |d: &Device| {
                let r = device_ref(d);
                mine.contains(&r) || held.is_some_and(|h| h.contains(&r))
            };
            let cached = |s: &Selector, slice: &ResourceSlice| self.cached(s, slice);
            let chosen = choose_devices(dra, claim, &n.spec.name, &n.spec.labels, &taken, &cached)
                .map_err(Unfit::Device)?;
            mine.extend(chosen.iter().map(|(_, v)| device_ref(v.device)));
        }
        Ok(())
    }

    /// What [`check`](Self::check) answers on a node of `cluster` that reaches no
    /// ResourceSlice, when it is sure to be a refusal: a claim to allocate has nothing to take
    /// there. A scan then skips such nodes whole, as it skips nodes without an extended resource
    /// the pod asks for. `empty` is [`check`](Self::check)'s.
    pub fn off_slice(
        &self,
        snap: &Snapshot,
        shape: &Arc<TaskShape>,
        cluster: Id,
        cluster_name: &str,
        empty: bool,
    ) -> Option<Unfit> {
        if shape.rules.device_claims.is_empty() {
            return None;
        }
        let needs = self.needs(snap, shape, cluster, cluster_name, empty);
        for need in needs.iter() {
            match need {
                Need::Fail(u) => return Some(u.clone()),
                // Whether the node reaches an allocation depends on the node.
                Need::Allocated(_) => return None,
                Need::Allocate(claim) => {
                    if let Some(what) = &claim.unsupported {
                        return Some(Unfit::Device(DeviceUnfit::Unsupported(what.clone())));
                    }
                    let dra = snap.dra.get(cluster_name)?;
                    if let Some(r) = claim
                        .requests
                        .iter()
                        .find(|r| !dra.classes.contains_key(&r.class))
                    {
                        return Some(Unfit::Device(DeviceUnfit::ClassMissing(
                            r.name.clone(),
                            r.class.clone(),
                        )));
                    }
                    let wants = !claim.match_attributes.is_empty()
                        || claim.requests.iter().any(|r| match r.mode {
                            AllocationMode::Exact(n) => n > 0,
                            AllocationMode::All => true,
                        });
                    if wants {
                        return Some(Unfit::Device(DeviceUnfit::CannotAllocate));
                    }
                }
            }
        }
        None
    }

    /// What `shape`'s claims ask of a node of `cluster`, worked out once until a placement.
    fn needs(
        &self,
        snap: &Snapshot,
        shape: &Arc<TaskShape>,
        cluster: Id,
        cluster_name: &str,
        empty: bool,
    ) -> Arc<Vec<Need>> {
        if let Some(m) = self.memo.borrow().as_ref()
            && Arc::ptr_eq(&m.shape, shape)
            && m.cluster == cluster
            && m.empty == empty
        {
            return Arc::clone(&m.needs);
        }
        let needs = Arc::new(self.build_needs(snap, shape, cluster, cluster_name, empty));
        *self.memo.borrow_mut() = Some(Memo {
            shape: Arc::clone(shape),
            cluster,
            empty,
            needs: Arc::clone(&needs),
        });
        needs
    }

    /// Each claim of `shape` in turn, as far as the first that fails on every node.
    fn build_needs(
        &self,
        snap: &Snapshot,
        shape: &TaskShape,
        cluster: Id,
        cluster_name: &str,
        empty: bool,
    ) -> Vec<Need> {
        let claims = &shape.rules.device_claims;
        let fail = |d: DeviceUnfit| vec![Need::Fail(Unfit::Device(d))];
        let Some(dra) = snap.dra.get(cluster_name) else {
            let first = claims[0].claim.as_deref().unwrap_or(&claims[0].name);
            return fail(DeviceUnfit::Missing(Self::claim_key(shape, first)));
        };
        let mut needs = Vec::with_capacity(claims.len());
        for pc in claims {
            let need = match &pc.claim {
                None => Need::Fail(Unfit::Device(DeviceUnfit::NotCreated(pc.name.clone()))),
                Some(name) => {
                    let key = Self::claim_key(shape, name);
                    match dra.claims.get(&key) {
                        None => Need::Fail(Unfit::Device(DeviceUnfit::Missing(key))),
                        Some(c) if c.deleting => {
                            Need::Fail(Unfit::Device(DeviceUnfit::Deleting(name.clone())))
                        }
                        Some(c) => {
                            let given = if empty {
                                None
                            } else {
                                self.given.get(&(cluster, key)).map(|g| &g.allocation)
                            };
                            match given.or(c.allocation.as_ref()) {
                                Some(a) => Need::Allocated(a.clone()),
                                None => Need::Allocate(Arc::clone(c)),
                            }
                        }
                    }
                }
            };
            let failed = matches!(need, Need::Fail(_));
            needs.push(need);
            if failed {
                break;
            }
        }
        needs
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
        self.memo.get_mut().take();
        if sign < 0 {
            for slot in self.by_task.remove(&task).unwrap_or_default() {
                if let Some(g) = self.given.remove(&slot) {
                    let set = self.taken.entry(slot.0).or_default();
                    for d in g.devices {
                        set.remove(&d);
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
            let given = {
                let held = self.taken.get(&n.cluster);
                let taken = |d: &Device| held.is_some_and(|h| h.contains(&device_ref(d)));
                let cached = |s: &Selector, slice: &ResourceSlice| self.cached(s, slice);
                let Ok(chosen) =
                    choose_devices(dra, claim, &n.spec.name, &n.spec.labels, &taken, &cached)
                else {
                    continue;
                };
                Given {
                    allocation: allocation(claim, &chosen),
                    devices: chosen.iter().map(|(_, v)| device_ref(v.device)).collect(),
                }
            };
            self.taken
                .entry(n.cluster)
                .or_default()
                .extend(given.devices.iter().copied());
            self.given.insert(slot.clone(), given);
            gave.push(slot);
        }
        if !gave.is_empty() {
            self.by_task.entry(task).or_default().extend(gave);
        }
    }

    /// What must be written before `task` is bound to `node`: each claim this session allocated
    /// placing it (with the allocation), and each of its other claims not reserved for it yet.
    /// A claim several pods share is allocated once, by the pod whose placement allocated it;
    /// the others only reserve it (a second allocation would be refused as a conflict).
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
            let slot = (n.cluster, key.clone());
            let allocated_here = self
                .by_task
                .get(&task)
                .is_some_and(|slots| slots.contains(&slot));
            let given = self.given.get(&slot).filter(|_| allocated_here);
            let reserved = dra
                .claims
                .get(&key)
                .is_some_and(|c| c.reserved_for.contains(&t.spec.name));
            if given.is_none() && reserved {
                continue;
            }
            out.push(DeviceBind {
                claim: key,
                allocation: given.map(|g| g.allocation.clone()),
            });
        }
        out
    }
}
