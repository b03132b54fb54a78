//! Node and pod affinity (predicates and nodeorder), queue node groups (nodegroup) and
//! PodDisruptionBudgets (pdb), with Kubernetes' and Volcano's meaning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{
    Cluster, LabelSelector, Labels, Namespaces, NodeGroups, PdbSpec, PodRules, PodTerm, QueueSpec,
    Requirement, SelectorOp, Weighted,
};
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes, apply_binds};
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

const NODE: &[(&str, &str)] = &[("cpu", "32"), ("memory", "128Gi"), ("pods", "110")];
const HOST: &str = "kubernetes.io/hostname";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn select(app: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: labels(&[("app", app)]),
        expressions: Vec::new(),
    })
}

fn term(app: &str, key: &str) -> PodTerm {
    PodTerm {
        selector: select(app),
        topology_key: key.into(),
        namespaces: Namespaces::Own,
    }
}

/// Nodes `a-<i>` in zone `a` and `b-<i>` in zone `b`, each with its own hostname label.
fn zones(per_zone: usize) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    for zone in ["a", "b"] {
        for i in 0..per_zone {
            let host = format!("{zone}-{i}");
            add_nodes(
                &mut c,
                "east",
                &host,
                1,
                NODE,
                &[("zone", zone), (HOST, host.as_str())],
            )
            .unwrap();
        }
    }
    c
}

fn run_with(c: &Cache, config: &str) -> Decisions {
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::parse(config).unwrap()),
        0,
        1,
    )
}

fn run(c: &Cache) -> Decisions {
    run_with(c, DEFAULT_CONFIG)
}

fn nodes_of(d: &Decisions, job: &str) -> Vec<String> {
    d.binds
        .iter()
        .filter(|b| b.job == job)
        .map(|b| b.node.clone())
        .collect()
}

fn small(name: &str, replicas: u32, rules: PodRules) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new(name, replicas, &[("cpu", "1"), ("memory", "1Gi")]).rules(rules)],
    )
}

#[test]
fn required_anti_affinity_by_hostname_puts_each_replica_on_its_own_node() {
    let mut c = zones(2);
    let rules = PodRules {
        labels: labels(&[("app", "web")]),
        anti_affinity: vec![term("web", HOST)],
        ..PodRules::default()
    };
    add_job(&mut c, &small("web", 4, rules)).unwrap();
    let nodes: BTreeSet<String> = nodes_of(&run(&c), "default/web").into_iter().collect();
    assert_eq!(
        nodes.len(),
        4,
        "four replicas on four distinct nodes: {nodes:?}"
    );
}

#[test]
fn a_gang_that_anti_affinity_cannot_spread_waits_and_says_why() {
    let mut c = zones(1);
    let rules = PodRules {
        labels: labels(&[("app", "web")]),
        anti_affinity: vec![term("web", HOST)],
        ..PodRules::default()
    };
    add_job(&mut c, &small("web", 3, rules)).unwrap();
    let d = run(&c);
    assert!(nodes_of(&d, "default/web").is_empty(), "no partial gang");
    let why = &d.event_for("default/web").unwrap().message;
    assert!(
        why.contains("didn't match pod anti-affinity rules"),
        "{why}"
    );
}

/// Runs a one-pod job with `rules` pinned to `zone` and binds it.
fn running_in_zone(c: &mut Cache, zone: &str, rules: PodRules) {
    let job = GangJob::new(
        "resident",
        vec![
            Role::new("r", 1, &[("cpu", "1")])
                .select("zone", zone)
                .rules(rules),
        ],
    );
    add_job(c, &job).unwrap();
    let d = run(c);
    apply_binds(c, &d).unwrap();
    c.clear_changed();
}

#[test]
fn required_affinity_follows_a_running_pod_into_its_zone() {
    let mut c = zones(2);
    running_in_zone(
        &mut c,
        "b",
        PodRules {
            labels: labels(&[("app", "db")]),
            ..PodRules::default()
        },
    );
    let rules = PodRules {
        labels: labels(&[("app", "api")]),
        affinity: vec![term("db", "zone")],
        ..PodRules::default()
    };
    add_job(&mut c, &small("api", 3, rules)).unwrap();
    let nodes = nodes_of(&run(&c), "default/api");
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n.starts_with("b-")), "{nodes:?}");
}

