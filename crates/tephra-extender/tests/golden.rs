//! Golden JSON: requests in the exact shapes kube-scheduler sends (`nodeCacheCapable` true:
//! `NodeNames`; false: full `Nodes`; preemption victims by UID or whole), and the responses it
//! expects, compared field for field. A request's `"@file.json"` string stands for that file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tephra_extender::index::Index;
use tephra_extender::verbs;
use tephra_extender::wire::{ExtenderArgs, ExtenderPreemptionArgs};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn load(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    inline(&mut v);
    v
}

fn inline(v: &mut Value) {
    match v {
        Value::String(s) if s.starts_with('@') => *v = load(&s[1..]),
        Value::Object(m) => m.values_mut().for_each(inline),
        Value::Array(a) => a.iter_mut().for_each(inline),
        _ => {}
    }
}

/// A member where gang `ml/train` (minMember 2) runs on n2 and n3, and a lone pod on n1.
fn member() -> Index {
    let mut index = Index::default();
    for (name, ns, uid, node, group) in [
        ("train-0", "ml", "u-gang-a", "n2", Some("train")),
        ("train-1", "ml", "u-gang-b", "n3", Some("train")),
        ("other", "default", "u-other", "n1", None),
    ] {
        let mut annotations = serde_json::Map::new();
        if let Some(g) = group {
            annotations.insert("scheduling.k8s.io/group-name".into(), g.into());
            annotations.insert("tephra.io/gang-min-member".into(), "2".into());
        }
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns, "uid": uid, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        index.upsert_pod(&pod);
    }
    index
}

fn check(case: &str, answer: Value) {
    let want = load(&format!("{case}.response.json"));
    assert_eq!(
        answer, want,
        "{case}: the answer differs from the golden response"
    );
}

fn filter(case: &str) {
    let text = load(&format!("{case}.request.json")).to_string();
    let args: ExtenderArgs = serde_json::from_str(&text).unwrap();
    check(
        case,
        serde_json::to_value(verbs::filter(&args, &member())).unwrap(),
    );
}

#[test]
fn filter_with_node_names_passes_only_the_planned_node() {
    filter("filter-node-names");
}

#[test]
fn filter_with_full_nodes_answers_with_full_nodes() {
    filter("filter-nodes");
}

#[test]
fn filter_fails_every_node_unresolvably_for_a_gang_tephra_has_not_planned() {
    filter("filter-gang-waiting");
}

#[test]
fn filter_passes_a_pod_tephra_does_not_manage_untouched() {
    filter("filter-unmanaged");
}

#[test]
fn filter_without_a_pod_answers_an_error() {
    filter("filter-no-pod");
}

#[test]
fn prioritize_gives_the_planned_node_the_top_score() {
    let text = load("prioritize.request.json").to_string();
    let args: ExtenderArgs = serde_json::from_str(&text).unwrap();
    check(
        "prioritize",
        serde_json::to_value(verbs::prioritize(&args, &member())).unwrap(),
    );
}

#[test]
fn preempt_by_uid_drops_nodes_whose_victims_would_break_a_running_gang() {
    let args: ExtenderPreemptionArgs =
        serde_json::from_value(load("preempt-meta.request.json")).unwrap();
    check(
        "preempt-meta",
        serde_json::to_value(verbs::preempt(&args, &member())).unwrap(),
    );
}

#[test]
fn preempt_with_whole_victims_answers_by_uid() {
    let args: ExtenderPreemptionArgs =
        serde_json::from_value(load("preempt-victims.request.json")).unwrap();
    check(
        "preempt-victims",
        serde_json::to_value(verbs::preempt(&args, &member())).unwrap(),
    );
}

#[test]
fn a_malformed_request_names_the_field() {
    let err = serde_json::from_str::<ExtenderArgs>(r#"{"Pod": {"metadata": 7}, "NodeNames": []}"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("metadata") || err.contains("ObjectMeta"),
        "{err}"
    );
}
