//! The `tephra` command line, run as a user would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tephra(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tephra"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("tephra runs")
}

#[test]
fn validate_accepts_the_examples_and_skips_core_kinds() {
    let out = tephra(&[
        "validate",
        "examples/podgroup-with-pods.yaml",
        "examples/queues-hierarchical.yaml",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(
        "ok       examples/podgroup-with-pods.yaml (document 0, PodGroup ray-cluster-a)"
    ));
    assert!(stdout.contains(
        "skipped  examples/podgroup-with-pods.yaml (document 1, Pod ray-cluster-a-head)"
    ));
}

#[test]
fn validate_refuses_a_broken_manifest_with_the_field_and_exits_non_zero() {
    let out = tephra(&[
        "validate",
        "tests/broken/job-minavailable-exceeds-replicas.yaml",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        stdout.contains("spec.minAvailable: spec.minAvailable must not exceed the total replicas"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 manifest(s) refused"));
}

#[test]
fn validate_names_the_file_it_cannot_read() {
    let out = tephra(&["validate", "no/such/file.yaml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading no/such/file.yaml"));
}

#[test]
fn crds_prints_every_crd_as_yaml() {
    let out = tephra(&["crds"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in [
        "jobs.batch.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "clusters.cluster.tephra.io",
        "propagationpolicies.policy.tephra.io",
        "resourcebindings.work.tephra.io",
    ] {
        assert!(stdout.contains(&format!("name: {name}")), "missing {name}");
    }
}
