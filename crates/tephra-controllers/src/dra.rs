//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`) as the scheduler core models them,
//! for every reader (the Kubernetes runtime, the simulator): DeviceClasses, ResourceSlices and
//! ResourceClaims, with their CEL selectors compiled here ([`CelSelector`]) so that the core
//! never evaluates CEL itself, and a pod's claims resolved to ResourceClaim names.
//!
//! A selector sees `device` as Kubernetes gives it: `device.driver`, `device.attributes` and
//! `device.capacity` as maps by domain (an attribute without a domain is in the driver's), with
//! quantities and semantic versions as the Kubernetes CEL library's objects. A claim that uses a
//! feature tephra does not allocate (admin access, prioritized lists, capacity requests,
//! distinct attributes, device tolerations) is read, with the feature named in
//! [`ResourceClaim::unsupported`], so that its pods wait saying which.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::api::resource::v1 as dra;
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value};
use tephra_scheduler::model::{
    AllocatedDevice, AllocationMode, Attribute, ClaimAllocation, Device, DeviceClass,
    DeviceRequest, DeviceSelector, PodClaim, Requirement, ResourceClaim, ResourceSlice, Selector,
    SelectorOp, SliceNodes,
};

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
    for (name, q) in &d.capacity {
        let (domain, id) = qualified(name, driver);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), object(root, false, q));
    }
    let mut device: HashMap<String, Value> = HashMap::new();
    device.insert("driver".into(), Value::String(Arc::new(driver.to_string())));
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

/// Whether tephra may allocate a device of a slice: not one that draws on the slice's shared
/// counters (a partition of a partitionable device), carries a taint (tephra reads no device
/// tolerations), waits for binding conditions, or is shared between claims (consumable
/// capacity); none of these is ever allocated.
fn allocatable(d: &dra::Device) -> bool {
    let none = |v: Option<usize>| v.unwrap_or(0) == 0;
    none(d.consumes_counters.as_ref().map(Vec::len))
        && none(d.taints.as_ref().map(Vec::len))
        && none(d.binding_conditions.as_ref().map(Vec::len))
        && d.allow_multiple_allocations != Some(true)
}

/// A ResourceSlice, without the devices tephra does not allocate (see [`allocatable`]).
pub fn slice(s: &dra::ResourceSlice) -> ResourceSlice {
    let spec = &s.spec;
    let nodes = match (&spec.node_name, &spec.node_selector, spec.all_nodes) {
        (Some(n), _, _) => SliceNodes::Node(n.clone()),
        (None, Some(sel), _) => SliceNodes::Selector(terms(sel)),
        (None, None, Some(true)) => SliceNodes::All,
        // perDeviceNodeSelection (partitionable devices) is not supported: reached by no node.
        _ => SliceNodes::Selector(Vec::new()),
    };
    let devices = spec
        .devices
        .iter()
        .flatten()
        .filter(|d| allocatable(d))
        .map(|d| Device {
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
                        format!("{}/{k}", spec.driver)
                    };
                    Some((name, v))
                })
                .collect(),
            capacity: d
                .capacity
                .iter()
                .flatten()
                .map(|(k, c)| {
                    let name = if k.contains('/') {
                        k.clone()
                    } else {
                        format!("{}/{k}", spec.driver)
                    };
                    (name, c.value.0.clone())
                })
                .collect(),
        })
        .collect();
    ResourceSlice {
        name: s.metadata.name.clone().unwrap_or_default(),
        driver: spec.driver.clone(),
        pool: spec.pool.name.clone(),
        generation: spec.pool.generation,
        nodes,
        devices,
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
        if x.capacity.is_some() {
            note(format!("consumable capacity ({at}.exactly.capacity)"));
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
        });
    }
    let mut match_attributes = Vec::new();
    for (i, k) in devices
        .iter()
        .flat_map(|d| d.constraints.iter().flatten())
        .enumerate()
    {
        if k.distinct_attribute.is_some() {
            note(format!(
                "distinct attributes (spec.devices.constraints[{i}].distinctAttribute)"
            ));
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
        SliceNodes::All => None,
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
            capacity: [("gpu.example.com/memory".to_string(), memory.to_string())].into(),
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
    fn partitions_tainted_and_shared_devices_are_never_offered() {
        let s: dra::ResourceSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n0-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n0",
                "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
                "devices": [
                    {"name": "whole"},
                    {"name": "mig-1g", "consumesCounters": [{"counterSet": "gpu-0",
                        "counters": {"memory": {"value": "10Gi"}}}]},
                    {"name": "tainted", "taints": [{"key": "broken", "effect": "NoSchedule"}]},
                    {"name": "shared", "allowMultipleAllocations": true},
                    {"name": "gated", "bindingConditions": ["ready"],
                        "bindingFailureConditions": ["failed"]}
                ]}
        }))
        .unwrap();
        let names: Vec<String> = slice(&s).devices.into_iter().map(|d| d.name).collect();
        assert_eq!(names, vec!["whole".to_string()]);
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
