//! The DRA contracts kube-scheduler keeps through its DynamicResources plugin: a pod that claims
//! devices lands where they are and carries its allocations, a held device makes its claim wait,
//! an allocated claim pins its pod to the devices' node, All mode and CEL selectors, and a
//! feature tephra does not allocate is named.

use super::*;
use tephra_scheduler::cache::DraChange;
use tephra_scheduler::model::{
    AllocatedDevice, AllocationMode, Attribute, ClaimAllocation, Device, DeviceClass,
    DeviceRequest, DeviceSelector, PodClaim, ResourceClaim, ResourceSlice, Selector, SliceNodes,
};

/// `device.attributes[<attr>] == <value>`, standing in for a compiled CEL selector.
struct AttrIs(String, String, Attribute);

impl DeviceSelector for AttrIs {
    fn expression(&self) -> &str {
        &self.0
    }
    fn matches(&self, _driver: &str, device: &Device) -> Result<bool, String> {
        Ok(device.attributes.get(&self.1) == Some(&self.2))
    }
}

pub(crate) fn attr_is(attr: &str, value: &str) -> Selector {
    Selector(Arc::new(AttrIs(
        format!("device.attributes[{attr}] == {value}"),
        attr.into(),
        Attribute::Str(value.into()),
    )))
}

pub(crate) fn dra(c: &mut Cache, change: DraChange) {
    c.apply(Event::Dra {
        cluster: "east".into(),
        change,
    })
    .unwrap();
}

/// Node `node-<i>` of `zoned(["a"], n)` publishes `gpus` devices of `model`.
fn slice(c: &mut Cache, node: &str, models: &[&str]) {
    let devices = models
        .iter()
        .enumerate()
        .map(|(i, m)| Device {
            name: format!("gpu-{i}"),
            attributes: [(
                "gpu.example.com/model".to_string(),
                Attribute::Str(m.to_string()),
            )]
            .into(),
            capacity: Default::default(),
            ..Default::default()
        })
        .collect();
    dra(
        c,
        DraChange::SliceUpsert(ResourceSlice {
            name: format!("{node}-gpu"),
            driver: "gpu.example.com".into(),
            pool: node.into(),
            generation: 1,
            nodes: SliceNodes::Node(node.into()),
            devices,
            counter_sets: Default::default(),
        }),
    );
}

pub(crate) fn gpu_class(c: &mut Cache) {
    dra(
        c,
        DraChange::ClassUpsert(DeviceClass {
            name: "gpu".into(),
            selectors: vec![],
        }),
    );
}

fn claim(c: &mut Cache, name: &str, mode: AllocationMode, selectors: Vec<Selector>) {
    claim_allocated(c, name, mode, selectors, None);
}

/// [`claim`], allocated as `allocation` says.
fn claim_allocated(
    c: &mut Cache,
    name: &str,
    mode: AllocationMode,
    selectors: Vec<Selector>,
    allocation: Option<ClaimAllocation>,
) {
    dra(
        c,
        DraChange::ClaimUpsert(ResourceClaim {
            namespace: "default".into(),
            name: name.into(),
            requests: vec![DeviceRequest {
                name: "gpu".into(),
                class: "gpu".into(),
                selectors,
                mode,
                capacity: Default::default(),
            }],
            match_attributes: vec![],
            distinct_attributes: vec![],
            allocation,
            reserved_for: vec![],
            unsupported: None,
            deleting: false,
            resource_version: String::new(),
        }),
    );
}

pub(crate) fn using(name: &str, claims: &[&str]) -> GangJob {
    let rules = PodRules {
        device_claims: claims
            .iter()
            .map(|c| PodClaim {
                name: "gpu".into(),
                claim: Some(c.to_string()),
            })
            .collect(),
        ..PodRules::default()
    };
    small(name, 1, rules)
}

pub(crate) fn fleet() -> Cache {
    let mut c = zoned(&["a"], 3);
    gpu_class(&mut c);
    c
}

