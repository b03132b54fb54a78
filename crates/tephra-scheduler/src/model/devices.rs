//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the scheduler sees it, per member
//! cluster: DeviceClasses and their selectors, ResourceSlices (a driver's pool of devices with
//! their attributes and capacity, for one node, some nodes or all), ResourceClaims (requests for
//! devices of a class, `exactly` a count or all of them, with `matchAttribute` constraints) and
//! what they were allocated. A selector is a CEL expression over a device; the core does not
//! evaluate CEL itself: whoever reads the objects compiles each expression into a
//! [`DeviceSelector`]. How devices are chosen for a claim on a node is in
//! `framework/devices.rs`.
//!
//! Two ways of sharing hardware are modelled as Kubernetes serves them (beta since 1.36):
//! **partitionable devices**, whose pool publishes counter sets (`sharedCounters`) that each
//! allocated device draws on (`consumesCounters`), so that overlapping partitions of one GPU
//! exclude each other, and whose devices may each name the nodes that reach them
//! (`perDeviceNodeSelection`); and **consumable capacity**, devices that allow several
//! allocations at once (`allowMultipleAllocations`), each share consuming part of the device's
//! capacity as its request asks, rounded by the capacity's `requestPolicy`. Quantities are
//! held in thousandths ([`Milli`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::assumed::Assumed;
use super::selectors::{Labels, Requirement, affinity_matches};

/// A device attribute's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attribute {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    Str(String),
    /// `version` (semantic version, compared as text for `matchAttribute`).
    Version(String),
}

/// A quantity in thousandths of its unit (`10Gi` is 10,737,418,240,000).
pub type Milli = i128;

/// One capacity of a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capacity {
    /// The quantity as written (what CEL selectors see).
    pub text: String,
    /// Its value.
    pub value: Milli,
    /// How a share of a device allowing several allocations consumes it (`requestPolicy`).
    pub policy: Option<CapacityPolicy>,
}

/// A capacity's `requestPolicy`: what a share consumes when its request names no amount
/// (`default`; without one, the whole capacity), and which amounts are allowed, requests being
/// rounded up to the next allowed amount.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapacityPolicy {
    /// `default`.
    pub default: Option<Milli>,
    /// `validValues` (ascending) or `validRange`.
    pub valid: ValidAmounts,
}

/// The amounts a [`CapacityPolicy`] allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ValidAmounts {
    /// Any.
    #[default]
    Any,
    /// `validValues`, ascending.
    Values(Vec<Milli>),
    /// `validRange`: at least `min`, at most `max`, `min` plus a multiple of `step`.
    Range {
        /// `min`.
        min: Milli,
        /// `max`.
        max: Option<Milli>,
        /// `step`.
        step: Option<Milli>,
    },
}

impl CapacityPolicy {
    /// What a request for `asked` (or none) consumes of a capacity of `value`: `None` if the
    /// policy cannot give it (above the range's maximum or the largest valid value).
    pub fn consumed(policy: Option<&Self>, value: Milli, asked: Option<Milli>) -> Option<Milli> {
        let Some(p) = policy else {
            return Some(asked.unwrap_or(value));
        };
        let Some(asked) = asked else {
            return Some(p.default.unwrap_or(value));
        };
        let rounded = match &p.valid {
            ValidAmounts::Any => asked,
            ValidAmounts::Values(vs) => vs.iter().copied().find(|v| asked <= *v).unwrap_or(asked),
            ValidAmounts::Range { min, step, .. } => {
                if asked < *min {
                    *min
                } else if let Some(step) = step.filter(|s| *s > 0) {
                    let n = (asked - min + step - 1) / step;
                    min + n * step
                } else {
                    asked
                }
            }
        };
        if p.default == Some(rounded) {
            return Some(rounded);
        }
        let allowed = match &p.valid {
            ValidAmounts::Any => true,
            ValidAmounts::Values(vs) => vs.contains(&rounded),
            ValidAmounts::Range { max, .. } => max.is_none_or(|m| rounded <= m),
        };
        allowed.then_some(rounded)
    }
}

