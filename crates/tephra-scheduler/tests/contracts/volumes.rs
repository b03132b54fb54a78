//! The volume contracts kube-scheduler keeps through its VolumeBinding and VolumeZone plugins:
//! a bound claim pins its pod to its volume's node, an unbound Immediate claim waits,
//! WaitForFirstConsumer claims take the volumes of the nodes their pods get (or are provisioned
//! within their class's topologies), a gang that runs out of volumes binds nothing, and a
//! ReadWriteOncePod claim serves one pod.

use super::*;
use tephra_scheduler::cache::StorageChange;
use tephra_scheduler::model::{
    AccessModes, ClaimRef, PersistentVolume, Requirement, SelectorOp, StorageClass, VolumeClaim,
};

fn storage(c: &mut Cache, change: StorageChange) {
    c.apply(Event::Storage {
        cluster: "east".into(),
        change,
    })
    .unwrap();
}

fn class(c: &mut Cache, name: &str, wffc: bool, provisioner: &str, zones: &[&str]) {
    let allowed = if zones.is_empty() {
        vec![]
    } else {
        vec![vec![(
            "topology.kubernetes.io/zone".to_string(),
            zones.iter().map(|z| z.to_string()).collect(),
        )]]
    };
    storage(
        c,
        StorageChange::ClassUpsert(StorageClass {
            name: name.into(),
            provisioner: provisioner.into(),
            wait_for_first_consumer: wffc,
            allowed_topologies: allowed,
        }),
    );
}

/// A local volume of `gi` GiB on node `node`.
fn local_pv(c: &mut Cache, name: &str, node: &str, gi: i64, claim: Option<&str>) {
    storage(
        c,
        StorageChange::VolumeUpsert(PersistentVolume {
            name: name.into(),
            labels: Default::default(),
            class: "local".into(),
            capacity: gi << 30,
            access_modes: AccessModes::RWO,
            block: false,
            node_affinity: vec![vec![Requirement {
                key: "kubernetes.io/hostname".into(),
                op: SelectorOp::In,
                values: vec![node.into()],
            }]],
            claim: claim.map(|n| ClaimRef {
                namespace: "default".into(),
                name: n.into(),
            }),
            available: claim.is_none(),
            deleting: false,
            csi: Some(("local.csi".into(), name.into())),
        }),
    );
}

fn pvc(c: &mut Cache, name: &str, class: &str, modes: AccessModes, bound_to: Option<&str>) {
    storage(
        c,
        StorageChange::ClaimUpsert(VolumeClaim {
            namespace: "default".into(),
            name: name.into(),
            class: class.into(),
            request: 1 << 30,
            access_modes: modes,
            block: false,
            volume: bound_to.map(String::from),
            bound: bound_to.is_some(),
            selected_node: None,
            selector: None,
            lost: false,
            deleting: false,
        }),
    );
}

/// One node per zone a, b, c, each labelled with its hostname.
fn fleet() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    for z in ["a", "b", "c"] {
        let host = format!("node-{z}-0");
        add_nodes(
            &mut c,
            "east",
            &format!("node-{z}"),
            1,
            CPU16,
            &[
                ("topology.kubernetes.io/zone", z),
                ("kubernetes.io/hostname", &host),
            ],
        )
        .unwrap();
    }
    c
}

fn mounting(name: &str, claims: &[&str]) -> GangJob {
    let rules = PodRules {
        claims: claims.iter().map(|c| c.to_string()).collect(),
        ..PodRules::default()
    };
    small(name, 1, rules)
}

#[test]
fn a_pod_whose_claim_is_bound_to_a_local_volume_runs_on_that_volumes_node_only() {
    let mut c = fleet();
    local_pv(&mut c, "pv-c", "node-c-0", 10, Some("data"));
    pvc(&mut c, "data", "local", AccessModes::RWO, Some("pv-c"));
    add_job(&mut c, &mounting("app", &["data"])).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1);
    assert_eq!(d.binds[0].node, "node-c-0");
    assert!(
        d.prebinds.is_empty(),
        "a bound claim needs no write: {:?}",
        d.prebinds
    );
}

