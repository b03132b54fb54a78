//! The scheduler's own timers in the simulator: a job whose lot changes only because time
//! passes (its SLA runs out) gets a session when that happens, as the runtime's periodic
//! sessions would give it, though nothing else happens in between.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tephra_sim::{RunOptions, Scenario};

const SCENARIO: &str = r#"
fleet:
  clusters:
    - name: a
      nodePools:
        - {name: p, count: 1, capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
scheduler:
  config:
    actions: "enqueue, allocate, backfill"
    tiers:
      - plugins:
          - name: priority
          - name: gang
          - name: sla
            arguments: {sla-waiting-time: 1m}
      - plugins:
          - name: overcommit
          - name: drf
          - name: predicates
          - name: proportion
          - name: nodeorder
workload:
  jobs:
    - name: hog
      submitAt: 0s
      tasks:
        - {name: w, replicas: 1, resources: {cpu: "8", memory: 1Gi}, duration: 10h}
    - name: waits
      submitAt: 10s
      tasks:
        - {name: w, replicas: 1, resources: {cpu: "4", memory: 1Gi}, duration: 1m}
"#;

#[test]
fn a_job_whose_sla_runs_out_is_admitted_then_though_nothing_else_happens() {
    let s = Scenario::parse(SCENARIO, "timers.yaml", Path::new(".")).unwrap();
    let report = tephra_sim::run(
        &s,
        RunOptions {
            explain: Some("default/waits".into()),
            ..RunOptions::default()
        },
        &mut |_| {},
        &mut |_| {},
    )
    .unwrap();
    let admitted = report
        .explain
        .iter()
        .find(|l| l.contains("Pending -> Inqueue"))
        .unwrap_or_else(|| panic!("never admitted: {:#?}", report.explain));
    // The line starts with the time, as the summary writes durations (`1m11s`).
    let clock = admitted.split_whitespace().next().unwrap();
    let mut at = 0.0;
    let mut digits = String::new();
    for c in clock.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400.0,
            'h' => 3600.0,
            'm' => 60.0,
            's' => 1.0,
            other => panic!("unit {other} in {clock}"),
        };
        at += digits.parse::<f64>().unwrap() * unit;
        digits.clear();
    }
    // Submitted at 10s with a 1m SLA: admitted at its SLA (the next period), not when the hog
    // ends ten hours later.
    assert!((70.0..=72.0).contains(&at), "admitted at {at}s: {admitted}");
}
