//! DRA devices shared as Kubernetes 1.36+ shares them, as kube-scheduler's allocator decides:
//! partitions of one device exclude each other through the counters their pool publishes
//! (`sharedCounters` / `consumesCounters`), a device allowing several allocations is shared
//! until its capacity is spent (each share rounded by the capacity's `requestPolicy`, named
//! by a `shareID`, recording its `consumedCapacity`), `distinctAttribute` keeps a claim's
//! devices apart, and a per-device node selection keeps each device to its nodes. A property
//! runs random pools and claims over several sessions and holds every allocation to the
//! counters and capacities.

use std::collections::{BTreeMap, BTreeSet};

use super::devices::{attr_is, dra, fleet, gpu_class, using};
use super::*;
use proptest::prelude::*;
use tephra_scheduler::cache::DraChange;
use tephra_scheduler::model::{
    AllocatedDevice, AllocationMode, Attribute, Capacity, CapacityPolicy, ClaimAllocation, Device,
    DeviceRequest, Milli, ResourceClaim, ResourceSlice, Selector, SliceNodes, ValidAmounts,
};

const GI: Milli = (1 << 30) * 1000;
const G: Milli = 1_000_000_000 * 1000;
const GPU: &str = "gpu.example.com";
const NIC: &str = "nic.example.com";

/// Node `node`'s GPU cut as MIG-like partitions drawing on one counter set of `total` memory:
/// `(name, profile, memory)` each.
fn partitioned(c: &mut Cache, node: &str, total: Milli, parts: &[(&str, &str, Milli)]) {
    dra(
        c,
        DraChange::SliceUpsert(ResourceSlice {
            name: format!("{node}-counters"),
            driver: GPU.into(),
            pool: node.into(),
            generation: 1,
            nodes: SliceNodes::Node(node.into()),
            devices: vec![],
            counter_sets: [("gpu-0".to_string(), [("memory".to_string(), total)].into())].into(),
        }),
    );
    let devices = parts
        .iter()
        .map(|(name, profile, memory)| Device {
            name: name.to_string(),
            attributes: [(
                format!("{GPU}/profile"),
                Attribute::Str(profile.to_string()),
            )]
            .into(),
            consumes: [(("gpu-0".to_string(), "memory".to_string()), *memory)].into(),
            ..Default::default()
        })
        .collect();
    dra(
        c,
        DraChange::SliceUpsert(ResourceSlice {
            name: format!("{node}-gpu"),
            driver: GPU.into(),
            pool: node.into(),
            generation: 1,
            nodes: SliceNodes::Node(node.into()),
            devices,
            counter_sets: Default::default(),
        }),
    );
}

/// `whole` (80Gi), `half-0`, `half-1` (40Gi), `quarter-0..3` (20Gi) of one 80Gi GPU.
fn a100(c: &mut Cache, node: &str) {
    partitioned(
        c,
        node,
        80 * GI,
        &[
            ("whole", "whole", 80 * GI),
            ("half-0", "half", 40 * GI),
            ("half-1", "half", 40 * GI),
            ("quarter-0", "quarter", 20 * GI),
            ("quarter-1", "quarter", 20 * GI),
            ("quarter-2", "quarter", 20 * GI),
            ("quarter-3", "quarter", 20 * GI),
        ],
    );
}

/// NICs of `node` that allow several allocations, each with `bandwidth` to share (a policy of
/// at least 1G in steps of 1G, 1G by default) and a `port` attribute.
fn nics(c: &mut Cache, node: &str, ports: &[(&str, Milli)]) {
    let policy = CapacityPolicy {
        default: Some(G),
        valid: ValidAmounts::Range {
            min: G,
            max: None,
            step: Some(G),
        },
    };
    let devices = ports
        .iter()
        .enumerate()
        .map(|(i, (port, bandwidth))| Device {
            name: format!("eth{i}"),
            attributes: [(format!("{NIC}/port"), Attribute::Str(port.to_string()))].into(),
            capacity: [(
                "bandwidth".to_string(),
                Capacity {
                    text: bandwidth.to_string(),
                    value: *bandwidth,
                    policy: Some(policy.clone()),
                },
            )]
            .into(),
            multi: true,
            ..Default::default()
        })
        .collect();
    dra(
        c,
        DraChange::SliceUpsert(ResourceSlice {
            name: format!("{node}-nics"),
            driver: NIC.into(),
            pool: format!("{node}-nics"),
            generation: 1,
            nodes: SliceNodes::Node(node.into()),
            devices,
            counter_sets: Default::default(),
        }),
    );
}

