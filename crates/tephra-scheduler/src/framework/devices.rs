//! Devices in a session, as kube-scheduler's `DynamicResources` plugin decides them: whether a
//! pod's ResourceClaims let it run on a node ([`DeviceState::check`]), and which devices placing
//! it there allocates to each claim not allocated yet ([`DeviceState::place`]). A claim already
//! allocated pins its pods to the nodes its devices are reachable from. What a gang's claims
//! are allocated is undone with the gang when its statement is discarded, and becomes part of
//! its [`PreBind`](crate::decisions::PreBind) when it binds: each claim's allocation and
//! reservation, written before the pod is bound.
//!
//! Allocation takes, request by request, devices of the slices the node reaches (each pool's
//! newest generation only; in a `perDeviceNodeSelection` slice, the devices that reach the node)
//! that match the class's and the request's selectors and are free: not held whole, with the
//! counters they draw left in their pool, and, for a device shared by several allocations,
//! with room in each capacity for the share the request's amounts make by the capacity's
//! policy. Exactly the count asked, or every matching device for `All`; devices of requests
//! under one `matchAttribute` constraint share the attribute's value, those under a
//! `distinctAttribute` constraint differ in it. What is held is counted per member in a
//! `Usage`: devices whole, shares with what they consume, and counters drawn (once per device
//! in use, however many shares it has).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use super::fit::{DeviceUnfit, Unfit};
use crate::cache::Snapshot;
use crate::decisions::DeviceBind;
use crate::model::{
    AllocatedDevice, AllocationMode, Attribute, CapacityPolicy, ClaimAllocation, CounterSets,
    Device, DeviceRequest, Dra, Id, Labels, Milli, ResourceClaim, ResourceSlice, Selector,
    SliceNodes, TaskShape,
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

/// Devices in use in one cluster: allocated whole, or in shares (devices that allow several
/// allocations), and what the devices in use draw on their pools' counter sets. A device draws
/// on its counters once, however many shares it has.
#[derive(Clone, Debug, Default)]
struct Usage {
    whole: HashSet<DeviceRef, ByAddr>,
    shares: HashMap<DeviceRef, Shares, ByAddr>,
    /// driver → pool → counter set → counter → amount drawn.
    drawn: HashMap<String, HashMap<String, CounterSets>>,
}

/// The shares of one device: how many, and what they consume of its capacities together.
#[derive(Clone, Debug, Default)]
struct Shares {
    count: u32,
    consumed: BTreeMap<String, Milli>,
}

/// A device an allocation holds, as [`Usage`] counts it.
#[derive(Clone, Debug)]
struct Hold {
    device: DeviceRef,
    driver: String,
    pool: String,
    consumes: BTreeMap<(String, String), Milli>,
    /// What its share consumes; `None`: held whole.
    share: Option<BTreeMap<String, Milli>>,
}

impl Hold {
    fn of(v: &Visible, share: Option<&BTreeMap<String, Milli>>) -> Self {
        Self {
            device: device_ref(v.device),
            driver: v.driver.to_string(),
            pool: v.pool.to_string(),
            consumes: v.device.consumes.clone(),
            share: share.cloned(),
        }
    }
}

impl Usage {
    fn in_use(&self, d: DeviceRef) -> bool {
        self.whole.contains(&d) || self.shares.get(&d).is_some_and(|s| s.count > 0)
    }

    fn drawn(&self, driver: &str, pool: &str, set: &str, counter: &str) -> Milli {
        self.drawn
            .get(driver)
            .and_then(|p| p.get(pool))
            .and_then(|s| s.get(set))
            .and_then(|c| c.get(counter))
            .copied()
            .unwrap_or(0)
    }

    fn consumed(&self, d: DeviceRef, capacity: &str) -> Milli {
        self.shares
            .get(&d)
            .and_then(|s| s.consumed.get(capacity))
            .copied()
            .unwrap_or(0)
    }

    /// Draws (`sign` 1) or gives back (-1) a device's counters.
    fn draw(
        &mut self,
        driver: &str,
        pool: &str,
        consumes: &BTreeMap<(String, String), Milli>,
        sign: Milli,
    ) {
        if consumes.is_empty() {
            return;
        }
        let sets = self
            .drawn
            .entry(driver.to_string())
            .or_default()
            .entry(pool.to_string())
            .or_default();
        for ((set, counter), amount) in consumes {
            *sets
                .entry(set.clone())
                .or_default()
                .entry(counter.clone())
                .or_default() += sign * amount;
        }
    }

    /// Holds a device (`first`: no one held it before, so its counters are drawn now).
    fn hold(&mut self, v: &Visible, share: Option<&BTreeMap<String, Milli>>, first: bool) {
        let counters = (v.driver, v.pool, &v.device.consumes);
        self.hold_device(device_ref(v.device), counters, share, first);
    }

    /// [`hold`](Self::hold) with what a [`Hold`] remembers.
    fn hold_again(&mut self, h: &Hold, first: bool) {
        let counters = (h.driver.as_str(), h.pool.as_str(), &h.consumes);
        self.hold_device(h.device, counters, h.share.as_ref(), first);
    }

    fn hold_device(
        &mut self,
        d: DeviceRef,
        (driver, pool, consumes): (&str, &str, &BTreeMap<(String, String), Milli>),
        share: Option<&BTreeMap<String, Milli>>,
        first: bool,
    ) {
        match share {
            None => {
                self.whole.insert(d);
            }
            Some(consumed) => {
                let s = self.shares.entry(d).or_default();
                s.count += 1;
                for (name, amount) in consumed {
                    *s.consumed.entry(name.clone()).or_default() += amount;
                }
            }
        }
        if first {
            self.draw(driver, pool, consumes, 1);
        }
    }

    /// Gives back what [`hold`](Self::hold) took; the counters once no one holds the device.
    fn release(&mut self, h: &Hold) {
        match &h.share {
            None => {
                self.whole.remove(&h.device);
            }
            Some(consumed) => {
                if let Some(s) = self.shares.get_mut(&h.device) {
                    s.count = s.count.saturating_sub(1);
                    for (name, amount) in consumed {
                        *s.consumed.entry(name.clone()).or_default() -= amount;
                    }
                    if s.count == 0 {
                        self.shares.remove(&h.device);
                    }
                }
            }
        }
        if !self.in_use(h.device) {
            self.draw(&h.driver, &h.pool, &h.consumes, -1);
        }
    }
}

/// What a claim being allocated would hold on top of what is held already: the devices of the
/// claims before it and of its own requests before this one.
struct Trial<'u> {
    base: Option<&'u Usage>,
    add: Usage,
}

