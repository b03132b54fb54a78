//! Volcano parity of the API: what Volcano accepts is admitted, what it refuses is refused with a
//! message that names the field.
//!
//! - `tests/volcano/valid/`: manifests Volcano accepts, one case each;
//! - `tests/volcano/invalid/`: manifests Volcano refuses (by schema or webhook), each with the
//!   `# expect:` lines its refusal must contain;
//! - `tests/volcano/integrations/`: the PodGroup and pods that Kubeflow training-operator,
//!   KubeRay, the Spark operator and the MPI operator create;
//! - `../shared/volcano-corpus`, when present: Volcano's own examples and user-guide manifests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::Value;
use tephra_api::admission::{Admission, AdmissionError};

/// Why the API server (schema and CEL) or the job controller's own checks refuse `doc`, or
/// `None` if it is accepted. Core kinds must parse as their Kubernetes types.
fn refusal(admission: &Admission, doc: &Value) -> Option<String> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    if doc.get("apiVersion").and_then(Value::as_str) == Some("v1") {
        let parsed = match kind {
            "Pod" => serde_json::from_value::<Pod>(doc.clone()).map(|_| ()),
            "Namespace" => serde_json::from_value::<Namespace>(doc.clone()).map(|_| ()),
            other => panic!("no check for core kind {other}"),
        };
        return parsed.err().map(|e| e.to_string());
    }
    let problems = match admission.admit(doc) {
        Err(e) => return Some(e.to_string()),
        Ok(_) if kind == "Job" => {
            tephra_api::checks::job(&serde_json::from_value(doc.clone()).expect("parses"))
        }
        Ok(_) if kind == "Queue" => {
            tephra_api::checks::queue(&serde_json::from_value(doc.clone()).expect("parses"))
        }
        Ok(_) => return None,
    };
    (!problems.is_empty()).then(|| {
        problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

fn dir(name: &str) -> PathBuf {
    common::repo_root().join("tests/volcano").join(name)
}

#[test]
fn every_manifest_volcano_accepts_is_admitted() {
    let admission = Admission::new().unwrap();
    let mut checked = 0;
    for sub in ["valid", "integrations"] {
        for path in common::yaml_files(&dir(sub)) {
            for (i, doc) in common::yaml_documents(&path).iter().enumerate() {
                if let Some(why) = refusal(&admission, doc) {
                    panic!("{} document {i}: refused: {why}", path.display());
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} documents");
}

#[test]
fn every_manifest_volcano_refuses_is_refused_naming_the_field() {
    let admission = Admission::new().unwrap();
    let mut failures = Vec::new();
    let files = common::yaml_files(&dir("invalid"));
    assert!(files.len() >= 20, "tests/volcano/invalid lost files");
    for path in files {
        let docs = common::yaml_documents(&path);
        assert_eq!(docs.len(), 1, "{}: one manifest per file", path.display());
        match refusal(&admission, &docs[0]) {
            None => failures.push(format!("{}: was admitted", path.display())),
            Some(text) => {
                for want in common::expectations(&path) {
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
fn a_queue_with_a_namespace_is_admitted_with_a_warning() {
    let admission = Admission::new().unwrap();
    let doc = &common::yaml_documents(&dir("valid").join("queue-with-namespace.yaml"))[0];
    let admitted = admission.admit(doc).expect("admitted");
    assert!(
        admitted.warnings[0].contains("namespace \"team-a\" is ignored"),
        "{admitted:?}"
    );
}

/// Files of Volcano's corpus that Volcano itself refuses although they are not marked invalid
/// (mistakes in the user guide and in one example), with what the refusal must name. kubectl
/// validates strictly by default, so unknown fields are refused on a Volcano cluster too.
const VOLCANO_REFUSES_TOO: &[(&str, &str)] = &[
    // A volume needs either a claim or a claim name, not neither and not both.
    (
        "how_to_use_cdp_plugin__block2.yaml",
        "set either volumeClaim",
    ),
    (
        "how_to_use_cdp_plugin__block5.yaml",
        "set either volumeClaim",
    ),
    // Volcano's CRD checks a parent name against the DNS-1123 pattern, which "" fails.
    (
        "how_to_use_nodegroup_plugin__block23.yaml",
        "spec.parent: \"\" does not match the pattern",
    ),
    // `spec: ...` is an elision in the guide.
    (
        "how_to_use_cdp_plugin__block4.yaml",
        "spec: must be of type object",
    ),
    // guarantee's quantities belong under guarantee.resource.
    (
        "how_to_use_dra_quota__block2.yaml",
        "spec.guarantee.deviceclass/gpu.nvidia.com: unknown field",
    ),
    (
        "how_to_use_dra_quota__block3.yaml",
        "spec.guarantee.cores.deviceclass/hami-core-gpu.project-hami.io: unknown field",
    ),
    (
        "how_to_use_dra_quota__block7.yaml",
        "spec.guarantee.deviceclass/gpu.nvidia.com: unknown field",
    ),
    // `events` is a list.
    (
        "how_to_use_job_policy__block2.yaml",
        "spec.tasks[0].policies[0].events: must be of type array",
    ),
    // imagePullPolicy is a container field, not a pod field.
    (
        "how_to_use_job_ttl__block0.yaml",
        "template.spec.imagePullPolicy: unknown field",
    ),
    // The guide indents the Queue's spec under metadata.
    (
        "how_to_use_nodegroup_plugin__block1.yaml",
        "`spec` is indented under `metadata`",
    ),
    (
        "how_to_use_nodegroup_plugin__block14.yaml",
        "`spec` is indented under `metadata`",
    ),
    (
        "how_to_use_nodegroup_plugin__block15.yaml",
        "`spec` is indented under `metadata`",
    ),
    (
        "how_to_use_nodegroup_plugin__block16.yaml",
        "`spec` is indented under `metadata`",
    ),
    (
        "how_to_use_nodegroup_plugin__block17.yaml",
        "`spec` is indented under `metadata`",
    ),
    // A pod spec has priorityClassName, not priorityClass.
    (
        "elastic-job.yaml",
        "template.spec.priorityClass: unknown field",
    ),
];

fn corpus() -> Option<PathBuf> {
    let root = common::repo_root().join("../shared/volcano-corpus/volcano");
    root.is_dir().then_some(root)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// The documents of a corpus file that are Kubernetes objects, or `None` for files that are not
/// manifests (Go templates, benchmark case lists).
fn manifests(path: &Path) -> Option<Vec<Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    if text.contains("{{") {
        return None;
    }
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).ok()?;
    let docs: Vec<Value> = docs
        .into_iter()
        .filter(|d| d.get("apiVersion").is_some() && d.get("kind").is_some())
        .collect();
    (!docs.is_empty()).then_some(docs)
}

#[test]
fn volcanos_own_examples_are_admitted_or_refused_as_volcano_does() {
    let Some(root) = corpus() else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED (passes without running): ../shared/volcano-corpus is absent\n",
        );
        return;
    };
    let admission = Admission::new().unwrap();
    let mut files = Vec::new();
    for sub in ["example", "docs-extracted/manifests", "embedded", "staging"] {
        walk(&root.join(sub), &mut files);
    }
    files.sort();
    let mut failures = Vec::new();
    let (mut admitted, mut refused) = (0, 0);
    for path in &files {
        let Some(docs) = manifests(path) else {
            continue;
        };
        let shown = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        let file_name = path.file_name().unwrap().to_string_lossy().to_string();
        let meant_invalid = shown.contains("invalid") || shown.contains("webhook-deny");
        let known = VOLCANO_REFUSES_TOO
            .iter()
            .find(|(f, _)| *f == file_name)
            .map(|(_, why)| *why);
        let mut file_refusals = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            if doc.get("apiVersion").and_then(Value::as_str) == Some("v1") {
                continue;
            }
            match admission.admit(doc) {
                Err(AdmissionError::UnknownKind { .. }) => continue,
                _ => match refusal(&admission, doc) {
                    Some(why) => file_refusals.push(format!("document {i}: {why}")),
                    None => admitted += 1,
                },
            }
        }
        refused += file_refusals.len();
        match (meant_invalid, known, file_refusals.is_empty()) {
            (false, None, false) => {
                failures.push(format!("{shown}: refused: {}", file_refusals.join(" | ")))
            }
            (true, _, true) => {
                failures.push(format!("{shown}: Volcano refuses it, tephra admitted it"))
            }
            (false, Some(why), _) if !file_refusals.iter().any(|r| r.contains(why)) => {
                failures.push(format!(
                    "{shown}: Volcano refuses it; the refusal must name {why:?}, got: {}",
                    file_refusals.join(" | ")
                ));
            }
            _ => {}
        }
    }
    println!("corpus: {admitted} documents admitted, {refused} refused");
    assert!(admitted >= 50, "only {admitted} corpus documents admitted");
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
