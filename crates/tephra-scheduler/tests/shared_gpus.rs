//! Shared GPUs (Volcano's vGPU): pods that ask for slices of GPUs are given concrete GPUs of
//! their node, several pods share one GPU up to its split count, memory and cores, a gang's
//! slices are all-or-nothing, and the `deviceshare` arguments decide the order and whether
//! sharing is on at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::vgpu::{self, ContainerAsk, Gpu, GpuAsk};
use tephra_scheduler::model::{Cluster, NodeSpec, PodRules};
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, apply_binds, resources};
use tephra_scheduler::{Cache, Decisions, SchedulerConfig, schedule};

/// How many pods share one GPU at most, on every test node.
const SPLIT: u32 = 4;

/// A node `name` of cluster `east` with `gpus` (memory in MiB each), offering the plugin's
/// resources.
fn node(c: &mut Cache, name: &str, gpus: &[u64]) {
    node_in(c, "east", name, gpus);
}

/// [`node`] in `cluster`.
fn node_in(c: &mut Cache, cluster: &str, name: &str, gpus: &[u64]) {
    node_of(c, cluster, name, gpus, SPLIT, None);
}

/// A node `name` of `cluster` with `gpus` (MiB each) of `split`, T4s or, with `mig`, GPUs of
/// that type registered in dynamic MIG mode.
fn node_of(c: &mut Cache, cluster: &str, name: &str, gpus: &[u64], split: u32, mig: Option<&str>) {
    let memory: u64 = gpus.iter().sum();
    let list = [
        ("cpu", "64".to_string()),
        ("memory", "256Gi".to_string()),
        ("pods", "110".to_string()),
        (
            "volcano.sh/vgpu-number",
            (gpus.len() * split as usize).to_string(),
        ),
        ("volcano.sh/vgpu-memory", memory.to_string()),
        ("volcano.sh/vgpu-cores", (gpus.len() * 100).to_string()),
    ];
    let list: Vec<(&str, &str)> = list.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let allocatable = resources(c, &list).unwrap();
    let gpus: Vec<Gpu> = gpus
        .iter()
        .enumerate()
        .map(|(i, m)| Gpu {
            uuid: format!("GPU-{name}-{i}"),
            split,
            memory: *m,
            model: mig.unwrap_or("NVIDIA-Tesla T4").into(),
            healthy: true,
            mig: mig.is_some(),
        })
        .collect();
    c.apply(Event::NodeUpsert(NodeSpec {
        name: name.into(),
        cluster: cluster.into(),
        labels: BTreeMap::new(),
        taints: Vec::new(),
        allocatable,
        unschedulable: false,
        ready: true,
        gpus: gpus.into(),
        gpu_lock: None,
    }))
    .unwrap();
}

fn cache() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    c
}

/// A role of `replicas` pods whose one container takes `number` GPUs with `memory` MiB and
/// `cores` percent on each.
fn role(name: &str, replicas: u32, number: u32, memory: u64, cores: u32) -> Role {
    role_in_mode(name, replicas, number, memory, cores, None)
}

/// [`role`], its pods asking for GPUs of `mode` (`volcano.sh/vgpu-mode`).
fn role_in_mode(
    name: &str,
    replicas: u32,
    number: u32,
    memory: u64,
    cores: u32,
    mode: Option<&str>,
) -> Role {
    let ask = GpuAsk {
        mode: mode.map(String::from),
        containers: 1,
        asks: vec![ContainerAsk {
            index: 0,
            number,
            memory,
            percent: None,
            cores,
        }],
        ..GpuAsk::default()
    };
    let (n, m, k) = (
        number.to_string(),
        (memory * u64::from(number)).to_string(),
        (cores * number).to_string(),
    );
    Role::new(
        name,
        replicas,
        &[
            ("cpu", "1"),
            ("volcano.sh/vgpu-number", &n),
            ("volcano.sh/vgpu-memory", &m),
            ("volcano.sh/vgpu-cores", &k),
        ],
    )
    .rules(PodRules {
        gpus: Some(Arc::new(ask)),
        ..PodRules::default()
    })
}

fn config(args: &str) -> Arc<SchedulerConfig> {
    let text = format!(
        "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: predicates\n  - name: proportion\n  - name: deviceshare\n{args}"
    );
    Arc::new(SchedulerConfig::parse(&text).unwrap())
}

const BINPACK: &str = "    arguments:\n      deviceshare.VGPUEnable: true\n      deviceshare.SchedulePolicy: binpack\n      deviceshare.ScheduleWeight: 10\n";
const SPREAD: &str = "    arguments:\n      deviceshare.VGPUEnable: true\n      deviceshare.SchedulePolicy: spread\n      deviceshare.ScheduleWeight: 10\n";