impl<'u> Trial<'u> {
    fn new(base: Option<&'u Usage>) -> Self {
        Self {
            base,
            add: Usage::default(),
        }
    }

    fn in_use(&self, d: DeviceRef) -> bool {
        self.add.in_use(d) || self.base.is_some_and(|b| b.in_use(d))
    }

    fn hold(&mut self, v: &Visible, share: Option<&BTreeMap<String, Milli>>) {
        let first = !self.in_use(device_ref(v.device));
        self.add.hold(v, share, first);
    }

    /// Whether `v` can serve `req` now: `None` if not; otherwise what its share would consume
    /// (`Some(None)`: the device is taken whole). A device is free unless held whole (or, not
    /// allowing several allocations, held at all); its pool must be valid and, unless it draws
    /// on them already, have the counters it draws; every capacity the request names must be
    /// one it has, and the amounts the capacities' policies make of the request must fit beside
    /// what its other shares consume.
    fn serves(
        &self,
        dra: &Dra,
        v: &Visible,
        req: &DeviceRequest,
    ) -> Option<Option<BTreeMap<String, Milli>>> {
        let d = v.device;
        let r = device_ref(d);
        let in_use = self.in_use(r);
        if in_use && !d.multi {
            return None;
        }
        match dra.counter_sets(v.driver, v.pool) {
            Some(Err(_)) => return None,
            None if !d.consumes.is_empty() => return None,
            Some(Ok(sets)) if !in_use => {
                for ((set, counter), amount) in &d.consumes {
                    let total = sets.get(set).and_then(|c| c.get(counter))?;
                    let drawn = self.add.drawn(v.driver, v.pool, set, counter)
                        + self
                            .base
                            .map_or(0, |b| b.drawn(v.driver, v.pool, set, counter));
                    if drawn + amount > *total {
                        return None;
                    }
                }
            }
            _ => {}
        }
        if !d.multi && req.capacity.is_empty() {
            return Some(None);
        }
        if req.capacity.keys().any(|k| !d.capacity.contains_key(k)) {
            return None;
        }
        let mut consumed = BTreeMap::new();
        for (name, cap) in &d.capacity {
            let asked = req.capacity.get(name).copied();
            let c = CapacityPolicy::consumed(cap.policy.as_ref(), cap.value, asked)?;
            let held = self.add.consumed(r, name) + self.base.map_or(0, |b| b.consumed(r, name));
            if c < 0 || held + c > cap.value {
                return None;
            }
            consumed.insert(name.clone(), c);
        }
        Some(d.multi.then_some(consumed))
    }
}