#[test]
fn a_gang_whose_pods_each_take_one_device_lands_where_devices_are_and_carries_its_allocations() {
    let mut c = fleet();
    slice(&mut c, "node-a-0", &["h100"]);
    slice(&mut c, "node-a-2", &["h100"]);
    claim(&mut c, "c0", AllocationMode::Exact(1), vec![]);
    claim(&mut c, "c1", AllocationMode::Exact(1), vec![]);
    let job = GangJob::new(
        "g",
        vec![
            Role::new("r0", 1, &[("cpu", "1")]).rules(PodRules {
                device_claims: vec![PodClaim {
                    name: "gpu".into(),
                    claim: Some("c0".into()),
                }],
                ..PodRules::default()
            }),
            Role::new("r1", 1, &[("cpu", "1")]).rules(PodRules {
                device_claims: vec![PodClaim {
                    name: "gpu".into(),
                    claim: Some("c1".into()),
                }],
                ..PodRules::default()
            }),
        ],
    );
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    let nodes: std::collections::BTreeSet<_> = d.binds.iter().map(|b| b.node.clone()).collect();
    assert_eq!(
        nodes,
        ["node-a-0".to_string(), "node-a-2".to_string()].into()
    );
    assert_eq!(d.prebinds.len(), 2);
    for p in &d.prebinds {
        let a = p.devices[0]
            .allocation
            .as_ref()
            .expect("allocated this session");
        assert_eq!(a.nodes, SliceNodes::Node(p.node.clone()));
        assert_eq!(a.devices[0].pool, p.node, "the device of its own node");
    }
}

/// A claim allocated a GPU of `node`, at version 7, reserved for `reserved_for`.
fn allocated_on(name: &str, node: &str, reserved_for: &[&str]) -> ResourceClaim {
    ResourceClaim {
        namespace: "default".into(),
        name: name.into(),
        requests: vec![DeviceRequest {
            name: "gpu".into(),
            class: "gpu".into(),
            selectors: vec![],
            mode: AllocationMode::Exact(1),
            capacity: Default::default(),
        }],
        allocation: Some(ClaimAllocation {
            devices: vec![AllocatedDevice {
                request: "gpu".into(),
                driver: "gpu.example.com".into(),
                pool: node.into(),
                device: "gpu-0".into(),
                ..Default::default()
            }],
            nodes: SliceNodes::Node(node.into()),
        }),
        reserved_for: reserved_for.iter().map(|p| p.to_string()).collect(),
        resource_version: "7".into(),
        ..Default::default()
    }
}

#[test]
fn a_claim_whose_devices_are_all_held_waits_and_one_no_node_has_is_never_admitted() {
    let mut c = fleet();
    slice(&mut c, "node-a-0", &["h100"]);
    // The only device is held by an allocated claim.
    dra(
        &mut c,
        DraChange::ClaimUpsert(allocated_on("held", "node-a-0", &["other"])),
    );
    claim(&mut c, "wants", AllocationMode::Exact(1), vec![]);
    claim(
        &mut c,
        "a100",
        AllocationMode::Exact(1),
        vec![attr_is("gpu.example.com/model", "a100")],
    );
    add_job(&mut c, &using("waits", &["wants"])).unwrap();
    add_job(&mut c, &using("never", &["a100"]).created(5)).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    let waits = d.event_for("default/waits").unwrap();
    assert_eq!(waits.reason, "NotEnoughResources");
    assert!(
        waits.message.contains("cannot allocate all claims"),
        "{}",
        waits.message
    );
    let never = d.event_for("default/never").unwrap();
    assert_eq!(never.reason, "NotInqueueable", "{}", never.message);
    assert!(!d.park.jobs.contains(&"default/waits".to_string()));
}

#[test]
fn an_allocated_claim_pins_its_pod_to_the_node_its_devices_are_on() {
    let mut c = fleet();
    slice(&mut c, "node-a-1", &["h100"]);
    dra(
        &mut c,
        DraChange::ClaimUpsert(allocated_on("mine", "node-a-1", &[])),
    );
    add_job(&mut c, &using("app", &["mine"])).unwrap();
    let d = run(&c);
    assert_eq!(d.binds[0].node, "node-a-1");
    // Allocated before: only its reservation is written.
    assert_eq!(d.prebinds[0].devices[0].allocation, None);
}