/// One device of a ResourceSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Device {
    /// Name, unique in its pool.
    pub name: String,
    /// Attributes by fully qualified name (`domain/name`; unqualified names take the driver's
    /// name as their domain).
    pub attributes: BTreeMap<String, Attribute>,
    /// Capacity by fully qualified name.
    pub capacity: BTreeMap<String, Capacity>,
    /// What it draws on its pool's counter sets while allocated (`consumesCounters`):
    /// (counter set, counter) → amount.
    pub consumes: BTreeMap<(String, String), Milli>,
    /// The nodes that reach it, in a slice with `perDeviceNodeSelection`; `None`: the slice's.
    pub nodes: Option<SliceNodes>,
    /// `allowMultipleAllocations`: allocated in shares, each consuming some of its capacity.
    pub multi: bool,
}

/// A selector over devices: a CEL expression, compiled by the reader of the objects.
pub trait DeviceSelector: Send + Sync {
    /// The expression, as written.
    fn expression(&self) -> &str;
    /// Whether a device of `driver` matches. An error (a CEL runtime error) means the claim
    /// cannot be allocated at all.
    fn matches(&self, driver: &str, device: &Device) -> Result<bool, String>;
}

/// A shared selector, compared by its expression.
#[derive(Clone)]
pub struct Selector(pub Arc<dyn DeviceSelector>);

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Selector({:?})", self.0.expression())
    }
}

impl PartialEq for Selector {
    fn eq(&self, o: &Self) -> bool {
        self.0.expression() == o.0.expression()
    }
}

impl Eq for Selector {}

/// Which nodes a ResourceSlice's devices are reachable from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceNodes {
    /// One node (`nodeName`).
    Node(String),
    /// Nodes matching a node selector (`nodeSelector`; its terms ORed).
    Selector(Vec<Vec<Requirement>>),
    /// Every node (`allNodes`).
    All,
    /// Each device says (`perDeviceNodeSelection`): the slice is looked at from every node, and
    /// each device's own reach decides.
    PerDevice,
}

impl SliceNodes {
    /// Whether a node named `name` with `labels` reaches the devices.
    pub fn reach(&self, name: &str, labels: &Labels) -> bool {
        match self {
            Self::Node(n) => n == name,
            Self::Selector(terms) => affinity_matches(terms, labels) && !terms.is_empty(),
            Self::All | Self::PerDevice => true,
        }
    }
}

/// A ResourceSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceSlice {
    /// Name.
    pub name: String,
    /// The driver that publishes it.
    pub driver: String,
    /// Its pool's name.
    pub pool: String,
    /// Its pool's generation: only slices of a pool's newest generation count.
    pub generation: i64,
    /// Which nodes reach its devices.
    pub nodes: SliceNodes,
    /// Its devices.
    pub devices: Vec<Device>,
    /// The counter sets it publishes for its pool (`sharedCounters`): set → counter → amount.
    pub counter_sets: BTreeMap<String, BTreeMap<String, Milli>>,
}

/// A DeviceClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceClass {
    /// Name.
    pub name: String,
    /// Selectors every device of the class matches.
    pub selectors: Vec<Selector>,
}

/// How many devices a request takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationMode {
    /// Exactly this many (`ExactCount`; one by default).
    Exact(u32),
    /// Every matching device the node reaches (`All`).
    All,
}

impl Default for AllocationMode {
    fn default() -> Self {
        Self::Exact(1)
    }
}

/// One request of a claim (`spec.devices.requests[].exactly`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceRequest {
    /// Name.
    pub name: String,
    /// Device class.
    pub class: String,
    /// The request's own selectors (besides the class's).
    pub selectors: Vec<Selector>,
    /// How many.
    pub mode: AllocationMode,
    /// `capacity.requests`: how much of each capacity a share of a device consumes.
    pub capacity: BTreeMap<String, Milli>,
}

/// One allocated device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllocatedDevice {
    /// The request it serves.
    pub request: String,
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device name.
    pub device: String,
    /// The share, on a device allowing several allocations (`shareID`).
    pub share: Option<String>,
    /// What the share consumes of the device's capacities (`consumedCapacity`).
    pub consumed: BTreeMap<String, Milli>,
}