/// What a share consumes of its device's capacities, by capacity.
type Consumed = BTreeMap<String, Milli>;

/// A device chosen for a request: the request's index, the device, and what its share consumes
/// (`None`: taken whole).
type Pick<'a> = (usize, Visible<'a>, Option<Consumed>);

/// The allocation of the devices chosen for `claim`'s requests. A share is named by a UUID made
/// from the claim, the request and the device, so that the same choice writes the same name.
fn allocation(claim: &ResourceClaim, chosen: &[Pick]) -> ClaimAllocation {
    let nodes = chosen
        .iter()
        .map(|(_, v, _)| v.nodes)
        .fold(SliceNodes::All, |acc, n| match (acc, n) {
            (SliceNodes::Node(a), _) => SliceNodes::Node(a),
            (_, SliceNodes::Node(b)) => SliceNodes::Node(b.clone()),
            (SliceNodes::Selector(a), _) => SliceNodes::Selector(a),
            (_, other) => other.clone(),
        });
    let devices = chosen
        .iter()
        .map(|(r, v, share)| {
            let request = &claim.requests[*r].name;
            AllocatedDevice {
                request: request.clone(),
                driver: v.driver.to_string(),
                pool: v.pool.to_string(),
                device: v.device.name.clone(),
                share: share
                    .as_ref()
                    .map(|_| share_id(&[&claim.key(), request, v.driver, v.pool, &v.device.name])),
                consumed: share.clone().unwrap_or_default(),
            }
        })
        .collect();
    ClaimAllocation { devices, nodes }
}