#[test]
fn a_claim_allocated_where_its_pod_cannot_go_is_deallocated_unless_another_pod_holds_it() {
    let mut c = fleet();
    slice(&mut c, "node-a-1", &["h100"]);
    // Allocated on a node that is gone, reserved for nobody (or for the pod alone): it keeps
    // the pod off every node, and is deallocated, at the version the session saw.
    dra(
        &mut c,
        DraChange::ClaimUpsert(allocated_on("stranded", "gone", &[])),
    );
    dra(
        &mut c,
        DraChange::ClaimUpsert(allocated_on("mine", "gone", &["own-w-0"])),
    );
    // Reserved for another pod: that pod may use it, it stays.
    dra(
        &mut c,
        DraChange::ClaimUpsert(allocated_on("theirs", "gone", &["other-w-0"])),
    );
    add_job(&mut c, &using("app", &["stranded"])).unwrap();
    add_job(&mut c, &using("own", &["mine"])).unwrap();
    add_job(&mut c, &using("waits", &["theirs"])).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    let mut freed: Vec<_> = d
        .deallocations
        .iter()
        .map(|x| (x.task.as_str(), x.claim.as_str(), x.cluster.as_str()))
        .collect();
    freed.sort();
    assert_eq!(
        freed,
        vec![
            ("default/app-w-0", "default/stranded", "east"),
            ("default/own-w-0", "default/mine", "east"),
        ]
    );
    assert!(d.deallocations.iter().all(|x| x.resource_version == "7"));
    let app = d.event_for("default/app").unwrap();
    assert!(
        app.message
            .contains("ResourceClaim default/stranded allocated where the pod cannot go"),
        "{}",
        app.message
    );
    let waits = d.event_for("default/waits").unwrap();
    assert!(!waits.message.contains("deallocated"), "{}", waits.message);
    // Once deallocated, the claim is allocated again where the pod can go.
    let mut free = allocated_on("stranded", "gone", &[]);
    free.allocation = None;
    dra(&mut c, DraChange::ClaimUpsert(free));
    let d = run(&c);
    let bind = d.binds.iter().find(|b| b.job == "default/app").unwrap();
    assert_eq!(bind.node, "node-a-1");
    assert!(
        d.deallocations
            .iter()
            .all(|x| x.claim != "default/stranded")
    );
}

#[test]
fn all_mode_takes_every_matching_device_of_the_node_and_selectors_filter_them() {
    let mut c = fleet();
    slice(&mut c, "node-a-0", &["h100", "h100", "a100"]);
    claim(
        &mut c,
        "all-h100",
        AllocationMode::All,
        vec![attr_is("gpu.example.com/model", "h100")],
    );
    add_job(&mut c, &using("app", &["all-h100"])).unwrap();
    let d = run(&c);
    let a = d.prebinds[0].devices[0].allocation.clone().unwrap();
    let names: Vec<_> = a.devices.iter().map(|d| d.device.as_str()).collect();
    assert_eq!(names, vec!["gpu-0", "gpu-1"]);
}

#[test]
fn a_claim_using_a_feature_tephra_does_not_allocate_waits_naming_it() {
    let mut c = fleet();
    slice(&mut c, "node-a-0", &["h100"]);
    dra(
        &mut c,
        DraChange::ClaimUpsert(ResourceClaim {
            namespace: "default".into(),
            name: "admin".into(),
            requests: vec![],
            match_attributes: vec![],
            distinct_attributes: vec![],
            allocation: None,
            reserved_for: vec![],
            unsupported: Some("adminAccess (requests[0])".into()),
            deleting: false,
            resource_version: String::new(),
        }),
    );
    add_job(&mut c, &using("app", &["admin"])).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty());
    let ev = d.event_for("default/app").unwrap();
    assert!(ev.message.contains("adminAccess"), "{}", ev.message);
}