#[test]
fn affinity_to_its_own_group_lets_the_first_pod_choose_and_keeps_the_gang_together() {
    let mut c = zones(3);
    let rules = PodRules {
        labels: labels(&[("app", "ring")]),
        affinity: vec![term("ring", "zone")],
        ..PodRules::default()
    };
    add_job(&mut c, &small("ring", 4, rules)).unwrap();
    let nodes = nodes_of(&run(&c), "default/ring");
    assert_eq!(nodes.len(), 4);
    let zones: BTreeSet<char> = nodes.iter().filter_map(|n| n.chars().next()).collect();
    assert_eq!(zones.len(), 1, "one zone: {nodes:?}");
}

#[test]
fn a_running_pods_anti_affinity_keeps_newcomers_out_of_its_domain() {
    let mut c = zones(1);
    running_in_zone(
        &mut c,
        "a",
        PodRules {
            labels: labels(&[("app", "loner")]),
            anti_affinity: vec![term("noisy", "zone")],
            ..PodRules::default()
        },
    );
    let noisy = PodRules {
        labels: labels(&[("app", "noisy")]),
        ..PodRules::default()
    };
    add_job(&mut c, &small("noisy", 1, noisy)).unwrap();
    let nodes = nodes_of(&run(&c), "default/noisy");
    assert_eq!(nodes, ["b-0-0"], "zone a is kept free of noisy pods");
}

#[test]
fn predicate_pod_affinity_enable_false_turns_pod_affinity_off() {
    let mut c = zones(1);
    let rules = PodRules {
        labels: labels(&[("app", "web")]),
        anti_affinity: vec![term("web", HOST)],
        ..PodRules::default()
    };
    add_job(&mut c, &small("web", 3, rules)).unwrap();
    let config = DEFAULT_CONFIG.replace(
        "  - name: predicates\n",
        "  - name: predicates\n    arguments:\n      predicate.PodAffinityEnable: false\n",
    );
    assert_ne!(
        config, DEFAULT_CONFIG,
        "the default config names predicates"
    );
    assert_eq!(nodes_of(&run_with(&c, &config), "default/web").len(), 3);
}

#[test]
fn preferred_node_affinity_steers_pods_to_the_preferred_nodes() {
    let mut c = zones(2);
    let rules = PodRules {
        preferred_nodes: vec![Weighted {
            weight: 100,
            term: vec![Requirement {
                key: "zone".into(),
                op: SelectorOp::In,
                values: vec!["b".into()],
            }],
        }],
        ..PodRules::default()
    };
    add_job(&mut c, &small("pref", 2, rules)).unwrap();
    let nodes = nodes_of(&run(&c), "default/pref");
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.starts_with("b-")), "{nodes:?}");
}

const NODEGROUP: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: nodegroup
"#;

fn grouped() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "gpu",
        2,
        NODE,
        &[("volcano.sh/nodegroup-name", "gpu")],
    )
    .unwrap();
    add_nodes(
        &mut c,
        "east",
        "cpu",
        2,
        NODE,
        &[("volcano.sh/nodegroup-name", "cpu")],
    )
    .unwrap();
    add_nodes(&mut c, "east", "bare", 2, NODE, &[]).unwrap();
    c
}

fn queue_with_groups(name: &str, groups: NodeGroups) -> Event {
    Event::QueueUpsert(Box::new(QueueSpec {
        node_groups: Some(groups),
        ..QueueSpec::named(name)
    }))
}

#[test]
fn a_queue_with_a_required_node_group_uses_only_that_group() {
    let mut c = grouped();
    c.apply(queue_with_groups(
        "ml",
        NodeGroups {
            required: vec!["gpu".into()],
            ..NodeGroups::default()
        },
    ))
    .unwrap();
    add_job(&mut c, &small("train", 2, PodRules::default()).queue("ml")).unwrap();
    let nodes = nodes_of(&run_with(&c, NODEGROUP), "default/train");
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.starts_with("gpu-")), "{nodes:?}");
}

#[test]
fn strict_node_groups_refuse_unlabelled_nodes_and_queues_without_groups() {
    let mut c = grouped();
    add_job(&mut c, &small("plain", 1, PodRules::default())).unwrap();
    let d = run_with(&c, NODEGROUP);
    assert!(nodes_of(&d, "default/plain").is_empty());
    let why = &d.event_for("default/plain").unwrap().message;
    assert!(why.contains("node group label not found"), "{why}");
    assert!(why.contains("node group affinity not specified"), "{why}");
    let lenient = NODEGROUP.replace(
        "  - name: nodegroup\n",
        "  - name: nodegroup\n    arguments:\n      strict: false\n",
    );
    let nodes = nodes_of(&run_with(&c, &lenient), "default/plain");
    assert!(nodes.iter().all(|n| n.starts_with("bare-")), "{nodes:?}");
    assert_eq!(nodes.len(), 1);
}