/// What a claim was allocated (`status.allocation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimAllocation {
    /// The devices.
    pub devices: Vec<AllocatedDevice>,
    /// Where the devices may be used: a node (devices of a node's slice), nodes matching a
    /// selector, or anywhere.
    pub nodes: SliceNodes,
}

/// A ResourceClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its requests.
    pub requests: Vec<DeviceRequest>,
    /// `constraints[].matchAttribute`: the requests it covers (empty: all) and the attribute
    /// whose value their devices must share.
    pub match_attributes: Vec<(Vec<String>, String)>,
    /// `constraints[].distinctAttribute`: the requests it covers (empty: all) and the
    /// attribute whose value their devices must each have differently.
    pub distinct_attributes: Vec<(Vec<String>, String)>,
    /// What it was allocated, if it was.
    pub allocation: Option<ClaimAllocation>,
    /// The pods it is reserved for (`status.reservedFor`), by name.
    pub reserved_for: Vec<String>,
    /// A DRA feature it uses that tephra does not allocate (admin access, prioritized lists,
    /// device tolerations), named: the pod waits with it.
    pub unsupported: Option<String>,
    /// Being deleted.
    pub deleting: bool,
    /// The `metadata.resourceVersion` it was read at: a deallocation the session decides is
    /// written only if the claim has not changed since.
    pub resource_version: String,
}

impl ResourceClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// One claim of a pod (`spec.resourceClaims[]`): its name in the pod and the ResourceClaim it
/// resolves to (`resourceClaimName`, or the claim generated from its template, which may not
/// exist yet).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodClaim {
    /// The name in the pod.
    pub name: String,
    /// The ResourceClaim's name; `None` while a template's claim is not created yet.
    pub claim: Option<String>,
}

/// The DRA objects of one member cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dra {
    /// DeviceClasses by name.
    pub classes: BTreeMap<String, Arc<DeviceClass>>,
    /// ResourceClaims by `namespace/name`.
    pub claims: BTreeMap<String, Arc<ResourceClaim>>,
    /// ResourceSlices by name.
    slices: BTreeMap<String, Arc<ResourceSlice>>,
    /// The slices that count (each pool's newest generation): those of one node by node name,
    /// and those of nodes by selector or of every node.
    by_node: BTreeMap<String, Vec<Arc<ResourceSlice>>>,
    shared: Vec<Arc<ResourceSlice>>,
    /// Each pool's counter sets, from its newest generation's slices, by (driver, pool); a
    /// pool whose sets are named twice, or one of whose devices draws on a set or counter the
    /// pool does not publish, is invalid (the reason), and none of its devices is allocated.
    pools: BTreeMap<String, BTreeMap<String, Result<CounterSets, String>>>,
    /// Allocations sessions gave claims that no watcher has shown yet, by claim
    /// `namespace/name`: the claim holds its allocation meanwhile, so that the next session
    /// does not give the same devices, counters or capacity again.
    assumed: Assumed<ClaimAllocation>,
}

/// A pool's counter sets: set → counter → amount.
pub type CounterSets = BTreeMap<String, BTreeMap<String, Milli>>;

impl Dra {
    /// Adds or replaces a slice.
    pub fn upsert_slice(&mut self, s: ResourceSlice) {
        self.slices.insert(s.name.clone(), Arc::new(s));
        self.reindex();
    }

    /// Removes a slice.
    pub fn delete_slice(&mut self, name: &str) {
        if self.slices.remove(name).is_some() {
            self.reindex();
        }
    }

    /// Adds or replaces a claim as a watcher shows it. An allocation it shows ends the
    /// claim's assumed one; without one, the claim keeps what it was assumed to be given.
    pub fn upsert_claim(&mut self, mut c: ResourceClaim) {
        let key = c.key();
        self.assumed.shown(&key, &mut c.allocation);
        self.claims.insert(key, Arc::new(c));
    }

    /// Removes a claim (`namespace/name`), and what it was assumed to be given.
    pub fn delete_claim(&mut self, key: &str) {
        self.claims.remove(key);
        self.assumed.end(key);
    }

