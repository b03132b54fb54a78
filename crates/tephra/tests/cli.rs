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
        "ok       examples/podgroup-with-pods.yaml (document 2, PodGroup ray-cluster-a)"
    ));
    assert!(stdout.contains(
        "skipped  examples/podgroup-with-pods.yaml (document 3, Pod ray-cluster-a-head)"
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 manifest(s) or file(s) refused"));
}

#[test]
fn validate_names_the_file_it_cannot_read() {
    let out = tephra(&["validate", "no/such/file.yaml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading no/such/file.yaml"));
}

#[test]
fn validate_refuses_a_file_with_no_documents_and_names_it() {
    let dir = std::env::temp_dir().join(format!("tephra-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.yaml");
    std::fs::write(&empty, "# only a comment\n---\n").unwrap();
    let out = tephra(&["validate", empty.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("empty.yaml holds no YAML documents"),
        "{stderr}"
    );
}

#[test]
fn validate_refuses_a_job_whose_tasks_depend_on_each_other_in_a_cycle() {
    let out = tephra(&[
        "validate",
        "tests/volcano/invalid/job-depends-on-cycle.yaml",
    ]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("spec.tasks[0].dependsOn: tasks depend on each other in a cycle"),
        "{stdout}"
    );
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

#[test]
fn sim_runs_the_quickstart_and_writes_report_events_and_charts() {
    let out = std::env::temp_dir().join(format!("tephra-sim-cli-{}", std::process::id()));
    let out_s = out.to_string_lossy().to_string();
    let run = tephra(&[
        "sim",
        "examples/sim/quickstart.yaml",
        "--out",
        &out_s,
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains(
            "checker    0 over-commits, 0 partial gangs, 0 split gangs, 0 policy violations"
        ),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    for key in [
        "scenario",
        "seed",
        "simulated_s",
        "wall_s",
        "jobs",
        "pods",
        "invariants",
        "scheduler",
        "queues",
        "utilization",
        "fairness",
    ] {
        assert!(report.get(key).is_some(), "report.json lacks {key}");
    }
    assert_eq!(report["jobs"]["lost"], 0);
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert!(
        events
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
    );
    for chart in ["utilization.svg", "queue-share.svg", "wait-times.svg"] {
        let svg = std::fs::read_to_string(out.join(chart)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{chart}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sim_refuses_a_bad_scenario_with_file_line_and_field_and_runs_nothing() {
    let dir = std::env::temp_dir().join(format!("tephra-sim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {name: p, count: one, capacity: {cpu: \"4\"}}\n").unwrap();
    let out = dir.join("out");
    let run = tephra(&[
        "sim",
        &bad.to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
        "--quiet",
    ]);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("line 5"),
        "{stderr}"
    );
    assert!(
        !out.join("report.json").exists(),
        "a bad scenario is never half-run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_summary_reports_the_seed_used_the_failover_and_the_units_of_its_shares() {
    let out = std::env::temp_dir().join(format!("tephra-sim-seed-{}", std::process::id()));
    let out_s = out.to_string_lossy().to_string();
    let run = tephra(&[
        "sim",
        "examples/sim/quickstart.yaml",
        "--out",
        &out_s,
        "--quiet",
        "--seed",
        "7",
        "--explain",
        "default/train-0-0",
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert!(stdout.contains("(seed 7)"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["seed"], 7);
    // The quick start's one-hour outage of gpu-east, in the summary itself.
    assert!(
        stdout.contains("failover   1 fault(s): ")
            && stdout.contains("gpu-east         unreachable at  3h00m00s for 1h00m00s"),
        "{stdout}"
    );
    assert!(stdout.contains("GPU deserved  GPU actual"), "{stdout}");
    // A CPU-only queue has no GPU share to show.
    let batch = stdout.lines().find(|l| l.starts_with("batch ")).unwrap();
    assert!(batch.trim_end().ends_with("-           -"), "{batch}");
    // The explanation's times read as the summary's, not as raw seconds.
    let explain: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "explain")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(!explain.is_empty(), "{stdout}");
    for l in explain {
        let at = l.split_whitespace().next().unwrap();
        assert!(
            !at.contains('.') && at.ends_with('s') || l.contains("at the end"),
            "{l}"
        );
    }
    // The charts: no GPU line for the CPU-only cluster or queue, the outage shaded, steps.
    let util = std::fs::read_to_string(out.join("utilization.svg")).unwrap();
    assert!(util.contains(">gpu-east GPU<") && !util.contains(">cpu-east GPU<"));
    assert!(util.contains(">cpu-east CPU<"));
    assert!(
        util.contains(">gpu-east unreachable<"),
        "the outage is not shaded"
    );
    let share = std::fs::read_to_string(out.join("queue-share.svg")).unwrap();
    // The CPU-only queue is drawn by its share of the CPUs, without a GPU deserved line.
    assert!(share.contains(">research actual<") && share.contains(">batch actual (CPU)<"));
    assert!(!share.contains(">batch deserved<"));
    // Waits by queue: a colour per queue.
    let waits = std::fs::read_to_string(out.join("wait-times.svg")).unwrap();
    assert!(
        waits.contains(">research<") && waits.contains(">batch<"),
        "{waits}"
    );
    // The summary says why the moved jobs took as long as they did, and names each file.
    let fault = stdout
        .lines()
        .find(|l| l.contains("gpu-east         unreachable"))
        .unwrap();
    assert!(fault.contains("(the last, "), "{fault}");
    for file in [
        "report.json",
        "events.jsonl",
        "utilization.svg",
        "queue-share.svg",
        "wait-times.svg",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with(file) && l.len() > file.len() + 20),
            "the summary names {file} and what to read in it: {stdout}"
        );
    }
    for line in util.lines().filter(|l| l.contains("<polyline")) {
        let pts: Vec<(f64, f64)> = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .trim_end_matches("\"/>")
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        for w in pts.windows(2) {
            assert!(
                w[0].0 == w[1].0 || w[0].1 == w[1].1,
                "a diagonal between samples: {:?}",
                w
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Each command group's one-line help names every one of its subcommands.
#[test]
fn help_names_every_subcommand_of_each_group() {
    let top = String::from_utf8_lossy(&tephra(&["--help"]).stdout).to_string();
    let commands = |help: &str| -> Vec<(String, String)> {
        help.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| {
                let l = l.trim();
                let (name, about) = l.split_once(char::is_whitespace)?;
                Some((name.to_string(), about.trim().to_string()))
            })
            .filter(|(n, _)| n != "help")
            .collect()
    };
    let groups = commands(&top);
    assert!(groups.len() >= 10, "{top}");
    for (group, about) in groups {
        let help = String::from_utf8_lossy(&tephra(&[&group, "--help"]).stdout).to_string();
        for (sub, _) in commands(&help) {
            assert!(
                about.contains(&sub),
                "`tephra --help` says of {group}: \"{about}\", which omits its subcommand {sub}"
            );
        }
    }
}
