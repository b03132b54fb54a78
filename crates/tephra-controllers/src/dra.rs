//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`) as the scheduler core models them,
//! for every reader (the Kubernetes runtime, the simulator): DeviceClasses, ResourceSlices and
//! ResourceClaims, with their CEL selectors compiled here ([`CelSelector`]) so that the core
//! never evaluates CEL itself, and a pod's claims resolved to ResourceClaim names.
//!
//! A selector sees `device` as Kubernetes gives it: `device.driver`, `device.attributes` and
//! `device.capacity` as maps by domain (an attribute without a domain is in the driver's), with
//! quantities and semantic versions as the Kubernetes CEL library's objects, and
//! `device.allowMultipleAllocations`. A claim that uses a feature tephra does not allocate
//! (admin access, prioritized lists, device tolerations) is read, with the feature named in
//! [`ResourceClaim::unsupported`], so that its pods wait saying which.
//!
//! Partitionable devices (a pool's `sharedCounters`, a device's `consumesCounters` and
//! `perDeviceNodeSelection`) and consumable capacity (`allowMultipleAllocations`, a
//! capacity's `requestPolicy`, a request's `capacity.requests`, `distinctAttribute`) are read
//! into the model; a slice whose quantities do not parse loses the devices concerned.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value};
use tephra_scheduler::model::{
    AllocatedDevice, AllocationMode, Attribute, Capacity, CapacityPolicy, ClaimAllocation, Device,
    DeviceClass, DeviceRequest, DeviceSelector, Milli, PodClaim, Requirement, ResourceClaim,
    ResourceSlice, Selector, SelectorOp, SliceNodes, ValidAmounts,
};
use tephra_scheduler::quantity::parse_scaled_wide;

/// Why a DRA object cannot be read. Each names the object and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name}: {field}: {message}")]
pub struct DraError {
    /// `resourceclaim`, `resourceslice`, `deviceclass`.
    pub kind: &'static str,
    /// The object (`namespace/name` when namespaced).
    pub name: String,
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

thread_local! {
    /// The Kubernetes CEL functions, registered once per thread; each evaluation opens a scope.
    static ROOT: Context<'static> = {
        let mut c = Context::default();
        c.register_all();
        c
    };
    /// `quantity(x)` and `semver(x)`, compiled once per thread.
    static HELPERS: Option<(Program, Program)> =
        Program::compile("quantity(x)").ok().zip(Program::compile("semver(x)").ok());
}

/// A CEL selector over devices, compiled.
pub struct CelSelector {
    expression: String,
    program: Program,
}

impl CelSelector {
    /// Compiles `expression`, or says why it does not compile.
    pub fn compile(expression: &str) -> Result<Self, String> {
        let program = Program::compile(expression).map_err(|e| e.to_string())?;
        Ok(Self {
            expression: expression.to_string(),
            program,
        })
    }
}

/// Evaluates `quantity(arg)` (or `semver(arg)`) into the library's object.
fn object(root: &Context<'_>, semver: bool, arg: &str) -> Value {
    let mut scope = root.new_inner_scope();
    scope.add_variable_from_value("x", arg.to_string());
    let value = HELPERS.with(|h| {
        h.as_ref()
            .map(|(q, s)| if semver { s } else { q })
            .and_then(|p| p.execute(&scope).ok())
    });
    value.unwrap_or_else(|| Value::String(Arc::new(arg.to_string())))
}

/// Splits a qualified name into (domain, id): unqualified names are in the driver's domain.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// `device` as CEL sees it.
fn device_value(root: &Context<'_>, driver: &str, d: &Device) -> Value {
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, a) in &d.attributes {
        let (domain, id) = qualified(name, driver);
        let v = match a {
            Attribute::Int(i) => Value::Int(*i),
            Attribute::Bool(b) => Value::Bool(*b),
            Attribute::Str(s) => Value::String(Arc::new(s.clone())),
            Attribute::Version(s) => object(root, true, s),
        };
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), v);
    }
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, c) in &d.capacity {
        let (domain, id) = qualified(name, driver);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), object(root, false, &c.text));
    }
    let mut device: HashMap<String, Value> = HashMap::new();
    device.insert("driver".into(), Value::String(Arc::new(driver.to_string())));
    device.insert("allowMultipleAllocations".into(), Value::Bool(d.multi));
    device.insert(
        "attributes".into(),
        Value::from(
            attributes
                .into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect::<HashMap<String, Value>>(),
        ),
    );
    device.insert(
        "capacity".into(),
        Value::from(
            capacity
                .into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect::<HashMap<String, Value>>(),
        ),
    );
    Value::from(device)
}