/// (pod, the GPUs of its one container) of every bind.
fn given(d: &Decisions) -> BTreeMap<String, Vec<String>> {
    d.binds
        .iter()
        .map(|b| {
            let gpus = b
                .gpus
                .as_ref()
                .map(|g| g.all().map(|g| g.uuid.clone()).collect())
                .unwrap_or_default();
            (b.task.clone(), gpus)
        })
        .collect()
}

fn message(d: &Decisions, job: &str) -> String {
    d.groups
        .iter()
        .find(|g| g.job == job)
        .map(|g| {
            g.conditions
                .iter()
                .map(|c| c.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

#[test]
fn pods_share_one_gpu_until_its_memory_is_taken_and_the_next_waits_saying_why() {
    let mut c = cache();
    node(&mut c, "n", &[16000, 6000]);
    // Four slices of 4000 fill the first GPU; the second has room for one more.
    for i in 0..6 {
        add_job(
            &mut c,
            &GangJob::new(&format!("j{i}"), vec![role("w", 1, 1, 4000, 0)]).created(i),
        )
        .unwrap();
    }
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    let g = given(&d);
    assert_eq!(g.len(), 5, "{g:?}");
    let on_first = g
        .values()
        .filter(|v| *v == &vec!["GPU-n-0".to_string()])
        .count();
    assert_eq!(on_first, 4, "{g:?}");
    // The node's 22000 MiB in all would take a sixth slice; no one GPU can.
    let why = message(&d, "default/j5");
    assert!(why.contains("not enough gpu fitted on this node"), "{why}");
}

#[test]
fn a_gang_of_slices_is_placed_whole_or_not_at_all() {
    let mut c = cache();
    node(&mut c, "n", &[16000, 16000]);
    add_job(&mut c, &GangJob::new("big", vec![role("w", 5, 1, 8000, 0)])).unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    add_job(
        &mut c,
        &GangJob::new("fits", vec![role("w", 4, 1, 8000, 0)]),
    )
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 2);
    assert_eq!(given(&d).len(), 4);
    assert!(d.binds.iter().all(|b| b.job == "default/fits"));
}

#[test]
fn binpack_fills_one_gpu_first_and_spread_takes_idle_ones_first() {
    for (args, distinct) in [(BINPACK, 1), (SPREAD, 3)] {
        let mut c = cache();
        node(&mut c, "n", &[16000, 16000, 16000]);
        add_job(&mut c, &GangJob::new("j", vec![role("w", 3, 1, 2000, 10)])).unwrap();
        let d = schedule(c.snapshot(), config(args), 0, 1);
        let used: std::collections::BTreeSet<String> = given(&d).into_values().flatten().collect();
        assert_eq!(used.len(), distinct, "{args}: {used:?}");
    }
}

#[test]
fn all_of_a_gpus_cores_take_it_alone_and_a_container_takes_distinct_gpus() {
    let mut c = cache();
    node(&mut c, "n", &[16000, 16000]);
    add_job(
        &mut c,
        &GangJob::new("small", vec![role("w", 1, 1, 1000, 0)]),
    )
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    apply_binds(&mut c, &d).unwrap();
    // Two whole-core pods: only one GPU is empty.
    add_job(
        &mut c,
        &GangJob::new("alone", vec![role("w", 2, 1, 1000, 100)]),
    )
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 2);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    // One pod taking both GPUs at once cannot: one is shared already and it asks for all cores.
    add_job(&mut c, &GangJob::new("two", vec![role("w", 1, 2, 1000, 0)])).unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 3);
    let g = given(&d);
    let two = &g["default/two-w-0"];
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
}

#[test]
fn without_vgpu_enable_slices_are_placed_nowhere_and_the_condition_says_so() {
    let mut c = cache();
    node(&mut c, "n", &[16000]);
    add_job(&mut c, &GangJob::new("j", vec![role("w", 1, 1, 1000, 0)])).unwrap();
    let d = schedule(c.snapshot(), config(""), 0, 1);
    assert!(d.binds.is_empty());
    let why = message(&d, "default/j");
    assert!(why.contains("deviceshare.VGPUEnable"), "{why}");
}

#[test]
fn a_bad_schedule_policy_is_refused_naming_the_argument() {
    let text = "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n      deviceshare.SchedulePolicy: tightest\n";
    let e = SchedulerConfig::parse(text).unwrap_err().to_string();
    assert!(e.contains("deviceshare.SchedulePolicy"), "{e}");
}

/// [`role`] of one pod of 2000 MiB whose pods carry `labels`.
fn labelled(labels: &[(&str, &str)]) -> Role {
    let mut r = role("w", 1, 1, 2000, 0);
    r.rules.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    r
}

#[test]
fn pods_matching_an_exclusion_rule_never_share_a_gpu_with_each_other_and_others_may() {
    // Pods labelled app=llm, tier=1 keep to GPUs of their own; a value written as a number
    // counts as its text.
    let args = format!(
        "{BINPACK}      deviceshare.GPUExclusiveRules:\n      - app: llm\n        tier: 1\n"
    );
    let mut c = cache();
    node(&mut c, "n", &[16000, 16000]);
    let llm = [("app", "llm"), ("tier", "1")];
    add_job(&mut c, &GangJob::new("a", vec![labelled(&llm)])).unwrap();
    let d = schedule(c.snapshot(), config(&args), 0, 1);
    apply_binds(&mut c, &d).unwrap();
    let first = given(&d)["default/a-w-0"].clone();
    for (i, (name, labels)) in [
        ("b", &llm[..]),
        ("c", &llm[..]),
        ("plain", &[][..]),
        ("half", &[("app", "llm")][..]),
    ]
    .into_iter()
    .enumerate()
    {
        add_job(
            &mut c,
            &GangJob::new(name, vec![labelled(labels)]).created(i as i64 + 1),
        )
        .unwrap();
    }
    let d = schedule(c.snapshot(), config(&args), 0, 2);
    let g = given(&d);
    // The second matching pod takes the other GPU (binpack would have put it beside the
    // first); the third finds both GPUs held by a matching pod.
    assert_ne!(g["default/b-w-0"], first, "{g:?}");
    assert!(!g.contains_key("default/c-w-0"), "{g:?}");
    let why = message(&d, "default/c");
    assert!(why.contains("not enough gpu fitted on this node"), "{why}");
    // Pods matching no rule (one label of two is not a match) share as ever.
    assert!(g.contains_key("default/plain-w-0"), "{g:?}");
    assert!(g.contains_key("default/half-w-0"), "{g:?}");
    // Without the rules, binpack puts the second beside the first.
    let d = schedule(c.snapshot(), config(BINPACK), 0, 3);
    assert_eq!(given(&d)["default/b-w-0"], first);
}

#[test]
fn exclusion_rules_that_are_not_a_list_of_label_maps_are_refused_naming_the_argument() {
    for rules in ["llm", "[llm]", "[{app: [a, b]}]"] {
        let text = format!(
            "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n      deviceshare.GPUExclusiveRules: {rules}\n"
        );
        let e = SchedulerConfig::parse(&text).unwrap_err().to_string();
        assert!(e.contains("deviceshare.GPUExclusiveRules"), "{rules}: {e}");
    }
}

/// A node `name` of `cards` gpushare cards of 16000 MiB (Volcano's older mode: the node offers
/// `volcano.sh/gpu-memory` and `volcano.sh/gpu-number`).
fn gpushare_node(c: &mut Cache, name: &str, cards: u64) {
    let memory = (16000 * cards).to_string();
    let number = cards.to_string();
    let list = [
        ("cpu", "64"),
        ("memory", "256Gi"),
        ("pods", "110"),
        (vgpu::SHARE_MEMORY, memory.as_str()),
        (vgpu::SHARE_NUMBER, number.as_str()),
    ];
    let allocatable = resources(c, &list).unwrap();
    c.apply(Event::NodeUpsert(NodeSpec {
        name: name.into(),
        cluster: "east".into(),
        labels: BTreeMap::new(),
        taints: Vec::new(),
        allocatable,
        unschedulable: false,
        ready: true,
        gpus: vgpu::share_gpus(16000 * cards, cards, None).into(),
        gpu_lock: None,
    }))
    .unwrap();
}

/// A gpushare pod's role: `memory` MiB of one card, or `number` idle cards.
fn share_role(memory: u64, number: u64) -> Role {
    let (m, n) = (memory.to_string(), number.to_string());
    let mut asks = vec![("cpu", "1")];
    if memory > 0 {
        asks.push((vgpu::SHARE_MEMORY, m.as_str()));
    }
    if number > 0 {
        asks.push((vgpu::SHARE_NUMBER, n.as_str()));
    }
    let ask = vgpu::share_ask(&[(memory, number)], (0, 0)).unwrap();
    Role::new("w", 1, &asks).rules(PodRules {
        gpus: Some(Arc::new(ask)),
        ..PodRules::default()
    })
}

fn share_config(flag: &str) -> Arc<SchedulerConfig> {
    config(&format!("    arguments:\n      {flag}: true\n"))
}

#[test]
fn gpushare_pods_share_the_lowest_card_with_room_and_are_bound_with_its_index() {
    let mut c = cache();
    gpushare_node(&mut c, "n", 2);
    for i in 0..4 {
        add_job(
            &mut c,
            &GangJob::new(&format!("m{i}"), vec![share_role(6000, 0)]).created(i),
        )
        .unwrap();
    }
    let d = schedule(
        c.snapshot(),
        share_config("deviceshare.GPUSharingEnable"),
        0,
        1,
    );
    let g = given(&d);
    // Two of 6000 MiB fill card 0 to 12000; the third goes to card 1, the fourth beside it.
    let card = |p: &str| g[p].clone();
    assert_eq!(card("default/m0-w-0"), [vgpu::share_uuid(0)]);
    assert_eq!(card("default/m1-w-0"), [vgpu::share_uuid(0)]);
    assert_eq!(card("default/m2-w-0"), [vgpu::share_uuid(1)]);
    assert_eq!(card("default/m3-w-0"), [vgpu::share_uuid(1)]);
    let b = d.binds.iter().find(|b| b.task == "default/m2-w-0").unwrap();
    assert_eq!(
        b.gpus.as_ref().unwrap().share_indices().as_deref(),
        Some("1")
    );
    assert!(!b.gpu_lock, "gpushare takes no vGPU lock");
    apply_binds(&mut c, &d).unwrap();
    // No card has 6000 left: a fifth waits, saying why.
    add_job(
        &mut c,
        &GangJob::new("m4", vec![share_role(6000, 0)]).created(9),
    )
    .unwrap();
    let d = schedule(
        c.snapshot(),
        share_config("deviceshare.GPUSharingEnable"),
        0,
        2,
    );
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    let why = message(&d, "default/m4");
    assert!(why.contains("not enough gpu fitted on this node"), "{why}");
}

#[test]
fn gpushare_number_pods_take_idle_cards_whole_and_each_mode_waits_for_its_argument() {
    let mut c = cache();
    gpushare_node(&mut c, "n", 3);
    add_job(
        &mut c,
        &GangJob::new("two", vec![share_role(0, 2)]).created(0),
    )
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("two-more", vec![share_role(0, 2)]).created(1),
    )
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("mem", vec![share_role(1000, 0)]).created(2),
    )
    .unwrap();
    let d = schedule(
        c.snapshot(),
        share_config("deviceshare.GPUNumberEnable"),
        0,
        1,
    );
    let g = given(&d);
    assert_eq!(
        g["default/two-w-0"],
        [vgpu::share_uuid(0), vgpu::share_uuid(1)],
        "the two idle cards of lowest index"
    );
    assert!(
        !g.contains_key("default/two-more-w-0"),
        "one idle card left: {g:?}"
    );
    assert!(!g.contains_key("default/mem-w-0"), "{g:?}");
    let why = message(&d, "default/mem");
    assert!(why.contains("deviceshare.GPUSharingEnable"), "{why}");
    // vGPU pods and gpushare cards do not mix.
    add_job(
        &mut c,
        &GangJob::new("vgpu", vec![role("w", 1, 1, 1000, 0)]).created(3),
    )
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 2);
    assert!(!given(&d).contains_key("default/vgpu-w-0"));
}