fn request(name: &str, selectors: Vec<Selector>, bandwidth: Option<Milli>) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        class: "gpu".into(),
        selectors,
        mode: AllocationMode::Exact(1),
        capacity: bandwidth
            .map(|b| [("bandwidth".to_string(), b)].into())
            .unwrap_or_default(),
    }
}

fn claim_of(c: &mut Cache, name: &str, requests: Vec<DeviceRequest>) {
    dra(
        c,
        DraChange::ClaimUpsert(ResourceClaim {
            namespace: "default".into(),
            name: name.into(),
            requests,
            ..Default::default()
        }),
    );
}

fn profile(p: &str) -> Vec<Selector> {
    vec![attr_is(&format!("{GPU}/profile"), p)]
}

fn nic() -> Vec<Selector> {
    vec![Selector(Arc::new(DriverIs(NIC)))]
}

struct DriverIs(&'static str);

impl tephra_scheduler::model::DeviceSelector for DriverIs {
    fn expression(&self) -> &str {
        self.0
    }
    fn matches(&self, driver: &str, _device: &Device) -> Result<bool, String> {
        Ok(driver == self.0)
    }
}

/// Each claim the session allocated, by claim name.
fn allocated(d: &Decisions) -> BTreeMap<String, ClaimAllocation> {
    d.prebinds
        .iter()
        .flat_map(|p| &p.devices)
        .filter_map(|b| Some((b.claim.clone(), b.allocation.clone()?)))
        .collect()
}

#[test]
fn partitions_of_one_gpu_exclude_each_other_through_its_counters() {
    let mut c = fleet();
    a100(&mut c, "node-a-0");
    // A quarter is held already: 60Gi of the 80Gi left.
    dra(
        &mut c,
        DraChange::ClaimUpsert(ResourceClaim {
            namespace: "default".into(),
            name: "held".into(),
            allocation: Some(ClaimAllocation {
                devices: vec![AllocatedDevice {
                    request: "gpu".into(),
                    driver: GPU.into(),
                    pool: "node-a-0".into(),
                    device: "quarter-0".into(),
                    ..Default::default()
                }],
                nodes: SliceNodes::Node("node-a-0".into()),
            }),
            reserved_for: vec!["other".into()],
            ..Default::default()
        }),
    );
    claim_of(
        &mut c,
        "whole",
        vec![request("gpu", profile("whole"), None)],
    );
    claim_of(&mut c, "h0", vec![request("gpu", profile("half"), None)]);
    claim_of(&mut c, "h1", vec![request("gpu", profile("half"), None)]);
    claim_of(&mut c, "q", vec![request("gpu", profile("quarter"), None)]);
    add_job(&mut c, &using("whole", &["whole"]).created(1)).unwrap();
    add_job(&mut c, &using("h0", &["h0"]).created(2)).unwrap();
    add_job(&mut c, &using("h1", &["h1"]).created(3)).unwrap();
    add_job(&mut c, &using("q", &["q"]).created(4)).unwrap();
    let d = run(&c);
    let got = allocated(&d);
    // The whole GPU overlaps the held quarter; one half fits beside it, the second does not
    // (20 + 40 + 40 > 80), and a quarter fits beside the half (20 + 40 + 20 = 80).
    let names: BTreeSet<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(names, ["default/h0", "default/q"].into(), "{:?}", d.binds);
    assert_eq!(got["default/h0"].devices[0].device, "half-0");
    assert_eq!(got["default/q"].devices[0].device, "quarter-1");
    assert!(got.values().all(|a| a.devices[0].share.is_none()));
    let whole = d.event_for("default/whole").unwrap();
    assert!(
        whole.message.contains("cannot allocate all claims"),
        "{}",
        whole.message
    );
}

#[test]
fn an_allocation_being_written_holds_its_devices_until_a_watcher_shows_it_or_its_bind_fails() {
    let mut c = fleet();
    a100(&mut c, "node-a-0");
    nics(&mut c, "node-a-0", &[("p0", 10 * G)]);
    for (i, name) in ["h0", "h1", "n0", "n1", "n2"].iter().enumerate() {
        let req = if name.starts_with('h') {
            request("gpu", profile("half"), None)
        } else {
            request("nic", nic(), Some(2 * G + G / 2))
        };
        claim_of(&mut c, name, vec![req]);
        add_job(&mut c, &using(name, &[name]).created(i as i64)).unwrap();
    }
    // One session gives two halves and three 3G shares; the runtime takes it in and starts
    // writing, and no watcher has shown a claim allocated yet.
    let first = run(&c);
    let names: BTreeSet<String> = allocated(&first).into_keys().collect();
    assert_eq!(names.len(), 5, "{:?}", first.binds);
    c.take(&first, TaskStatus::Binding).unwrap();
    assert_eq!(c.world().dra["east"].assumed().keys().count(), 5);
    // The claims' first writes (the finalizer) come back without the allocation.
    for name in &names {
        let claim = (*c.snapshot().dra["east"].claims[name]).clone();
        let mut stale = claim.clone();
        stale.allocation = None;
        dra(&mut c, DraChange::ClaimUpsert(stale));
        assert_eq!(
            c.snapshot().dra["east"].claims[name].allocation,
            claim.allocation,
            "{name} keeps what it is being given"
        );
    }
    // A third half and a fourth share arrive: nothing is left for them.
    claim_of(&mut c, "h2", vec![request("gpu", profile("half"), None)]);
    claim_of(&mut c, "n3", vec![request("nic", nic(), Some(2 * G))]);
    add_job(&mut c, &using("h2", &["h2"]).created(9)).unwrap();
    add_job(&mut c, &using("n3", &["n3"]).created(10)).unwrap();
    let second = run(&c);
    assert!(second.binds.is_empty(), "{:?}", second.binds);
    // The watcher shows h0 and n0 allocated; h1's and n1's binds fail (nothing was written).
    for name in ["default/h0", "default/n0"] {
        let mut claim = (*c.snapshot().dra["east"].claims[name]).clone();
        claim.allocation = allocated(&first).remove(name);
        dra(&mut c, DraChange::ClaimUpsert(claim));
    }
    let pod_of = |claim: &str| {
        let job = format!("default/{claim}");
        first
            .binds
            .iter()
            .find(|b| b.job == job)
            .unwrap()
            .task
            .clone()
    };
    for claim in ["h1", "n1"] {
        let pod = pod_of(claim);
        c.unassume_claims(&pod).unwrap();
        c.set_task(&pod, TaskStatus::Pending, None).unwrap();
    }
    let left: Vec<&str> = c.world().dra["east"].assumed().keys().collect();
    assert_eq!(left, ["default/n2"]);
    assert_eq!(
        c.snapshot().dra["east"].claims["default/h1"].allocation,
        None
    );
    // One half and one 3G share are free again: the next session gives them (to the earlier
    // of the waiting claims each), and no more.
    let third = run(&c);
    let got: BTreeSet<String> = allocated(&third).into_keys().collect();
    assert_eq!(got.len(), 2, "{:?}", third.binds);
    assert!(
        got.iter().any(|k| k == "default/h1" || k == "default/h2"),
        "{got:?}"
    );
    assert!(got.iter().any(|k| k.contains("/n")), "{got:?}");
}

#[test]
fn a_pool_whose_device_draws_on_a_counter_set_it_does_not_publish_offers_nothing() {
    let mut c = fleet();
    partitioned(&mut c, "node-a-0", 80 * GI, &[("half-0", "half", 40 * GI)]);
    // A second slice of the pool names a set nobody publishes: the pool is invalid whole.
    dra(
        &mut c,
        DraChange::SliceUpsert(ResourceSlice {
            name: "node-a-0-more".into(),
            driver: GPU.into(),
            pool: "node-a-0".into(),
            generation: 1,
            nodes: SliceNodes::Node("node-a-0".into()),
            devices: vec![Device {
                name: "odd".into(),
                consumes: [(("gpu-9".to_string(), "memory".to_string()), GI)].into(),
                ..Default::default()
            }],
            counter_sets: Default::default(),
        }),
    );
    claim_of(&mut c, "h", vec![request("gpu", profile("half"), None)]);
    add_job(&mut c, &using("h", &["h"])).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
}

#[test]
fn a_device_allowing_several_allocations_is_shared_until_its_capacity_is_spent() {
    let mut c = fleet();
    nics(&mut c, "node-a-1", &[("p0", 10 * G)]);
    // A share of 4G is held already.
    dra(
        &mut c,
        DraChange::ClaimUpsert(ResourceClaim {
            namespace: "default".into(),
            name: "held".into(),
            allocation: Some(ClaimAllocation {
                devices: vec![AllocatedDevice {
                    request: "nic".into(),
                    driver: NIC.into(),
                    pool: "node-a-1-nics".into(),
                    device: "eth0".into(),
                    share: Some("aaaaaaaa-aaaa-5aaa-aaaa-aaaaaaaaaaaa".into()),
                    consumed: [("bandwidth".to_string(), 4 * G)].into(),
                }],
                nodes: SliceNodes::Node("node-a-1".into()),
            }),
            reserved_for: vec!["other".into()],
            ..Default::default()
        }),
    );
    // 2.5G rounds up to 3G: two fit beside the 4G (4 + 3 + 3 = 10), the third does not.
    for (i, name) in ["s0", "s1", "s2"].iter().enumerate() {
        claim_of(
            &mut c,
            name,
            vec![request("nic", nic(), Some(2 * G + G / 2))],
        );
        add_job(&mut c, &using(name, &[name]).created(i as i64)).unwrap();
    }
    // More than the device has: never.
    claim_of(&mut c, "big", vec![request("nic", nic(), Some(11 * G))]);
    add_job(&mut c, &using("big", &["big"]).created(9)).unwrap();
    let d = run(&c);
    let got = allocated(&d);
    let names: BTreeSet<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(names, ["default/s0", "default/s1"].into(), "{:?}", d.binds);
    let mut ids = BTreeSet::new();
    for a in got.values() {
        let dev = &a.devices[0];
        assert_eq!(dev.device, "eth0");
        assert_eq!(dev.consumed, [("bandwidth".to_string(), 3 * G)].into());
        let id = dev.share.clone().expect("a share is named");
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(id, id.to_lowercase(), "{id}");
        ids.insert(id);
    }
    assert_eq!(ids.len(), 2, "each share its own ID");
    assert!(d.binds.iter().all(|b| b.node == "node-a-1"));
    let big = d.event_for("default/big").unwrap();
    assert_eq!(big.reason, "NotInqueueable", "{}", big.message);
}

#[test]
fn a_share_without_an_amount_consumes_the_policys_default_and_distinct_attributes_keep_devices_apart()
 {
    let mut c = fleet();
    nics(&mut c, "node-a-2", &[("p0", 10 * G), ("p1", 10 * G)]);
    // Two requests of one claim: without the constraint both would share eth0.
    dra(
        &mut c,
        DraChange::ClaimUpsert(ResourceClaim {
            namespace: "default".into(),
            name: "pair".into(),
            requests: vec![request("a", nic(), None), request("b", nic(), None)],
            distinct_attributes: vec![(vec![], format!("{NIC}/port"))],
            ..Default::default()
        }),
    );
    claim_of(
        &mut c,
        "same",
        vec![request("a", nic(), None), request("b", nic(), None)],
    );
    add_job(&mut c, &using("pair", &["pair"]).created(1)).unwrap();
    add_job(&mut c, &using("same", &["same"]).created(2)).unwrap();
    let d = run(&c);
    let got = allocated(&d);
    let devices =
        |k: &str| -> Vec<String> { got[k].devices.iter().map(|d| d.device.clone()).collect() };
    assert_eq!(devices("default/pair"), ["eth0", "eth1"]);
    assert_eq!(devices("default/same"), ["eth0", "eth0"]);
    for a in got.values() {
        for dev in &a.devices {
            assert_eq!(dev.consumed, [("bandwidth".to_string(), G)].into());
        }
    }
    let same = &got["default/same"].devices;
    assert_ne!(same[0].share, same[1].share, "two shares of one device");
}

#[test]
fn a_device_of_a_per_device_slice_is_reached_only_from_its_own_nodes() {
    let mut c = fleet();
    dra(
        &mut c,
        DraChange::SliceUpsert(ResourceSlice {
            name: "fabric".into(),
            driver: GPU.into(),
            pool: "fabric".into(),
            generation: 1,
            nodes: SliceNodes::PerDevice,
            devices: vec![Device {
                name: "link-2".into(),
                attributes: [(format!("{GPU}/profile"), Attribute::Str("link".into()))].into(),
                nodes: Some(SliceNodes::Node("node-a-2".into())),
                ..Default::default()
            }],
            counter_sets: Default::default(),
        }),
    );
    claim_of(&mut c, "l", vec![request("gpu", profile("link"), None)]);
    add_job(&mut c, &using("l", &["l"])).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.len(), 1, "{:?}", d.events);
    assert_eq!(d.binds[0].node, "node-a-2");
    assert_eq!(
        allocated(&d)["default/l"].nodes,
        SliceNodes::Node("node-a-2".into())
    );
}

