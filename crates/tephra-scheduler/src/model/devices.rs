//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the scheduler sees it, per member
//! cluster: DeviceClasses and their selectors, ResourceSlices (a driver's pool of devices with
//! their attributes and capacity, for one node, some nodes or all), ResourceClaims (requests for
//! devices of a class, `exactly` a count or all of them, with `matchAttribute` constraints) and
//! what they were allocated. A selector is a CEL expression over a device; the core does not
//! evaluate CEL itself: whoever reads the objects compiles each expression into a
//! [`DeviceSelector`]. How devices are chosen for a claim on a node is in
//! `framework/devices.rs`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

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

/// One device of a ResourceSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Name, unique in its pool.
    pub name: String,
    /// Attributes by fully qualified name (`domain/name`; unqualified names take the driver's
    /// name as their domain).
    pub attributes: BTreeMap<String, Attribute>,
    /// Capacity by fully qualified name, as Kubernetes quantities.
    pub capacity: BTreeMap<String, String>,
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
}

impl SliceNodes {
    /// Whether a node named `name` with `labels` reaches the devices.
    pub fn reach(&self, name: &str, labels: &Labels) -> bool {
        match self {
            Self::Node(n) => n == name,
            Self::Selector(terms) => affinity_matches(terms, labels) && !terms.is_empty(),
            Self::All => true,
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
    /// Exactly this many (`ExactCount`).
    Exact(u32),
    /// Every matching device the node reaches (`All`).
    All,
}

/// One request of a claim (`spec.devices.requests[].exactly`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRequest {
    /// Name.
    pub name: String,
    /// Device class.
    pub class: String,
    /// The request's own selectors (besides the class's).
    pub selectors: Vec<Selector>,
    /// How many.
    pub mode: AllocationMode,
}

/// One allocated device.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllocatedDevice {
    /// The request it serves.
    pub request: String,
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device name.
    pub device: String,
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
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// What it was allocated, if it was.
    pub allocation: Option<ClaimAllocation>,
    /// The pods it is reserved for (`status.reservedFor`), by name.
    pub reserved_for: Vec<String>,
    /// A DRA feature it uses that tephra does not allocate (admin access, prioritized lists,
    /// capacity requests, distinct attributes), named: the pod waits with it.
    pub unsupported: Option<String>,
    /// Being deleted.
    pub deleting: bool,
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
}

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
        for s in self.slices.values() {
            if newest.get(&(s.driver.as_str(), s.pool.as_str())) != Some(&s.generation) {
                continue;
            }
            match &s.nodes {
                SliceNodes::Node(n) => by_node.entry(n.clone()).or_default().push(Arc::clone(s)),
                _ => shared.push(Arc::clone(s)),
            }
        }
        self.by_node = by_node;
        self.shared = shared;
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