#[test]
fn gpushare_with_vgpu_or_both_gpushare_modes_is_refused_as_volcano_refuses_to_start() {
    for (args, key) in [
        (
            "deviceshare.GPUSharingEnable: true\n      deviceshare.GPUNumberEnable: true",
            "deviceshare.GPUNumberEnable",
        ),
        (
            "deviceshare.GPUSharingEnable: true\n      deviceshare.VGPUEnable: true",
            "deviceshare.VGPUEnable",
        ),
    ] {
        let text = format!(
            "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n      {args}\n"
        );
        let e = SchedulerConfig::parse(&text).unwrap_err().to_string();
        assert!(e.contains(key), "{args}: {e}");
    }
}

/// A node `name` of two A100 80GB GPUs registered in dynamic MIG mode (split 10).
fn mig_node(c: &mut Cache, name: &str) {
    node_of(
        c,
        "east",
        name,
        &[81920, 81920],
        10,
        Some("NVIDIA-A100-PCIE-80GB"),
    );
}

use tephra_scheduler::testing::A100_80GB_MIG_CONFIG as GEOMETRIES;

#[test]
fn dynamic_mig_gpus_cut_instances_by_their_models_geometries_and_share_without_them() {
    // Before the device configuration is read, a MIG-mode GPU takes nothing.
    let mut c = cache();
    mig_node(&mut c, "m");
    add_job(
        &mut c,
        &GangJob::new("plain", vec![role("w", 1, 1, 8000, 0)]),
    )
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    // Read, without geometries for its model: shared as any other (Volcano falls back).
    c.apply(Event::MigGeometries(Default::default())).unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    let g = given(&d);
    assert!(g["default/plain-w-0"][0].starts_with("GPU-m-"), "{g:?}");
    assert!(!g["default/plain-w-0"][0].contains('['), "{g:?}");
    // With them: 8000 MiB takes a 1g.10gb of the first geometry that has one, the GPU's
    // group is fixed by its first instance, and the seven 1g.10gb of a GPU fill it.
    let mut c = cache();
    mig_node(&mut c, "m");
    c.apply(Event::MigGeometries(
        tephra_scheduler::model::mig::KnownGeometries::parse(GEOMETRIES).unwrap(),
    ))
    .unwrap();
    for i in 0..8 {
        add_job(
            &mut c,
            &GangJob::new(&format!("s{i}"), vec![role("w", 1, 1, 8000, 0)]).created(i),
        )
        .unwrap();
    }
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    assert_eq!(d.binds.len(), 8, "{:?}", given(&d));
    let grants: Vec<_> = d
        .binds
        .iter()
        .flat_map(|b| b.gpus.as_ref().unwrap().all().cloned().collect::<Vec<_>>())
        .collect();
    assert!(grants.iter().all(|g| g.memory == 10240), "{grants:?}");
    let mut ids: Vec<&str> = grants.iter().map(|g| g.uuid.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8, "each instance once: {ids:?}");
    let on_one = ids.iter().filter(|u| u.contains("[group1-")).count();
    assert_eq!(on_one, 8, "{ids:?}");
    let per_gpu = |gpu: &str| ids.iter().filter(|u| u.starts_with(gpu)).count();
    assert_eq!(
        (per_gpu("GPU-m-0["), per_gpu("GPU-m-1[")),
        (7, 1),
        "binpack fills one GPU's seven: {ids:?}"
    );
    apply_binds(&mut c, &d).unwrap();
    // 30000 MiB: no 1g.10gb holds it, and both GPUs are in group1: it waits.
    add_job(
        &mut c,
        &GangJob::new("big", vec![role("w", 1, 1, 30000, 0)]).created(20),
    )
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 1, 2);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    let why = message(&d, "default/big");
    assert!(why.contains("not enough gpu fitted on this node"), "{why}");
    // The lone slice of the second GPU leaves: its group is free again, and a 3g.40gb of
    // group2 (the first geometry with an instance of 30000 MiB) takes it.
    let lone = d_lone(&c);
    c.apply(Event::PodDelete {
        namespace: "default".into(),
        name: lone,
    })
    .unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 2, 3);
    let g = given(&d);
    assert_eq!(
        g["default/big-w-0"],
        vec!["GPU-m-1[group2-0]".to_string()],
        "{g:?}"
    );
    // A pod that asks for HAMi-core sharing keeps off MIG GPUs that cut instances.
    let hami = role_in_mode("w", 1, 1, 1000, 0, Some("hami-core"));
    add_job(&mut c, &GangJob::new("hami", vec![hami]).created(30)).unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 3, 4);
    assert!(
        d.binds.iter().all(|b| b.job != "default/hami"),
        "{:?}",
        given(&d)
    );
}