impl DeviceSelector for CelSelector {
    fn expression(&self) -> &str {
        &self.expression
    }

    fn matches(&self, driver: &str, device: &Device) -> Result<bool, String> {
        ROOT.with(|root| {
            let mut scope = root.new_inner_scope();
            scope.add_variable_from_value("device", device_value(root, driver, device));
            match self.program.execute(&scope) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!(
                    "CEL result of type {:?} could not be converted to bool",
                    other.type_of()
                )),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

fn selectors(
    list: Option<&Vec<dra::DeviceSelector>>,
    bad: &dyn Fn(String, String) -> DraError,
    at: &str,
) -> Result<Vec<Selector>, DraError> {
    let mut out = Vec::new();
    for (i, s) in list.into_iter().flatten().enumerate() {
        let Some(cel) = &s.cel else { continue };
        let compiled = CelSelector::compile(&cel.expression).map_err(|e| {
            bad(
                format!("{at}[{i}].cel.expression"),
                format!("CEL compile error: {e}"),
            )
        })?;
        out.push(Selector(Arc::new(compiled)));
    }
    Ok(out)
}

/// Node selector terms as requirements on labels (fields are not matched: a term naming
/// `metadata.name` becomes a requirement on the hostname label).
fn terms(sel: &NodeSelector) -> Vec<Vec<Requirement>> {
    sel.node_selector_terms
        .iter()
        .map(|t| {
            let mut reqs: Vec<Requirement> = t
                .match_expressions
                .iter()
                .flatten()
                .filter_map(|e| {
                    Some(Requirement {
                        key: e.key.clone(),
                        op: SelectorOp::parse(&e.operator)?,
                        values: e.values.clone().unwrap_or_default(),
                    })
                })
                .collect();
            for f in t.match_fields.iter().flatten() {
                if f.key == "metadata.name"
                    && let Some(op) = SelectorOp::parse(&f.operator)
                {
                    reqs.push(Requirement {
                        key: "kubernetes.io/hostname".into(),
                        op,
                        values: f.values.clone().unwrap_or_default(),
                    });
                }
            }
            reqs
        })
        .collect()
}

/// A DeviceClass.
pub fn class(c: &dra::DeviceClass) -> Result<DeviceClass, DraError> {
    let name = c.metadata.name.clone().unwrap_or_default();
    let bad = |field: String, message: String| DraError {
        kind: "deviceclass",
        name: name.clone(),
        field,
        message,
    };
    Ok(DeviceClass {
        selectors: selectors(
            c.spec.as_ref().and_then(|s| s.selectors.as_ref()),
            &bad,
            "spec.selectors",
        )?,
        name: name.clone(),
    })
}

/// Whether tephra may allocate a device of a slice: not one that carries a taint (tephra reads
/// no device tolerations) or waits for binding conditions; none of these is ever allocated.
fn allocatable(d: &dra::Device) -> bool {
    let none = |v: Option<usize>| v.unwrap_or(0) == 0;
    none(d.taints.as_ref().map(Vec::len)) && none(d.binding_conditions.as_ref().map(Vec::len))
}

/// A quantity in thousandths.
fn milli(q: &Quantity) -> Option<Milli> {
    parse_scaled_wide(&q.0, 1000).ok()
}

/// Thousandths written back as a quantity (whole units where they are whole).
pub fn quantity_text(m: Milli) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

/// Which nodes reach a slice, or a device of a `perDeviceNodeSelection` slice.
fn reach(
    node_name: Option<&String>,
    selector: Option<&NodeSelector>,
    all: Option<bool>,
) -> Option<SliceNodes> {
    match (node_name, selector, all) {
        (Some(n), _, _) => Some(SliceNodes::Node(n.clone())),
        (None, Some(sel), _) => Some(SliceNodes::Selector(terms(sel))),
        (None, None, Some(true)) => Some(SliceNodes::All),
        _ => None,
    }
}

/// A capacity's request policy.
fn policy(p: &dra::CapacityRequestPolicy) -> Option<CapacityPolicy> {
    let default = match &p.default {
        Some(q) => Some(milli(q)?),
        None => None,
    };
    let valid = if let Some(r) = &p.valid_range {
        let opt = |q: &Option<Quantity>| match q {
            Some(q) => milli(q).map(Some),
            None => Some(None),
        };
        ValidAmounts::Range {
            min: milli(&r.min)?,
            max: opt(&r.max)?,
            step: opt(&r.step)?,
        }
    } else if let Some(vs) = p.valid_values.as_ref().filter(|v| !v.is_empty()) {
        let mut vals = vs.iter().map(milli).collect::<Option<Vec<_>>>()?;
        vals.sort_unstable();
        ValidAmounts::Values(vals)
    } else {
        ValidAmounts::Any
    };
    Some(CapacityPolicy { default, valid })
}

/// A device of a slice of `driver`, or `None` if one of its quantities does not parse.
fn device(d: &dra::Device, driver: &str, per_device: bool) -> Option<Device> {
    let mut capacity = BTreeMap::new();
    for (k, c) in d.capacity.iter().flatten() {
        let p = match &c.request_policy {
            Some(p) => Some(policy(p)?),
            None => None,
        };
        capacity.insert(
            k.clone(),
            Capacity {
                text: c.value.0.clone(),
                value: milli(&c.value)?,
                policy: p,
            },
        );
    }
    let mut consumes = BTreeMap::new();
    for u in d.consumes_counters.iter().flatten() {
        for (name, c) in &u.counters {
            consumes.insert((u.counter_set.clone(), name.clone()), milli(&c.value)?);
        }
    }
    Some(Device {
        name: d.name.clone(),
        attributes: d
            .attributes
            .iter()
            .flatten()
            .filter_map(|(k, a)| {
                let v = match (a.int, a.bool, &a.string, &a.version) {
                    (Some(i), ..) => Attribute::Int(i),
                    (_, Some(b), ..) => Attribute::Bool(b),
                    (_, _, Some(s), _) => Attribute::Str(s.clone()),
                    (_, _, _, Some(v)) => Attribute::Version(v.clone()),
                    _ => return None,
                };
                let name = if k.contains('/') {
                    k.clone()
                } else {
                    format!("{driver}/{k}")
                };
                Some((name, v))
            })
            .collect(),
        capacity,
        consumes,
        // A device of a per-device slice that names no node is reached by none.
        nodes: per_device.then(|| {
            reach(d.node_name.as_ref(), d.node_selector.as_ref(), d.all_nodes)
                .unwrap_or(SliceNodes::Selector(Vec::new()))
        }),
        multi: d.allow_multiple_allocations == Some(true),
    })
}

/// A ResourceSlice, without the devices tephra does not allocate (see [`allocatable`]) and
/// those whose quantities do not parse; its counter sets without the counters that do not.
pub fn slice(s: &dra::ResourceSlice) -> ResourceSlice {
    let spec = &s.spec;
    let per_device = spec.per_device_node_selection == Some(true);
    let nodes = if per_device {
        SliceNodes::PerDevice
    } else {
        // No node selection at all: reached by no node.
        reach(
            spec.node_name.as_ref(),
            spec.node_selector.as_ref(),
            spec.all_nodes,
        )
        .unwrap_or(SliceNodes::Selector(Vec::new()))
    };
    let devices = spec
        .devices
        .iter()
        .flatten()
        .filter(|d| allocatable(d))
        .filter_map(|d| device(d, &spec.driver, per_device))
        .collect();
    let counter_sets = spec
        .shared_counters
        .iter()
        .flatten()
        .map(|set| {
            let counters = set
                .counters
                .iter()
                .filter_map(|(k, c)| Some((k.clone(), milli(&c.value)?)))
                .collect();
            (set.name.clone(), counters)
        })
        .collect();
    ResourceSlice {
        name: s.metadata.name.clone().unwrap_or_default(),
        driver: spec.driver.clone(),
        pool: spec.pool.name.clone(),
        generation: spec.pool.generation,
        nodes,
        devices,
        counter_sets,
    }
}

/// A ResourceClaim.
pub fn claim(c: &dra::ResourceClaim) -> Result<ResourceClaim, DraError> {
    let namespace = c
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = c.metadata.name.clone().unwrap_or_default();
    let key = format!("{namespace}/{name}");
    let bad = |field: String, message: String| DraError {
        kind: "resourceclaim",
        name: key.clone(),
        field,
        message,
    };
    let devices = c.spec.as_ref().and_then(|s| s.devices.as_ref());
    let mut unsupported: Option<String> = None;
    let mut note = |what: String| {
        unsupported.get_or_insert(what);
    };
    let mut requests = Vec::new();
    for (i, r) in devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .enumerate()
    {
        let at = format!("spec.devices.requests[{i}]");
        let Some(x) = &r.exactly else {
            if r.first_available.is_some() {
                note(format!("prioritized lists ({at}.firstAvailable)"));
            }
            continue;
        };
        if x.admin_access == Some(true) {
            note(format!("admin access ({at}.exactly.adminAccess)"));
        }
        let mut capacity = BTreeMap::new();
        for (k, q) in x.capacity.iter().flat_map(|c| c.requests.iter().flatten()) {
            let m = milli(q).ok_or_else(|| {
                bad(
                    format!("{at}.exactly.capacity.requests[{k}]"),
                    format!("invalid quantity {:?}", q.0),
                )
            })?;
            capacity.insert(k.clone(), m);
        }
        if x.tolerations.as_ref().is_some_and(|t| !t.is_empty()) {
            note(format!("device taints ({at}.exactly.tolerations)"));
        }
        let mode = match x.allocation_mode.as_deref() {
            None | Some("ExactCount") => {
                AllocationMode::Exact(u32::try_from(x.count.unwrap_or(1)).unwrap_or(0))
            }
            Some("All") => AllocationMode::All,
            Some(other) => {
                return Err(bad(
                    format!("{at}.exactly.allocationMode"),
                    format!("unknown value {other:?} (known: ExactCount, All)"),
                ));
            }
        };
        requests.push(DeviceRequest {
            name: r.name.clone(),
            class: x.device_class_name.clone(),
            selectors: selectors(
                x.selectors.as_ref(),
                &bad,
                &format!("{at}.exactly.selectors"),
            )?,
            mode,
            capacity,
        });
    }
    let mut match_attributes = Vec::new();
    let mut distinct_attributes = Vec::new();
    for k in devices.iter().flat_map(|d| d.constraints.iter().flatten()) {
        if let Some(a) = &k.distinct_attribute {
            distinct_attributes.push((k.requests.clone().unwrap_or_default(), a.clone()));
        }
        if let Some(a) = &k.match_attribute {
            match_attributes.push((k.requests.clone().unwrap_or_default(), a.clone()));
        }
    }
    let status = c.status.as_ref();
    let allocation = status.and_then(|s| s.allocation.as_ref()).map(|a| {
        let devices = a
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| AllocatedDevice {
                request: r.request.clone(),
                driver: r.driver.clone(),
                pool: r.pool.clone(),
                device: r.device.clone(),
                share: r.share_id.clone(),
                consumed: r
                    .consumed_capacity
                    .iter()
                    .flatten()
                    .filter_map(|(k, q)| Some((k.clone(), milli(q)?)))
                    .collect(),
            })
            .collect();
        let nodes = match &a.node_selector {
            None => SliceNodes::All,
            Some(sel) => {
                node_of(sel).map_or_else(|| SliceNodes::Selector(terms(sel)), SliceNodes::Node)
            }
        };
        ClaimAllocation { devices, nodes }
    });
    Ok(ResourceClaim {
        namespace,
        name,
        requests,
        match_attributes,
        distinct_attributes,
        allocation,
        reserved_for: status
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .filter(|r| r.resource == "pods")
            .map(|r| r.name.clone())
            .collect(),
        unsupported,
        deleting: c.metadata.deletion_timestamp.is_some(),
        resource_version: c.metadata.resource_version.clone().unwrap_or_default(),
    })
}

/// The node an allocation's node selector names, when it is one node by name (what the
/// allocator writes for devices of a node's slice).
fn node_of(sel: &NodeSelector) -> Option<String> {
    let [t] = sel.node_selector_terms.as_slice() else {
        return None;
    };
    let [f] = t.match_fields.as_deref()? else {
        return None;
    };
    let values = f.values.as_deref()?;
    (f.key == "metadata.name" && f.operator == "In" && values.len() == 1).then(|| values[0].clone())
}

/// The node selector an allocation is written with: a node by name, nodes by labels, or none.
pub fn node_selector(nodes: &SliceNodes) -> Option<serde_json::Value> {
    match nodes {
        // An allocation's reach is its devices' own, never "per device".
        SliceNodes::All | SliceNodes::PerDevice => None,
        SliceNodes::Node(n) => Some(serde_json::json!({"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}]})),
        SliceNodes::Selector(terms) => Some(
            serde_json::json!({"nodeSelectorTerms": terms.iter().map(|t| {
            serde_json::json!({"matchExpressions": t.iter().map(|r| serde_json::json!({
                "key": r.key, "operator": r.op.as_str(), "values": r.values})).collect::<Vec<_>>()})
        }).collect::<Vec<_>>()}),
        ),
    }
}

/// A pod's claims (`spec.resourceClaims`), each resolved to its ResourceClaim: the one it names,
/// or the one generated from its template, as `status.resourceClaimStatuses` records it.
pub fn pod_claims(pod: &Pod) -> Vec<PodClaim> {
    let statuses: BTreeMap<&str, Option<&String>> = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (s.name.as_str(), s.resource_claim_name.as_ref()))
        .collect();
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| PodClaim {
            name: c.name.clone(),
            claim: c
                .resource_claim_name
                .clone()
                .or_else(|| statuses.get(c.name.as_str()).copied().flatten().cloned()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(model: &str, memory: &str, driver_version: &str) -> Device {
        Device {
            name: "gpu-0".into(),
            attributes: [
                (
                    "gpu.example.com/model".to_string(),
                    Attribute::Str(model.into()),
                ),
                (
                    "gpu.example.com/driverVersion".to_string(),
                    Attribute::Version(driver_version.into()),
                ),
                ("gpu.example.com/index".to_string(), Attribute::Int(0)),
            ]
            .into(),
            capacity: [(
                "gpu.example.com/memory".to_string(),
                Capacity {
                    text: memory.to_string(),
                    value: parse_scaled_wide(memory, 1000).unwrap(),
                    policy: None,
                },
            )]
            .into(),
            ..Default::default()
        }
    }

    #[test]
    fn selectors_see_the_device_as_kubernetes_gives_it() {
        let d = gpu("h100", "80Gi", "550.54.15");
        let yes = |e: &str| {
            CelSelector::compile(e)
                .unwrap()
                .matches("gpu.example.com", &d)
        };
        assert_eq!(yes("device.driver == 'gpu.example.com'"), Ok(true));
        assert_eq!(
            yes("device.attributes['gpu.example.com'].model == 'h100'"),
            Ok(true)
        );
        assert_eq!(
            yes("device.attributes['gpu.example.com'].index == 0"),
            Ok(true)
        );
        assert_eq!(
            yes("device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) > 0"),
            Ok(true)
        );
        assert_eq!(
            yes(
                "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('535.0.0'))"
            ),
            Ok(true)
        );
        assert_eq!(
            yes("device.attributes['gpu.example.com'].model == 'a100'"),
            Ok(false)
        );
        assert!(yes("device.attributes['gpu.example.com'].nope == 1").is_err());
        assert!(yes("'not a bool'").is_err());
        assert!(CelSelector::compile("device.driver ==").is_err());
    }

    #[test]
    fn a_claim_using_admin_access_is_read_with_the_feature_named() {
        let c: dra::ResourceClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "adminAccess": true}}]}}
        }))
        .unwrap();
        let m = claim(&c).unwrap();
        assert!(m.unsupported.unwrap().contains("adminAccess"));
        assert_eq!(m.requests[0].mode, AllocationMode::Exact(1));
    }

    #[test]
    fn tainted_and_gated_devices_are_never_offered_partitions_and_shares_are_read() {
        let s: dra::ResourceSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n0-gpu"},
            "spec": {"driver": "gpu.example.com", "perDeviceNodeSelection": true,
                "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 2},
                "devices": [
                    {"name": "whole", "nodeName": "n0"},
                    {"name": "mig-1g", "allNodes": true, "consumesCounters": [{"counterSet": "gpu-0",
                        "counters": {"memory": {"value": "10Gi"}}}]},
                    {"name": "tainted", "nodeName": "n0",
                        "taints": [{"key": "broken", "effect": "NoSchedule"}]},
                    {"name": "shared", "nodeName": "n0", "allowMultipleAllocations": true,
                        "capacity": {"bandwidth": {"value": "10G", "requestPolicy": {
                            "default": "1G", "validRange": {"min": "1G", "step": "500M"}}}}},
                    {"name": "gated", "nodeName": "n0", "bindingConditions": ["ready"],
                        "bindingFailureConditions": ["failed"]},
                    {"name": "bad", "nodeName": "n0", "capacity": {"x": {"value": "a lot"}},
                        "consumesCounters": [{"counterSet": "gpu-0",
                            "counters": {"memory": {"value": "10Gi"}}}]}
                ]}
        }))
        .unwrap();
        let m = slice(&s);
        assert_eq!(m.nodes, SliceNodes::PerDevice);
        let names: Vec<&str> = m.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["whole", "mig-1g", "shared"]);
        assert_eq!(m.devices[0].nodes, Some(SliceNodes::Node("n0".into())));
        assert_eq!(m.devices[1].nodes, Some(SliceNodes::All));
        assert_eq!(
            m.devices[1].consumes,
            [(
                ("gpu-0".to_string(), "memory".to_string()),
                (10_i128 << 30) * 1000
            )]
            .into()
        );
        let shared = &m.devices[2];
        assert!(shared.multi);
        let bw = &shared.capacity["bandwidth"];
        assert_eq!(bw.value, 10_000_000_000_000);
        let p = bw.policy.as_ref().unwrap();
        assert_eq!(p.default, Some(1_000_000_000_000));
        assert_eq!(
            p.valid,
            ValidAmounts::Range {
                min: 1_000_000_000_000,
                max: None,
                step: Some(500_000_000_000)
            }
        );
        let counters: dra::ResourceSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n0-counters"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n0",
                "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 2},
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]}
        }))
        .unwrap();
        assert_eq!(
            slice(&counters).counter_sets,
            [(
                "gpu-0".to_string(),
                [("memory".to_string(), (80_i128 << 30) * 1000)].into()
            )]
            .into()
        );
    }

    #[test]
    fn a_claim_asking_capacity_and_distinct_devices_is_read_and_its_shares_too() {
        let c: dra::ResourceClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {
                "requests": [{"name": "nic", "exactly": {"deviceClassName": "nic",
                    "capacity": {"requests": {"bandwidth": "1500M"}}}}],
                "constraints": [{"requests": ["nic"], "distinctAttribute": "nic.example.com/port"}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "nic",
                "driver": "nic.example.com", "pool": "n0", "device": "eth0",
                "shareID": "aaaaaaaa-aaaa-5aaa-aaaa-aaaaaaaaaaaa",
                "consumedCapacity": {"bandwidth": "2G"}}]}}}
        }))
        .unwrap();
        let m = claim(&c).unwrap();
        assert_eq!(m.unsupported, None);
        assert_eq!(
            m.requests[0].capacity,
            [("bandwidth".to_string(), 1_500_000_000_000)].into()
        );
        assert_eq!(
            m.distinct_attributes,
            vec![(vec!["nic".to_string()], "nic.example.com/port".to_string())]
        );
        let d = &m.allocation.unwrap().devices[0];
        assert_eq!(
            d.share.as_deref(),
            Some("aaaaaaaa-aaaa-5aaa-aaaa-aaaaaaaaaaaa")
        );
        assert_eq!(
            d.consumed,
            [("bandwidth".to_string(), 2_000_000_000_000)].into()
        );
        let bad: dra::ResourceClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic",
                    "capacity": {"requests": {"bandwidth": "lots"}}}}]}}
        }))
        .unwrap();
        assert_eq!(
            claim(&bad).unwrap_err().field,
            "spec.devices.requests[0].exactly.capacity.requests[bandwidth]"
        );
        assert_eq!(quantity_text(2_000_000_000_000), "2000000000");
        assert_eq!(quantity_text(1500), "1500m");
    }

    #[test]
    fn a_selector_that_does_not_compile_names_its_field() {
        let c: dra::ResourceClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "selectors": [{"cel": {"expression": "device.("}}]}}]}}
        }))
        .unwrap();
        let e = claim(&c).unwrap_err();
        assert_eq!(
            e.field,
            "spec.devices.requests[0].exactly.selectors[0].cel.expression"
        );
    }
}