#[test]
fn an_unbound_immediate_claim_makes_the_pod_wait_and_says_so() {
    let mut c = fleet();
    class(&mut c, "fast", false, "csi.example.com", &[]);
    pvc(&mut c, "data", "fast", AccessModes::RWO, None);
    add_job(&mut c, &mounting("app", &["data"])).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty());
    let ev = d.event_for("default/app").unwrap();
    assert!(
        ev.message
            .contains("pod has unbound immediate PersistentVolumeClaims"),
        "{}",
        ev.message
    );
    // A missing claim is named.
    add_job(&mut c, &mounting("lost", &["nowhere"])).unwrap();
    let ev = run(&c).event_for("default/lost").cloned().unwrap();
    assert!(
        ev.message
            .contains("persistentvolumeclaim \"nowhere\" not found"),
        "{}",
        ev.message
    );
}

#[test]
fn wait_for_first_consumer_claims_take_the_volumes_of_the_nodes_their_pods_get() {
    let mut c = fleet();
    class(&mut c, "local", true, "kubernetes.io/no-provisioner", &[]);
    local_pv(&mut c, "pv-a", "node-a-0", 10, None);
    local_pv(&mut c, "pv-b", "node-b-0", 10, None);
    pvc(&mut c, "d0", "local", AccessModes::RWO, None);
    pvc(&mut c, "d1", "local", AccessModes::RWO, None);
    let rules = |claim: &str| PodRules {
        claims: vec![claim.to_string()],
        ..PodRules::default()
    };
    let job = GangJob::new(
        "g",
        vec![
            Role::new("r0", 1, &[("cpu", "1")]).rules(rules("d0")),
            Role::new("r1", 1, &[("cpu", "1")]).rules(rules("d1")),
        ],
    );
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 2);
    let mut seen = BTreeMap::new();
    for p in &d.prebinds {
        let v = p.volumes[0].volume.clone().expect("a static volume");
        // Each claim's volume is on the node its pod was bound to.
        let b = d.binds.iter().find(|b| b.task == p.task).unwrap();
        assert_eq!(v, format!("pv-{}", &b.node[5..6]), "{p:?} {b:?}");
        seen.insert(p.volumes[0].claim.clone(), v);
    }
    assert_eq!(seen.len(), 2, "{:?}", d.prebinds);
}

#[test]
fn a_volume_being_given_to_a_claim_is_no_other_claims_until_a_watcher_shows_it_or_its_bind_fails() {
    let mut c = fleet();
    class(&mut c, "local", true, "kubernetes.io/no-provisioner", &[]);
    local_pv(&mut c, "pv-a", "node-a-0", 10, None);
    pvc(&mut c, "d0", "local", AccessModes::RWO, None);
    add_job(&mut c, &mounting("first", &["d0"]).created(1)).unwrap();
    let first = run(&c);
    assert_eq!(first.prebinds.len(), 1, "{:?}", first.binds);
    assert_eq!(first.prebinds[0].volumes[0].volume.as_deref(), Some("pv-a"));
    c.take(&first, TaskStatus::Binding).unwrap();
    // The volume comes back as it was before the claim reference was written.
    local_pv(&mut c, "pv-a", "node-a-0", 10, None);
    let claimed = |c: &Cache| c.world().storage["east"].volumes["pv-a"].claim.clone();
    assert_eq!(claimed(&c).map(|r| r.name), Some("d0".to_string()));
    // A second claim finds no volume while the first one's bind is in flight.
    pvc(&mut c, "d1", "local", AccessModes::RWO, None);
    add_job(&mut c, &mounting("second", &["d1"]).created(2)).unwrap();
    let second = run(&c);
    assert!(second.binds.is_empty(), "{:?}", second.prebinds);
    // The first bind fails: the volume is free again, and the second claim gets it.
    let pod = first.binds[0].task.clone();
    c.unassume_claims(&pod).unwrap();
    c.set_task(&pod, TaskStatus::Pending, None).unwrap();
    assert_eq!(claimed(&c), None);
    assert_eq!(c.world().storage["east"].assumed().keys().count(), 0);
    let third = run(&c);
    let given: Vec<_> = third
        .prebinds
        .iter()
        .map(|p| p.volumes[0].clone())
        .collect();
    assert_eq!(given.len(), 1, "one volume, one claim: {given:?}");
    // Once a watcher shows the volume taken, it stays taken whatever the assumption was.
    c.take(&third, TaskStatus::Binding).unwrap();
    let owner = given[0].claim.rsplit('/').next().unwrap().to_string();
    local_pv(&mut c, "pv-a", "node-a-0", 10, Some(&owner));
    assert_eq!(c.world().storage["east"].assumed().keys().count(), 0);
    assert_eq!(claimed(&c).map(|r| r.name), Some(owner));
}