/// The pod alone on GPU `GPU-m-1`.
fn d_lone(c: &Cache) -> String {
    let w = c.world();
    w.gpu_users
        .iter()
        .filter_map(|&t| w.tasks.get(t))
        .find(|t| {
            t.spec
                .gpus
                .as_ref()
                .is_some_and(|g| g.all().any(|g| g.uuid.starts_with("GPU-m-1[")))
        })
        .map(|t| t.spec.name.clone())
        .unwrap()
}

const EXCLUSIVE: &str = "    arguments:\n      deviceshare.VGPUEnable: true\n      deviceshare.SchedulePolicy: binpack\n      deviceshare.ScheduleWeight: 10\n      deviceshare.GPUExclusiveRules:\n      - app: llm\n";
const LOCKING: &str = "    arguments:\n      deviceshare.VGPUEnable: true\n      deviceshare.SchedulePolicy: binpack\n      deviceshare.ScheduleWeight: 10\n      deviceshare.NodeLockEnable: true\n";

/// Sets the node lock of node `name` (of cluster `east`) as a watcher would show it.
fn set_lock(c: &mut Cache, name: &str, at: Option<i64>) {
    let w = c.world();
    let id = w.node_id("east", name).unwrap();
    let mut spec = w.nodes.get(id).unwrap().spec.clone();
    spec.gpu_lock = at;
    c.apply(Event::NodeUpsert(spec)).unwrap();
}