/// A random fleet of partitioned GPUs and shared NICs, and claims for partitions and shares.
#[derive(Clone, Debug)]
struct Sharing {
    /// Per node: the GPU's memory (Gi) and its partitions' sizes (Gi).
    gpus: Vec<(i64, Vec<i64>)>,
    /// Per node: its NIC's bandwidth (G) and whether it has a policy.
    nics: Vec<(i64, bool)>,
    /// Claims: a partition of this size (Gi), or a share of this bandwidth (in tenths of G,
    /// none for the default).
    claims: Vec<Result<i64, Option<i64>>>,
    sessions: usize,
    /// What becomes of each allocation a session makes, in turn (cycled): how many sessions
    /// later a watcher shows it, whether an older version of its claim (the finalizer written
    /// first) comes back before that, and whether its bind fails with nothing written.
    fates: Vec<(usize, bool, bool)>,
}

fn sharing() -> impl Strategy<Value = Sharing> {
    (
        prop::collection::vec(
            (
                prop::sample::select(vec![40_i64, 80]),
                prop::collection::vec(prop::sample::select(vec![10_i64, 20, 40, 80]), 1..6),
            ),
            3,
        ),
        prop::collection::vec((1_i64..12, any::<bool>()), 3),
        prop::collection::vec(
            prop_oneof![
                prop::sample::select(vec![10_i64, 20, 40, 80]).prop_map(Ok),
                prop::option::of(1_i64..60).prop_map(Err),
            ],
            1..16,
        ),
        1_usize..6,
        prop::collection::vec((0_usize..3, any::<bool>(), prop::bool::weighted(0.2)), 1..8),
    )
        .prop_map(|(gpus, nics, claims, sessions, fates)| Sharing {
            gpus,
            nics,
            claims,
            sessions,
            fates,
        })
}