#[test]
fn required_node_group_anti_affinity_keeps_a_queue_off_a_group() {
    let mut c = grouped();
    c.apply(queue_with_groups(
        "batch",
        NodeGroups {
            preferred: vec!["gpu".into(), "cpu".into()],
            anti_required: vec!["gpu".into()],
            ..NodeGroups::default()
        },
    ))
    .unwrap();
    add_job(&mut c, &small("etl", 2, PodRules::default()).queue("batch")).unwrap();
    let nodes = nodes_of(&run_with(&c, NODEGROUP), "default/etl");
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.starts_with("cpu-")), "{nodes:?}");
}

const PDB: &str = r#"actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: pdb
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"#;

/// One node holding `n` single-pod jobs labelled `app=cache`, and a budget allowing `allowed`
/// disruptions of them.
fn protected(n: usize, allowed: i32) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "n",
        1,
        &[("cpu", "8"), ("pods", "110")],
        &[],
    )
    .unwrap();
    for i in 0..n {
        let job = GangJob::new(
            &format!("cache-{i}"),
            vec![Role::new("c", 1, &[("cpu", "2")]).rules(PodRules {
                labels: labels(&[("app", "cache")]),
                ..PodRules::default()
            })],
        );
        add_job(&mut c, &job).unwrap();
        let d = run_with(&c, PDB);
        apply_binds(&mut c, &d).unwrap();
        c.clear_changed();
    }
    c.apply(Event::PdbUpsert(PdbSpec {
        namespace: "default".into(),
        name: "cache".into(),
        selector: select("cache"),
        disruptions_allowed: allowed,
        disrupted_pods: BTreeSet::new(),
    }))
    .unwrap();
    c
}

fn urgent(cpu: &str) -> GangJob {
    GangJob::new("urgent", vec![Role::new("u", 1, &[("cpu", cpu)])]).priority(1000)
}

#[test]
fn preemption_never_takes_a_pod_its_disruption_budget_protects() {
    let mut c = protected(4, 0);
    add_job(&mut c, &urgent("4")).unwrap();
    let d = run_with(&c, PDB);
    assert!(d.evictions.is_empty(), "{:?}", d.evictions);
}

#[test]
fn preemption_takes_no_more_victims_than_the_budget_allows() {
    let mut c = protected(4, 1);
    add_job(&mut c, &urgent("2")).unwrap();
    let d = run_with(&c, PDB);
    assert_eq!(d.evictions.len(), 1, "{:?}", d.evictions);
    let mut c = protected(4, 1);
    add_job(&mut c, &urgent("4")).unwrap();
    let d = run_with(&c, PDB);
    assert!(
        d.evictions.is_empty(),
        "two victims are needed and the budget allows one: {:?}",
        d.evictions
    );
}

/// Found by the fit differential against the real kube-scheduler (seed 10): a cordoned node
/// still takes a pod that tolerates the cordon's taint (`node.kubernetes.io/unschedulable`),
/// as kube-scheduler's NodeUnschedulable filter lets it (DaemonSets rely on it); others stay
/// off, saying the node was unschedulable.
#[test]
fn a_cordoned_node_takes_only_pods_that_tolerate_the_cordon() {
    use tephra_scheduler::model::{NodeSpec, Toleration};
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    let allocatable = tephra_scheduler::testing::resources(&mut c, NODE).unwrap();
    c.apply(Event::NodeUpsert(NodeSpec {
        gpus: Default::default(),
        gpu_lock: None,
        name: "cordoned".into(),
        cluster: "east".into(),
        labels: labels(&[(HOST, "cordoned")]),
        taints: Vec::new(),
        allocatable,
        unschedulable: true,
        ready: true,
    }))
    .unwrap();
    add_job(&mut c, &small("plain", 1, PodRules::default())).unwrap();
    let mut tolerant = small("tolerant", 1, PodRules::default());
    tolerant.roles[0].tolerations = vec![Toleration {
        exists: true,
        ..Toleration::default()
    }];
    add_job(&mut c, &tolerant).unwrap();
    let mut keyed = small("keyed", 1, PodRules::default());
    keyed.roles[0].tolerations = vec![Toleration {
        key: "node.kubernetes.io/unschedulable".into(),
        exists: true,
        ..Toleration::default()
    }];
    add_job(&mut c, &keyed).unwrap();
    let d = run(&c);
    assert!(nodes_of(&d, "default/plain").is_empty());
    assert_eq!(nodes_of(&d, "default/tolerant").len(), 1);
    assert_eq!(nodes_of(&d, "default/keyed").len(), 1);
    let why = &d.event_for("default/plain").unwrap().message;
    assert!(why.contains("were unschedulable"), "{why}");
}