#[test]
fn with_the_node_lock_a_node_takes_one_slice_at_a_time_until_the_plugin_releases_it() {
    let mut c = cache();
    node(&mut c, "a", &[16000]);
    node(&mut c, "b", &[16000]);
    for i in 0..4 {
        add_job(
            &mut c,
            &GangJob::new(&format!("j{i}"), vec![role("w", 1, 1, 2000, 0)]).created(i),
        )
        .unwrap();
    }
    // Binpack would put every slice on one GPU; the lock lets each node take one.
    let d = schedule(c.snapshot(), config(LOCKING), 100, 1);
    let nodes: std::collections::BTreeSet<&str> = d.binds.iter().map(|b| b.node.as_str()).collect();
    assert_eq!(d.binds.len(), 2, "{:?}", given(&d));
    assert_eq!(nodes.len(), 2, "one slice per node: {nodes:?}");
    assert!(
        d.binds.iter().all(|b| b.gpu_lock),
        "each bind takes its node's lock"
    );
    let why = message(&d, "default/j2");
    assert!(why.contains("locked for shared GPUs"), "{why}");
    assert!(
        d.park.jobs.is_empty(),
        "a lock is no reason to park: {:?}",
        d.park.jobs
    );
    // The binds' locks stand in the cache before any watcher shows them.
    apply_binds(&mut c, &d).unwrap();
    let d = schedule(c.snapshot(), config(LOCKING), 101, 2);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    // The device plugin released a's lock: a takes the next slice, b still none.
    set_lock(&mut c, "a", None);
    let d = schedule(c.snapshot(), config(LOCKING), 102, 3);
    assert_eq!(
        d.binds.iter().map(|b| b.node.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    apply_binds(&mut c, &d).unwrap();
    // Nobody released b's lock: it is taken over once it is older than five minutes.
    let d = schedule(c.snapshot(), config(LOCKING), 100 + 299, 4);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    let d = schedule(c.snapshot(), config(LOCKING), 100 + 300, 5);
    assert_eq!(
        d.binds.iter().map(|b| b.node.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
    // Without the lock, nothing of this holds slices back.
    let mut c = cache();
    node(&mut c, "a", &[16000]);
    set_lock(&mut c, "a", Some(100));
    add_job(&mut c, &GangJob::new("g", vec![role("w", 2, 1, 2000, 0)])).unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 101, 1);
    assert_eq!(d.binds.len(), 2);
    assert!(d.binds.iter().all(|b| !b.gpu_lock));
    // With it, a gang of two slices that only one node holds waits, saying why.
    let d = schedule(c.snapshot(), config(LOCKING), 500, 1);
    assert!(d.binds.is_empty(), "{:?}", given(&d));
    let why = message(&d, "default/g");
    assert!(why.contains("locked for shared GPUs"), "{why}");
}

#[test]
fn a_higher_priority_slice_preempts_a_slice_of_the_same_gpu_and_waits_on_its_room() {
    let mut c = cache();
    // One GPU, its memory taken by two low-priority slices; the cluster's totals would fit
    // the newcomer only once one goes.
    node(&mut c, "n", &[16000]);
    for (i, name) in ["low-a", "low-b"].iter().enumerate() {
        add_job(
            &mut c,
            &GangJob::new(name, vec![role("w", 1, 1, 8000, 0)])
                .priority(1)
                .created(i as i64),
        )
        .unwrap();
    }
    let preempting = config(BINPACK).as_ref().clone();
    let mut preempting = preempting;
    preempting.actions = ["enqueue", "allocate", "preempt", "backfill"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let preempting = Arc::new(preempting);
    let d = schedule(c.snapshot(), Arc::clone(&preempting), 0, 1);
    assert_eq!(given(&d).len(), 2);
    apply_binds(&mut c, &d).unwrap();
    c.clear_changed();
    add_job(
        &mut c,
        &GangJob::new("high", vec![role("w", 1, 1, 8000, 0)])
            .priority(100)
            .created(5),
    )
    .unwrap();
    let d = schedule(c.snapshot(), Arc::clone(&preempting), 10, 2);
    assert_eq!(d.evictions.len(), 1, "{:?}", d.evictions);
    assert!(d.evictions[0].job.starts_with("default/low-"));
    assert!(
        d.binds.is_empty(),
        "the slice is not free until its pod is gone"
    );
    assert_eq!(d.pipelined.len(), 1);
    assert_eq!(d.pipelined[0].job, "default/high");
}

#[test]
fn a_queue_capability_in_gpu_memory_holds_the_slice_that_would_pass_it() {
    let mut c = cache();
    node(&mut c, "n", &[16000, 16000]);
    let mut q = tephra_scheduler::model::QueueSpec::named("default");
    let cap = resources(&mut c, &[("volcano.sh/vgpu-memory", "12000")]).unwrap();
    q.capability = Some(cap);
    c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
    for i in 0..3 {
        add_job(
            &mut c,
            &GangJob::new(&format!("j{i}"), vec![role("w", 1, 1, 5000, 0)]).created(i),
        )
        .unwrap();
    }
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    assert_eq!(
        given(&d).len(),
        2,
        "two slices of 5000 MiB fit a 12000 MiB capability"
    );
}

#[test]
fn mig_slices_pack_onto_the_node_already_sliced_and_cpu_pods_keep_off_it() {
    let mut c = cache();
    let mig = [
        ("cpu", "64"),
        ("memory", "256Gi"),
        ("pods", "110"),
        ("nvidia.com/mig-1g.10gb", "7"),
    ];
    tephra_scheduler::testing::add_nodes(&mut c, "east", "mig", 3, &mig, &[]).unwrap();
    tephra_scheduler::testing::add_nodes(
        &mut c,
        "east",
        "cpu",
        1,
        &[("cpu", "64"), ("memory", "256Gi"), ("pods", "110")],
        &[],
    )
    .unwrap();
    let slice = |name: &str| {
        GangJob::new(
            name,
            vec![Role::new(
                "w",
                1,
                &[("cpu", "1"), ("nvidia.com/mig-1g.10gb", "1")],
            )],
        )
    };
    let cfg = Arc::new(SchedulerConfig::default_config());
    for i in 0..5 {
        add_job(&mut c, &slice(&format!("m{i}")).created(i)).unwrap();
        let d = schedule(c.snapshot(), Arc::clone(&cfg), i, i as u64 + 1);
        apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
    }
    let nodes: std::collections::BTreeSet<String> = (0..5)
        .filter_map(|i| c.task(&format!("default/m{i}-w-0")))
        .filter_map(|p| p.placement.as_ref().map(|(_, n)| n.clone()))
        .collect();
    assert_eq!(nodes.len(), 1, "five slices on one node: {nodes:?}");
    add_job(
        &mut c,
        &GangJob::new("etl", vec![Role::new("w", 1, &[("cpu", "4")])]).created(9),
    )
    .unwrap();
    let d = schedule(c.snapshot(), cfg, 9, 9);
    assert_eq!(d.binds.len(), 1);
    assert_eq!(
        d.binds[0].node, "cpu-0",
        "a CPU pod keeps off the MIG nodes"
    );
}

#[test]
fn a_gang_of_slices_goes_to_the_member_whose_gpus_hold_them_not_only_its_totals() {
    let mut c = cache();
    add_cluster(&mut c, Cluster::named("west")).unwrap();
    // east has more GPU memory in all, but no GPU with 12000 MiB; west's GPUs hold a slice
    // each. Judged by totals alone, east is the better member (the test fails so).
    node_in(&mut c, "east", "e", &[8000, 8000, 8000, 8000]);
    node_in(&mut c, "west", "w", &[12000, 12000]);
    add_job(&mut c, &GangJob::new("g", vec![role("w", 2, 1, 12000, 0)])).unwrap();
    let d = schedule(c.snapshot(), config(BINPACK), 0, 1);
    assert_eq!(given(&d).len(), 2, "{:?}", message(&d, "default/g"));
    assert!(d.binds.iter().all(|b| b.cluster == "west"), "{:?}", d.binds);
}

/// One generated job: (pods, GPUs per pod, MiB per GPU, cores per GPU).
fn job() -> impl Strategy<Value = (u32, u32, u64, u32)> {
    (
        1u32..4,
        1u32..3,
        prop_oneof![Just(0u64), 1000u64..9000],
        prop_oneof![Just(0u32), Just(100), 0u32..60],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Over several sessions with pods finishing in between, no GPU holds more pods than its
    /// split count, more memory than it has, or more than all of its cores; every container
    /// gets as many distinct GPUs as it asks; every gang is bound whole or not at all. With the
    /// node lock, a session binds at most one vGPU pod per node and none to a node whose lock
    /// stands (the device plugin releases some locks between sessions).
    #[test]
    fn no_gpu_is_over_committed_and_gangs_stay_whole(
        nodes in prop::collection::vec(prop::collection::vec(prop_oneof![Just(8000u64), Just(16000)], 1..4), 1..4),
        jobs in prop::collection::vec(job(), 1..12),
        finish in prop::collection::vec(any::<bool>(), 12),
        policy in prop_oneof![Just(BINPACK), Just(SPREAD), Just(LOCKING), Just(EXCLUSIVE)],
        release in prop::collection::vec(any::<bool>(), 16),
        with_mig in any::<bool>(),
    ) {
        let locking = policy == LOCKING;
        let mut locked: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut c = cache();
        let mut memory = BTreeMap::new();
        for (i, gpus) in nodes.iter().enumerate() {
            node(&mut c, &format!("n{i}"), gpus);
            for (g, m) in gpus.iter().enumerate() {
                memory.insert(format!("GPU-n{i}-{g}"), (*m, 4));
            }
        }
        // A node of two GPUs cut into MIG instances.
        if with_mig {
            mig_node(&mut c, "m");
            c.apply(Event::MigGeometries(
                tephra_scheduler::model::mig::KnownGeometries::parse(GEOMETRIES).unwrap(),
            ))
            .unwrap();
            for g in 0..2 {
                memory.insert(format!("GPU-m-{g}"), (81920, 10));
            }
        }
        let mut sizes = BTreeMap::new();
        for (i, (pods, number, mib, cores)) in jobs.iter().enumerate() {
            let mut r = role("w", *pods, *number, *mib, *cores);
            // Every other job's pods match the exclusion rule (of the EXCLUSIVE configuration).
            if i % 2 == 1 {
                r.rules.labels = [("app".to_string(), "llm".to_string())].into();
            }
            let j = GangJob::new(&format!("j{i}"), vec![r]).created(i as i64);
            sizes.insert(j.key(), (*pods, *number));
            add_job(&mut c, &j).unwrap();
        }
        // Pod → (its grants), as bound.
        let mut bound: BTreeMap<String, (String, Vec<tephra_scheduler::model::vgpu::Grant>)> =
            BTreeMap::new();
        for session in 0..4u64 {
            let d = schedule(c.snapshot(), config(policy), session as i64, session + 1);
            let mut per_job: BTreeMap<&str, u32> = BTreeMap::new();
            let mut per_node: BTreeMap<&str, u32> = BTreeMap::new();
            for b in &d.binds {
                *per_node.entry(b.node.as_str()).or_default() += 1;
                prop_assert_eq!(b.gpu_lock, locking);
                prop_assert!(!(locking && locked.contains(&b.node)), "{} bound while locked", b.node);
                *per_job.entry(b.job.as_str()).or_default() += 1;
                let grants = b.gpus.as_ref().expect("a vGPU pod is bound with its GPUs");
                let (_, number) = sizes[&b.job];
                let list: Vec<_> = grants.all().cloned().collect();
                prop_assert_eq!(list.len() as u32, number);
                let distinct: std::collections::BTreeSet<&str> =
                    list.iter().map(|g| g.uuid.as_str()).collect();
                prop_assert_eq!(distinct.len(), list.len(), "one container, distinct GPUs");
                bound.insert(b.task.clone(), (b.job.clone(), list));
            }
            for (job, n) in per_job {
                prop_assert_eq!(n, sizes[job].0, "gang {} bound whole", job);
            }
            if locking {
                for (node, n) in &per_node {
                    prop_assert_eq!(*n, 1, "{} took {} slices under one lock", node, n);
                    locked.insert(node.to_string());
                }
            }
            apply_binds(&mut c, &d).unwrap();
            // The device plugin allocates some of the pods bound: their nodes' locks go.
            for (i, node) in locked.clone().iter().enumerate() {
                if release[(i + session as usize) % release.len()] {
                    set_lock(&mut c, node, None);
                    locked.remove(node);
                }
            }
            // Usage of every GPU by the pods bound now; a MIG GPU's instances each held once,
            // all of one group.
            let mut used: BTreeMap<&str, (u32, u64, u32)> = BTreeMap::new();
            let mut instances: BTreeMap<&str, Vec<(&str, u32)>> = BTreeMap::new();
            // The pods matching the exclusion rule on each GPU.
            let mut matching: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
            for (pod, (job, grants)) in &bound {
                let i: usize = job.trim_start_matches("default/j").parse().unwrap();
                for g in grants {
                    if i % 2 == 1 {
                        let gpu = g.uuid.split('[').next().unwrap_or_default();
                        matching.entry(gpu).or_default().insert(pod.as_str());
                    }
                    let gpu = match tephra_scheduler::model::mig::parse_instance_id(&g.uuid) {
                        Some((gpu, group, position)) => {
                            instances.entry(gpu).or_default().push((group, position));
                            gpu
                        }
                        None => g.uuid.as_str(),
                    };
                    let u = used.entry(gpu).or_default();
                    u.0 += 1;
                    u.1 += g.memory;
                    u.2 += g.cores;
                }
            }
            if policy == EXCLUSIVE {
                for (gpu, pods) in &matching {
                    prop_assert!(pods.len() <= 1, "{} shared by pods of one rule: {:?}", gpu, pods);
                }
            }
            for (gpu, list) in instances {
                let groups: std::collections::BTreeSet<&str> = list.iter().map(|(g, _)| *g).collect();
                prop_assert_eq!(groups.len(), 1, "{} cut by two geometries: {:?}", gpu, list);
                let distinct: std::collections::BTreeSet<u32> = list.iter().map(|(_, p)| *p).collect();
                prop_assert_eq!(distinct.len(), list.len(), "{} gave an instance twice: {:?}", gpu, list);
            }
            for (uuid, (pods, mib, cores)) in used {
                let (capacity, split) = memory[uuid];
                prop_assert!(pods <= split, "{uuid}: {pods} pods");
                prop_assert!(mib <= capacity, "{uuid}: {mib} MiB");
                prop_assert!(cores <= 100, "{uuid}: {cores} cores");
            }
            // Some jobs finish: their pods leave, and the GPUs they held are free again.
            let done: Vec<String> = bound
                .iter()
                .filter(|(_, (job, _))| {
                    let i: usize = job.trim_start_matches("default/j").parse().unwrap();
                    finish[i % finish.len()] && session % 2 == 1
                })
                .map(|(p, _)| p.clone())
                .collect();
            for p in done {
                let name = p.trim_start_matches("default/").to_string();
                c.apply(Event::PodDelete { namespace: "default".into(), name }).unwrap();
                bound.remove(&p);
            }
        }
    }
}