/// A UUID (version 5 layout, 128-bit FNV-1a of `parts`) naming a share of a device.
pub fn share_id(parts: &[&str]) -> String {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    let h = (h & !(0xf << 76) | (0x5 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let x = format!("{h:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

/// The devices a claim is allocated on a node, each with the index of the request it serves,
/// held in `trial` as they are chosen; an error if the claim cannot be allocated there.
fn choose_devices<'a>(
    dra: &'a Dra,
    claim: &ResourceClaim,
    node: &'a str,
    labels: &'a Labels,
    trial: &mut Trial,
    matches: &Matcher,
) -> Result<Vec<Pick<'a>>, DeviceUnfit> {
    if let Some(what) = &claim.unsupported {
        return Err(DeviceUnfit::Unsupported(what.clone()));
    }
    let slices: Vec<&ResourceSlice> = dra.slices_for(node, labels).collect();
    // Devices in slice and device order, with those another node's (per-device reach) left
    // out after their selectors are matched (the results are by position in the slice).
    let mut visible: Vec<Option<Visible>> = Vec::new();
    for s in &slices {
        for d in &s.devices {
            let nodes = d.nodes.as_ref().unwrap_or(&s.nodes);
            let reached = d.nodes.as_ref().is_none_or(|n| n.reach(node, labels));
            visible.push(reached.then_some(Visible {
                driver: &s.driver,
                pool: &s.pool,
                nodes,
                device: d,
            }));
        }
    }
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
                if visible[first + j].is_none() {
                    continue;
                }
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
    let visible: Vec<Visible> = visible
        .into_iter()
        .map(|v| {
            v.unwrap_or(Visible {
                driver: "",
                pool: "",
                nodes: &NO_NODES,
                device: &NO_DEVICE,
            })
        })
        .collect();
    // The values the first constraint's attribute takes, to try in turn (one pass without).
    let constraint = claim.match_attributes.first();
    let values: Vec<Option<Attribute>> = match constraint {
        None => vec![None],
        Some((_, attr)) => {
            let mut vals: Vec<Attribute> = matching
                .iter()
                .flatten()
                .filter_map(|&i| attribute(&visible[i], attr))
                .collect();
            vals.sort();
            vals.dedup();
            vals.into_iter().map(Some).collect()
        }
    };
    for value in values {
        let mut attempt = Trial {
            base: trial.base,
            add: trial.add.clone(),
        };
        if let Some(chosen) = choose(
            dra,
            claim,
            &visible,
            &matching,
            &mut attempt,
            value.as_ref(),
        ) {
            trial.add = attempt.add;
            return Ok(chosen
                .into_iter()
                .map(|(r, i, share)| (r, visible[i], share))
                .collect());
        }
    }
    Err(DeviceUnfit::CannotAllocate)
}

/// Stand in for a device the node does not reach (never matched, so never chosen).
static NO_NODES: SliceNodes = SliceNodes::PerDevice;
static NO_DEVICE: Device = Device {
    name: String::new(),
    attributes: BTreeMap::new(),
    capacity: BTreeMap::new(),
    consumes: BTreeMap::new(),
    nodes: None,
    multi: false,
};

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

/// Whether a constraint naming `requests` (empty: all) covers `request`.
fn covers(requests: &[String], request: &str) -> bool {
    requests.is_empty() || requests.iter().any(|r| r == request)
}

/// Devices for every request, each `(request index, visible index, share)`, held in `trial`:
/// the first `matchAttribute` constraint's requests get devices with `value` of its attribute,
/// and each `distinctAttribute` constraint's requests devices that differ in its attribute;
/// `None` if they cannot all be had.
fn choose(
    dra: &Dra,
    claim: &ResourceClaim,
    visible: &[Visible],
    matching: &[Vec<usize>],
    trial: &mut Trial,
    value: Option<&Attribute>,
) -> Option<Vec<(usize, usize, Option<Consumed>)>> {
    // The values each distinct constraint's devices took so far.
    let mut seen: Vec<Vec<Attribute>> = vec![Vec::new(); claim.distinct_attributes.len()];
    let mut out = Vec::new();
    for (r, req) in claim.requests.iter().enumerate() {
        let constrained = claim
            .match_attributes
            .first()
            .is_some_and(|(reqs, _)| covers(reqs, &req.name));
        let fits = |i: usize| {
            let v = &visible[i];
            !constrained
                || claim
                    .match_attributes
                    .first()
                    .is_none_or(|(_, attr)| attribute(v, attr).as_ref() == value)
        };
        // The distinct constraints' values of a device, or `None` if one it must obey fails.
        let distinct = |i: usize, seen: &[Vec<Attribute>]| -> Option<Vec<(usize, Attribute)>> {
            let mut vals = Vec::new();
            for (k, (reqs, attr)) in claim.distinct_attributes.iter().enumerate() {
                if !covers(reqs, &req.name) {
                    continue;
                }
                let a = attribute(&visible[i], attr)?;
                if seen[k].contains(&a) || vals.iter().any(|(_, b)| *b == a) {
                    return None;
                }
                vals.push((k, a));
            }
            Some(vals)
        };
        let candidates: Vec<usize> = matching[r].iter().copied().filter(|&i| fits(i)).collect();
        let want = match req.mode {
            AllocationMode::Exact(n) => n as usize,
            AllocationMode::All => {
                if candidates.is_empty() {
                    return None;
                }
                candidates.len()
            }
        };
        let mut got = 0;
        for i in candidates {
            if got == want {
                break;
            }
            let taken = trial
                .serves(dra, &visible[i], req)
                .and_then(|share| Some((share, distinct(i, &seen)?)));
            let Some((share, vals)) = taken else {
                if req.mode == AllocationMode::All {
                    return None;
                }
                continue;
            };
            trial.hold(&visible[i], share.as_ref());
            for (k, a) in vals {
                seen[k].push(a);
            }
            out.push((r, i, share));
            got += 1;
        }
        if got < want {
            return None;
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
    taken: HashMap<Id, Usage>,
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
    holds: Vec<Hold>,
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

    /// The devices held as a session opens on `snap`: every allocated claim's, whole or in
    /// the shares its results name.
    pub fn open(snap: &Snapshot) -> Self {
        let mut s = Self::default();
        if snap.device_users.is_empty() {
            return s;
        }
        for (cluster, dra) in &snap.dra {
            let Some(id) = snap.cluster_id(cluster) else {
                continue;
            };
            let mut held: HashMap<(&str, &str, &str), Vec<&AllocatedDevice>> = HashMap::new();
            for d in dra
                .claims
                .values()
                .flat_map(|c| c.allocation.iter().flat_map(|a| &a.devices))
            {
                held.entry((d.driver.as_str(), d.pool.as_str(), d.device.as_str()))
                    .or_default()
                    .push(d);
            }
            if held.is_empty() {
                continue;
            }
            let usage = s.taken.entry(id).or_default();
            for slice in dra.slices().values() {
                for d in &slice.devices {
                    let Some(results) =
                        held.get(&(slice.driver.as_str(), slice.pool.as_str(), d.name.as_str()))
                    else {
                        continue;
                    };
                    let v = Visible {
                        driver: &slice.driver,
                        pool: &slice.pool,
                        nodes: &slice.nodes,
                        device: d,
                    };
                    for r in results {
                        let first = !usage.in_use(device_ref(d));
                        let share = r.share.as_ref().map(|_| &r.consumed);
                        usage.hold(&v, share, first);
                    }
                }
            }
        }
        s
    }

    /// [`choose_devices`] for `claim` on the node named `node`, with the session's selector
    /// results.
    fn choose_on<'a>(
        &self,
        dra: &'a Dra,
        claim: &ResourceClaim,
        node: &'a str,
        labels: &'a Labels,
        trial: &mut Trial,
    ) -> Result<Vec<Pick<'a>>, DeviceUnfit> {
        let cached = |s: &Selector, slice: &ResourceSlice| self.cached(s, slice);
        choose_devices(dra, claim, node, labels, trial, &cached)
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
        let mut trial = Trial::new(held);
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
            self.choose_on(dra, claim, &n.spec.name, &n.spec.labels, &mut trial)
                .map_err(Unfit::Device)?;
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
                                // Whether a node could ever serve it: an allocation to some
                                // nodes' devices that nobody holds would be deallocated if it
                                // kept the pod off the nodes (`stranded`), and allocated again.
                                Some(a)
                                    if empty
                                        && c.reserved_for.is_empty()
                                        && !matches!(a.nodes, SliceNodes::All) =>
                                {
                                    Need::Allocate(Arc::clone(c))
                                }
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
                    let usage = self.taken.entry(slot.0).or_default();
                    for h in g.holds.iter().rev() {
                        usage.release(h);
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
                let mut trial = Trial::new(self.taken.get(&n.cluster));
                let Ok(chosen) =
                    self.choose_on(dra, claim, &n.spec.name, &n.spec.labels, &mut trial)
                else {
                    continue;
                };
                Given {
                    allocation: allocation(claim, &chosen),
                    holds: chosen
                        .iter()
                        .map(|(_, v, share)| Hold::of(v, share.as_ref()))
                        .collect(),
                }
            };
            let usage = self.taken.entry(n.cluster).or_default();
            for h in &given.holds {
                let first = !usage.in_use(h.device);
                usage.hold_again(h, first);
            }
            self.given.insert(slot.clone(), given);
            gave.push(slot);
        }
        if !gave.is_empty() {
            self.by_task.entry(task).or_default().extend(gave);
        }
    }

    /// The claims of `task` in `cluster` that keep it off nodes and may be deallocated, as
    /// kube-scheduler's DynamicResources PostFilter picks them: allocated before this session
    /// (not by it, nor by an earlier one whose bind no watcher has shown yet), to devices only
    /// some nodes reach, reserved for nobody or for the pod alone, and not being deleted. The
    /// session drops those it uses elsewhere as it closes.
    pub fn stranded(&self, snap: &Snapshot, task: Id, cluster: Id) -> Vec<Arc<ResourceClaim>> {
        let Some(t) = snap.tasks.get(task) else {
            return Vec::new();
        };
        let shape = &t.spec.shape;
        let Some(dra) = snap
            .clusters
            .get(cluster)
            .and_then(|c| snap.dra.get(&c.name))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for pc in &shape.rules.device_claims {
            let Some(name) = &pc.claim else { continue };
            let key = Self::claim_key(shape, name);
            if self.given.contains_key(&(cluster, key.clone())) {
                continue;
            }
            // An allocation a session gave that no watcher has shown yet is its pod's, whose
            // reservation is not shown yet either.
            if dra.assumed().get(&key).is_some() {
                continue;
            }
            let Some(c) = dra.claims.get(&key) else {
                continue;
            };
            let restricted = c
                .allocation
                .as_ref()
                .is_some_and(|a| !matches!(a.nodes, SliceNodes::All));
            let free = c.reserved_for.iter().all(|p| *p == t.spec.name);
            if restricted && free && !c.deleting {
                out.push(Arc::clone(c));
            }
        }
        out
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