    /// The claim `claim` (`namespace/name`) is being given `allocation` for `pod`'s bind: it
    /// holds it from now until a watcher shows the claim allocated, the claim goes, or the
    /// bind fails ([`Dra::unassume`]). A claim shown allocated already is left as it is.
    pub fn assume(&mut self, claim: &str, allocation: ClaimAllocation, pod: &str) {
        if let Some(c) = self.claims.get_mut(claim) {
            if c.allocation.is_some() {
                return;
            }
            Arc::make_mut(c).allocation = Some(allocation.clone());
        }
        self.assumed.insert(claim, allocation, pod);
    }

    /// `pod`'s bind failed: the claims it was to allocate hold nothing until a watcher shows
    /// otherwise.
    pub fn unassume(&mut self, pod: &str) {
        for k in self.assumed.end_for(pod) {
            if let Some(c) = self.claims.get_mut(&k) {
                Arc::make_mut(c).allocation = None;
            }
        }
    }

    /// What sessions allocated that no watcher has shown yet.
    pub fn assumed(&self) -> &Assumed<ClaimAllocation> {
        &self.assumed
    }

    /// Every slice, by name.
    pub fn slices(&self) -> &BTreeMap<String, Arc<ResourceSlice>> {
        &self.slices
    }

    fn reindex(&mut self) {
        let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for s in self.slices.values() {
            let g = newest.entry((&s.driver, &s.pool)).or_insert(s.generation);
            *g = (*g).max(s.generation);
        }
        let mut by_node: BTreeMap<String, Vec<Arc<ResourceSlice>>> = BTreeMap::new();
        let mut shared = Vec::new();
        let mut pools: BTreeMap<String, BTreeMap<String, Result<CounterSets, String>>> =
            BTreeMap::new();
        let current: Vec<&Arc<ResourceSlice>> = self
            .slices
            .values()
            .filter(|s| newest.get(&(s.driver.as_str(), s.pool.as_str())) == Some(&s.generation))
            .collect();
        for s in &current {
            if s.counter_sets.is_empty() {
                continue;
            }
            let pool = pools
                .entry(s.driver.clone())
                .or_default()
                .entry(s.pool.clone())
                .or_insert_with(|| Ok(BTreeMap::new()));
            if let Ok(sets) = pool {
                for (name, counters) in &s.counter_sets {
                    if sets.insert(name.clone(), counters.clone()).is_some() {
                        *pool = Err(format!("duplicate counter set name {name}"));
                        break;
                    }
                }
            }
        }
        for s in current {
            for d in &s.devices {
                for (set, counter) in d.consumes.keys() {
                    let pool = pools
                        .entry(s.driver.clone())
                        .or_default()
                        .entry(s.pool.clone())
                        .or_insert_with(|| Ok(BTreeMap::new()));
                    let Ok(sets) = pool else { break };
                    match sets.get(set) {
                        None => *pool = Err(format!("counter set {set} not found")),
                        Some(c) if !c.contains_key(counter) => {
                            *pool =
                                Err(format!("counter {counter} not found in counter set {set}"));
                        }
                        Some(_) => {}
                    }
                }
            }
            match &s.nodes {
                SliceNodes::Node(n) => by_node.entry(n.clone()).or_default().push(Arc::clone(s)),
                _ => shared.push(Arc::clone(s)),
            }
        }
        self.by_node = by_node;
        self.shared = shared;
        self.pools = pools;
    }

    /// The counter sets of a pool: `None` if it publishes none, an error if it is invalid.
    pub fn counter_sets(&self, driver: &str, pool: &str) -> Option<&Result<CounterSets, String>> {
        self.pools.get(driver)?.get(pool)
    }

    /// The names of the nodes that reach a slice of their own, when no slice is shared (by a
    /// node selector or with every node): then only these nodes reach any device.
    pub fn only_node_slices(&self) -> Option<impl Iterator<Item = &str>> {
        self.shared
            .is_empty()
            .then(|| self.by_node.keys().map(String::as_str))
    }

    /// The slices that count and that a node named `node` with `labels` reaches.
    pub fn slices_for<'a>(
        &'a self,
        node: &'a str,
        labels: &'a Labels,
    ) -> impl Iterator<Item = &'a ResourceSlice> {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .chain(
                self.shared
                    .iter()
                    .filter(move |s| s.nodes.reach(node, labels)),
            )
            .map(|s| &**s)
    }
}