#[test]
fn a_gang_that_runs_out_of_volumes_binds_nothing_and_takes_no_volume() {
    let mut c = fleet();
    class(&mut c, "local", true, "kubernetes.io/no-provisioner", &[]);
    local_pv(&mut c, "pv-a", "node-a-0", 10, None);
    local_pv(&mut c, "pv-b", "node-b-0", 10, None);
    for i in 0..3 {
        pvc(&mut c, &format!("d{i}"), "local", AccessModes::RWO, None);
    }
    let roles = (0..3)
        .map(|i| {
            Role::new(&format!("r{i}"), 1, &[("cpu", "1")]).rules(PodRules {
                claims: vec![format!("d{i}")],
                ..PodRules::default()
            })
        })
        .collect();
    add_job(&mut c, &GangJob::new("three", roles)).unwrap();
    // A single pod after it can still have a volume: the gang gave its back.
    add_job(&mut c, &mounting("one", &["d0"]).created(5)).unwrap();
    let d = run(&c);
    assert!(
        d.binds.iter().all(|b| b.job != "default/three"),
        "{:?}",
        d.binds
    );
    assert_eq!(d.binds.iter().filter(|b| b.job == "default/one").count(), 1);
}

#[test]
fn a_provisioned_claim_is_placed_within_its_classes_allowed_topologies() {
    let mut c = fleet();
    class(&mut c, "zonal", true, "csi.example.com", &["b"]);
    pvc(&mut c, "data", "zonal", AccessModes::RWO, None);
    add_job(&mut c, &mounting("app", &["data"])).unwrap();
    let d = run(&c);
    assert_eq!(d.binds[0].node, "node-b-0");
    assert_eq!(d.prebinds.len(), 1);
    assert_eq!(
        d.prebinds[0].volumes[0].volume, None,
        "provisioned, not a static volume"
    );
}

#[test]
fn a_read_write_once_pod_claim_serves_one_pod_only() {
    let mut c = fleet();
    class(&mut c, "fast", true, "csi.example.com", &[]);
    pvc(&mut c, "solo", "fast", AccessModes::RWOP, None);
    add_job(&mut c, &mounting("first", &["solo"])).unwrap();
    add_job(&mut c, &mounting("second", &["solo"]).created(5)).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1, "{:?}", d.binds);
    let ev = d.event_for("default/second").unwrap();
    assert!(ev.message.contains("ReadWriteOncePod"), "{}", ev.message);
}

#[test]
fn a_read_write_once_pod_claim_in_use_by_a_running_pod_serves_no_other() {
    let mut c = fleet();
    class(&mut c, "fast", true, "csi.example.com", &[]);
    pvc(&mut c, "solo", "fast", AccessModes::RWOP, None);
    add_job(&mut c, &mounting("first", &["solo"])).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1);
    apply_binds(&mut c, &d).unwrap();
    add_job(&mut c, &mounting("second", &["solo"]).created(5)).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
}

#[test]
fn a_nodes_csi_attach_limit_keeps_more_volumes_off_it() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "n", 1, CPU16, &[]).unwrap();
    class(&mut c, "fast", true, "csi.example.com", &[]);
    storage(
        &mut c,
        StorageChange::AttachLimits {
            node: "n-0".into(),
            limits: [("csi.example.com".to_string(), 1)].into(),
        },
    );
    pvc(&mut c, "v0", "fast", AccessModes::RWO, None);
    pvc(&mut c, "v1", "fast", AccessModes::RWO, None);
    add_job(&mut c, &mounting("p0", &["v0"])).unwrap();
    add_job(&mut c, &mounting("p1", &["v1"]).created(5)).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1, "{:?}", d.binds);
    let ev = d.event_for("default/p1").unwrap();
    assert!(
        ev.message.contains("exceed max volume count"),
        "{}",
        ev.message
    );
}