#[test]
fn devices_every_node_reaches_serve_pods_on_nodes_without_a_slice_of_their_own() {
    let mut c = fleet();
    slice(&mut c, "node-a-0", &["h100"]);
    // Network-attached devices, reachable from every node.
    let devices = (0..3)
        .map(|i| Device {
            name: format!("nic-{i}"),
            attributes: [(
                "gpu.example.com/model".to_string(),
                Attribute::Str("net".into()),
            )]
            .into(),
            capacity: Default::default(),
            ..Default::default()
        })
        .collect();
    dra(
        &mut c,
        DraChange::SliceUpsert(ResourceSlice {
            name: "fabric".into(),
            driver: "gpu.example.com".into(),
            pool: "fabric".into(),
            generation: 1,
            nodes: SliceNodes::All,
            devices,
            counter_sets: Default::default(),
        }),
    );
    let net = || vec![attr_is("gpu.example.com/model", "net")];
    for i in 0..3 {
        claim(&mut c, &format!("n{i}"), AllocationMode::Exact(1), net());
        // Each pod takes a whole node's CPU, so the three need three nodes.
        let rules = PodRules {
            device_claims: vec![PodClaim {
                name: "gpu".into(),
                claim: Some(format!("n{i}")),
            }],
            ..PodRules::default()
        };
        let job = GangJob::new(
            &format!("p{i}"),
            vec![Role::new("r", 1, &[("cpu", "12")]).rules(rules)],
        );
        add_job(&mut c, &job).unwrap();
    }
    let d = run(&c);
    let nodes: std::collections::BTreeSet<_> = d.binds.iter().map(|b| b.node.clone()).collect();
    assert_eq!(nodes.len(), 3, "{:?}", d.binds);
    for p in &d.prebinds {
        let a = p.devices[0].allocation.as_ref().expect("allocated");
        assert_eq!(a.nodes, SliceNodes::All);
        assert_eq!(a.devices[0].pool, "fabric");
    }
}

#[test]
fn a_template_claim_not_created_yet_makes_the_pod_wait() {
    let mut c = fleet();
    slice(&mut c, "node-a-0", &["h100"]);
    let rules = PodRules {
        device_claims: vec![PodClaim {
            name: "gpu".into(),
            claim: None,
        }],
        ..PodRules::default()
    };
    add_job(&mut c, &small("app", 1, rules)).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty());
    let ev = d.event_for("default/app").unwrap();
    assert!(
        ev.message.contains("ResourceClaim not created yet"),
        "{}",
        ev.message
    );
}

#[test]
fn pods_that_share_one_claim_land_with_its_device_and_the_gang_allocates_it_once() {
    let mut c = fleet();
    slice(&mut c, "node-a-1", &["h100"]);
    claim(&mut c, "shared", AllocationMode::Exact(1), vec![]);
    // Three pods of one gang name the same claim: one device, allocated once, all on its node.
    add_job(
        &mut c,
        &small("g", 3, using("x", &["shared"]).roles[0].rules.clone()),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 3, "{:?}", d.groups);
    assert!(
        d.binds.iter().all(|b| b.node == "node-a-1"),
        "{:?}",
        d.binds
    );
    let allocations: Vec<_> = d
        .prebinds
        .iter()
        .flat_map(|p| &p.devices)
        .filter(|b| b.claim == "default/shared")
        .collect();
    assert_eq!(allocations.len(), 3, "each pod reserves the claim");
    assert_eq!(
        allocations
            .iter()
            .filter(|b| b.allocation.is_some())
            .count(),
        1,
        "allocated once for the gang"
    );
    // Once allocated, a pod of another job that names it follows it to the same node.
    let allocation = allocations
        .iter()
        .find_map(|b| b.allocation.clone())
        .unwrap();
    claim_allocated(
        &mut c,
        "shared",
        AllocationMode::Exact(1),
        vec![],
        Some(allocation),
    );
    let mut c2 = c;
    add_job(&mut c2, &using("other", &["shared"]).created(1)).unwrap();
    let d = run(&c2);
    let other: Vec<_> = d
        .binds
        .iter()
        .filter(|b| b.job == "default/other")
        .collect();
    assert_eq!(other.len(), 1, "{:?}", d.groups);
    assert_eq!(other[0].node, "node-a-1");
}