/// Holds every allocation written to the claims to the devices: a device taken whole is
/// taken by one claim and never shared; no pool's counter is overdrawn by the devices in
/// use (each once); no shared device gives more capacity than it has; shares are named apart.
fn check_allocations(c: &Cache, written: &BTreeMap<String, ClaimAllocation>, s: &Sharing) {
    let snap = c.snapshot();
    let dra_east = &snap.dra["east"];
    let mut whole: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut shares: BTreeMap<(String, String), Vec<&AllocatedDevice>> = BTreeMap::new();
    for allocation in written.values() {
        for d in &allocation.devices {
            let key = (d.pool.clone(), d.device.clone());
            match d.share {
                None => *whole.entry(key).or_default() += 1,
                Some(_) => shares.entry(key).or_default().push(d),
            }
        }
    }
    for (k, n) in &whole {
        assert_eq!(*n, 1, "{k:?} taken whole {n} times");
        assert!(!shares.contains_key(k), "{k:?} both whole and shared");
    }
    for (i, (gi, _)) in s.gpus.iter().enumerate() {
        let pool = format!("node-a-{i}");
        let slice = &dra_east.slices()[&format!("{pool}-gpu")];
        let drawn: Milli = slice
            .devices
            .iter()
            .filter(|d| whole.contains_key(&(pool.clone(), d.name.clone())))
            .map(|d| d.consumes.values().sum::<Milli>())
            .sum();
        assert!(
            drawn <= Milli::from(*gi) * GI,
            "{pool}: {drawn} drawn of {gi}Gi"
        );
    }
    for (i, (bw, _)) in s.nics.iter().enumerate() {
        let key = (format!("node-a-{i}-nics"), "eth0".to_string());
        let held = shares.get(&key).map(Vec::as_slice).unwrap_or_default();
        let used: Milli = held.iter().map(|d| d.consumed["bandwidth"]).sum();
        assert!(used <= Milli::from(*bw) * G, "{key:?}: {used} of {bw}G");
        let ids: BTreeSet<_> = held.iter().map(|d| d.share.clone()).collect();
        assert_eq!(ids.len(), held.len(), "{key:?}: shares named twice");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shared_devices_never_give_more_than_their_counters_and_capacities_hold_while_watchers_lag(s in sharing()) {
        let mut c = zoned(&["a"], 3);
        gpu_class(&mut c);
        for (i, (gi, parts)) in s.gpus.iter().enumerate() {
            let names: Vec<(String, String, Milli)> = parts
                .iter()
                .enumerate()
                .map(|(j, p)| (format!("p{j}"), format!("{p}g"), Milli::from(*p) * GI))
                .collect();
            let refs: Vec<(&str, &str, Milli)> =
                names.iter().map(|(a, b, m)| (a.as_str(), b.as_str(), *m)).collect();
            partitioned(&mut c, &format!("node-a-{i}"), Milli::from(*gi) * GI, &refs);
        }
        for (i, (bw, policy)) in s.nics.iter().enumerate() {
            let node = format!("node-a-{i}");
            nics(&mut c, &node, &[("p0", Milli::from(*bw) * G)]);
            if !policy {
                // The same NIC without a request policy: requests consumed as asked.
                let mut slice = (*c.snapshot().dra["east"].slices()[&format!("{node}-nics")]).clone();
                for d in &mut slice.devices {
                    for cap in d.capacity.values_mut() {
                        cap.policy = None;
                    }
                }
                dra(&mut c, DraChange::SliceUpsert(slice));
            }
        }
        for (i, want) in s.claims.iter().enumerate() {
            let name = format!("c{i}");
            let req = match want {
                Ok(gi) => request("gpu", profile(&format!("{gi}g")), None),
                Err(tenths) => request("nic", nic(), tenths.map(|t| Milli::from(t) * G / 10)),
            };
            claim_of(&mut c, &name, vec![req]);
            add_job(&mut c, &using(&name, &[&name]).created(i as i64)).unwrap();
        }
        // The claims as the API server holds them, and the allocations the watchers have
        // not shown yet: (session due, claim, pod). Sessions follow each other faster than
        // the watchers, as they may on a real cluster.
        let mut written: BTreeMap<String, ClaimAllocation> = BTreeMap::new();
        let mut unseen: Vec<(usize, String, String)> = Vec::new();
        let mut fates = s.fates.iter().cycle();
        for session in 0..s.sessions {
            let d = run(&c);
            c.take(&d, TaskStatus::Binding).unwrap();
            for p in &d.prebinds {
                for b in &p.devices {
                    let Some(a) = &b.allocation else { continue };
                    let &(lag, stale, fails) = fates.next().unwrap();
                    if stale {
                        let mut old = (*c.snapshot().dra["east"].claims[&b.claim]).clone();
                        old.allocation = None;
                        dra(&mut c, DraChange::ClaimUpsert(old));
                    }
                    if fails {
                        c.unassume_claims(&p.task).unwrap();
                        c.set_task(&p.task, TaskStatus::Pending, None).unwrap();
                        continue;
                    }
                    prop_assert!(!written.contains_key(&b.claim), "{} allocated twice", b.claim);
                    written.insert(b.claim.clone(), a.clone());
                    unseen.push((session + lag, b.claim.clone(), p.task.clone()));
                }
            }
            let (due, later): (Vec<_>, Vec<_>) =
                unseen.into_iter().partition(|(at, _, _)| *at <= session);
            unseen = later;
            for (_, claim_key, task) in due {
                let mut claim = (*c.snapshot().dra["east"].claims[&claim_key]).clone();
                claim.allocation = written.get(&claim_key).cloned();
                claim.reserved_for.push(task.rsplit('/').next().unwrap().to_string());
                dra(&mut c, DraChange::ClaimUpsert(claim));
            }
            check_allocations(&c, &written, &s);
        }
    }
}
