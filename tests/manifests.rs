//! The API is a contract: every shipped example is admitted and parses into the Rust types, and
//! every deliberately broken manifest is refused with a message that names the field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tephra_api::admission::Admission;
use tephra_api::{Cluster, Job, PodGroup, PropagationPolicy, Queue, ResourceBinding};

/// Parses a document into its Rust type and checks that serializing it back loses nothing the
/// user wrote (schema defaults may be added).
fn round_trip<T: DeserializeOwned + serde::Serialize>(doc: &Value, origin: &str) {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{origin}: does not parse into the Rust type: {e}"));
    let back = serde_json::to_value(&typed).expect("serializes");
    assert_contains(doc, &back, origin, "");
}

/// Every field of `written` is present with the same value in `got`.
fn assert_contains(written: &Value, got: &Value, origin: &str, path: &str) {
    match (written, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (key, wv) in w {
                match g.get(key) {
                    Some(gv) => assert_contains(wv, gv, origin, &format!("{path}.{key}")),
                    // A value equal to the field's zero default may be omitted on output.
                    None => assert!(is_zero(wv), "{origin}: field {path}.{key} was dropped"),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            assert_eq!(w.len(), g.len(), "{origin}: {path} changed length");
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                assert_contains(wv, gv, origin, &format!("{path}[{i}]"));
            }
        }
        // Quantities written as numbers come back as strings, as with the Kubernetes types.
        (Value::Number(n), Value::String(s)) => assert_eq!(n.to_string(), *s, "{origin}: {path}"),
        (w, g) => assert_eq!(w, g, "{origin}: {path}"),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn parse_typed(doc: &Value, origin: &str) {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    match kind {
        "Job" => round_trip::<Job>(doc, origin),
        "PodGroup" => round_trip::<PodGroup>(doc, origin),
        "Queue" => round_trip::<Queue>(doc, origin),
        "Cluster" => round_trip::<Cluster>(doc, origin),
        "PropagationPolicy" => round_trip::<PropagationPolicy>(doc, origin),
        "ResourceBinding" => round_trip::<ResourceBinding>(doc, origin),
        other => panic!("{origin}: no Rust type for kind {other}"),
    }
}

/// A KubeSchedulerConfiguration example: its extender entry calls `tephra extender`'s verbs,
/// may not be skipped, and gives the barrier time to answer first.
fn check_extender_config(doc: &Value, origin: &str) {
    let ext = doc
        .pointer("/extenders/0")
        .unwrap_or_else(|| panic!("{origin}: no extenders"));
    for (field, want) in [
        ("filterVerb", "filter"),
        ("prioritizeVerb", "prioritize"),
        ("preemptVerb", "preempt"),
        ("bindVerb", "bind"),
    ] {
        assert_eq!(ext[field], want, "{origin}: {field}");
    }
    assert_eq!(
        ext["ignorable"], false,
        "{origin}: the extender must not be ignorable"
    );
    assert!(
        ext["urlPrefix"]
            .as_str()
            .is_some_and(|u| u.starts_with("http"))
    );
    let timeout = ext["httpTimeout"].as_str().unwrap_or("30s");
    let secs: u64 = timeout.trim_end_matches('s').parse().unwrap();
    assert!(
        secs > 20,
        "{origin}: httpTimeout {timeout} must exceed the 20s bind timeout"
    );
}

#[test]
fn every_example_is_admitted_and_parses_into_the_rust_types() {
    let admission = Admission::new().expect("CRDs generate");
    let examples = common::yaml_files(&common::repo_root().join("examples"));
    assert!(examples.len() >= 7, "examples/ lost files: {examples:?}");
    let mut kinds_seen = std::collections::BTreeSet::new();
    for path in &examples {
        for (i, doc) in common::yaml_documents(path).iter().enumerate() {
            let origin = format!("{} document {i}", path.display());
            let api_version = doc
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            kinds_seen.insert(kind.to_string());
            if api_version == "v1" && kind == "Pod" {
                serde_json::from_value::<Pod>(doc.clone())
                    .unwrap_or_else(|e| panic!("{origin}: not a valid Pod: {e}"));
                continue;
            }
            if api_version == "v1" && kind == "ConfigMap" {
                // A KubeSchedulerConfiguration for a member's own kube-scheduler.
                let text = doc
                    .pointer("/data/kube-scheduler-config.yaml")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| {
                        panic!("{origin}: a ConfigMap example is a kube-scheduler config")
                    });
                let config: Value = serde_saphyr::from_str(text).unwrap();
                assert_eq!(config["kind"], "KubeSchedulerConfiguration", "{origin}");
                check_extender_config(&config, &origin);
                continue;
            }
            if api_version == "v1" && kind == "Namespace" {
                serde_json::from_value::<Namespace>(doc.clone())
                    .unwrap_or_else(|e| panic!("{origin}: not a valid Namespace: {e}"));
                continue;
            }
            if api_version == "scheduling.k8s.io/v1" && kind == "PriorityClass" {
                serde_json::from_value::<k8s_openapi::api::scheduling::v1::PriorityClass>(
                    doc.clone(),
                )
                .unwrap_or_else(|e| panic!("{origin}: not a valid PriorityClass: {e}"));
                continue;
            }
            if api_version == "scheduling.k8s.io/v1beta1" && kind == "PodGroup" {
                // Kubernetes' own gang (the Workload API): a gang of at least one pod.
                let g: k8s_openapi::api::scheduling::v1beta1::PodGroup =
                    serde_json::from_value(doc.clone())
                        .unwrap_or_else(|e| panic!("{origin}: not a valid PodGroup: {e}"));
                let gang = g.spec.scheduling_policy.gang.map(|g| g.min_count);
                assert!(gang.is_some_and(|n| n >= 1), "{origin}: a gang of {gang:?}");
                continue;
            }
            if api_version == "v1" && kind == "PersistentVolumeClaim" {
                serde_json::from_value::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(
                    doc.clone(),
                )
                .unwrap_or_else(|e| panic!("{origin}: not a valid PersistentVolumeClaim: {e}"));
                continue;
            }
            if api_version == "resource.k8s.io/v1" && kind == "ResourceClaimTemplate" {
                let t: k8s_openapi::api::resource::v1::ResourceClaimTemplate =
                    serde_json::from_value(doc.clone()).unwrap_or_else(|e| {
                        panic!("{origin}: not a valid ResourceClaimTemplate: {e}")
                    });
                // Its selectors compile as the scheduler compiles them.
                let claim = k8s_openapi::api::resource::v1::ResourceClaim {
                    metadata: Default::default(),
                    spec: t.spec.and_then(|s| s.spec),
                    status: None,
                };
                tephra_controllers::dra::claim(&claim).unwrap_or_else(|e| panic!("{origin}: {e}"));
                continue;
            }
            if let Err(err) = admission.admit(doc) {
                panic!("{origin}: refused: {err}");
            }
            parse_typed(doc, &origin);
        }
    }
    for kind in [
        "Job",
        "PodGroup",
        "Queue",
        "Cluster",
        "PropagationPolicy",
        "Pod",
    ] {
        assert!(kinds_seen.contains(kind), "no example shows a {kind}");
    }
}

#[test]
fn every_broken_manifest_is_refused_with_its_message() {
    let admission = Admission::new().expect("CRDs generate");
    let broken = common::yaml_files(&common::repo_root().join("tests/broken"));
    assert!(broken.len() >= 30, "tests/broken lost files");
    let mut failures = Vec::new();
    for path in &broken {
        let docs = common::yaml_documents(path);
        assert_eq!(docs.len(), 1, "{}: one manifest per file", path.display());
        match admission.admit(&docs[0]) {
            Ok(_) => failures.push(format!("{}: was admitted", path.display())),
            Err(err) => {
                let text = err.to_string();
                for want in common::expectations(path) {
                    if !text.contains(&want) {
                        failures.push(format!(
                            "{}: message lacks {want:?}\n    got: {text}",
                            path.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn a_volcano_job_without_queue_or_max_retry_gets_volcano_defaults() {
    let doc = serde_json::json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "n"},
        "spec": {"tasks": [{"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}
    });
    Admission::new().unwrap().admit(&doc).expect("admitted");
    let job: Job = serde_json::from_value(doc).unwrap();
    assert_eq!(job.spec.queue, "default");
    assert_eq!(job.spec.max_retry, 3);
    assert_eq!(job.spec.total_replicas(), 2);
}

#[test]
#[ignore = "prints every broken manifest's message; run with --ignored --nocapture to review them"]
fn show_broken_messages() {
    let admission = Admission::new().unwrap();
    for path in common::yaml_files(&common::repo_root().join("tests/broken")) {
        let doc = &common::yaml_documents(&path)[0];
        println!(
            "{}: {}",
            path.file_name().unwrap().to_string_lossy(),
            admission.admit(doc).unwrap_err()
        );
    }
}

/// `kubectl apply -f examples/<file>` on a fresh cluster must work as typed: every namespace an
/// example uses other than `default` is created by the same file, ahead of its use.
#[test]
fn every_example_creates_the_namespaces_it_uses() {
    for path in common::yaml_files(&common::repo_root().join("examples")) {
        let mut created = std::collections::BTreeSet::from(["default".to_string()]);
        for (i, doc) in common::yaml_documents(&path).iter().enumerate() {
            if doc.get("kind").and_then(Value::as_str) == Some("Namespace") {
                let name = doc.pointer("/metadata/name").and_then(Value::as_str);
                created.insert(name.unwrap_or_default().to_string());
                continue;
            }
            if let Some(ns) = doc.pointer("/metadata/namespace").and_then(Value::as_str) {
                assert!(
                    created.contains(ns),
                    "{} document {i}: namespace {ns:?} is used before the file creates it",
                    path.display()
                );
            }
        }
    }
}

/// An example applied to `tephra dev` adds to its fleet; it changes a Queue the dev fleet starts
/// with (`examples/dev/fleet.yaml`) only if a line of its opening comment says it ("changes
/// `research`").
#[test]
fn no_example_rewrites_a_dev_fleet_queue_without_saying_so_first() {
    let root = common::repo_root();
    let fleet: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root.join("examples/dev/fleet.yaml")).unwrap(),
    )
    .unwrap();
    let dev_queues: Vec<String> = fleet["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|q| q["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        dev_queues.contains(&"research".to_string()),
        "{dev_queues:?}"
    );
    for path in common::yaml_files(&root.join("examples")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let opening: String = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        for doc in common::yaml_documents(&path) {
            if doc["kind"] != "Queue" {
                continue;
            }
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            if dev_queues.iter().any(|q| q == name) {
                let said = opening
                    .lines()
                    .any(|l| l.contains("changes") && l.contains(&format!("`{name}`")));
                assert!(
                    said,
                    "{} changes the dev fleet's queue {name} without saying so in its first lines",
                    path.display()
                );
            }
        }
    }
}
