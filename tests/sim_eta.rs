//! Expected start times measured in the simulator (`--eta-every`): with every job known when
//! the forecast runs and exact run times, each waiting job's predicted start is exactly when it
//! starts; with run times off by up to ±50 % the forecast errs, and says by how much.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tephra_sim::eta::EtaOptions;
use tephra_sim::{RunOptions, Scenario};

/// Twenty gangs of one to three whole nodes on four nodes, all submitted within 20 ms, with
/// varied run times: most wait.
fn scenario() -> Scenario {
    let text = r#"
fleet:
  clusters:
    - name: east
      nodePools: [{name: gpu, count: 4, capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}]
queues: [{name: ml, weight: 1}]
workload:
  generate:
    - count: 20
      arrival: {every: 1ms}
      queue: {ml: 1}
      template:
        name: train
        tasks:
          - name: worker
            replicas: {uniform: [1, 3]}
            resources: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}
            duration: {uniform: [20m, 3h]}
run: {seed: 11, podStartDelay: 5s}
"#;
    Scenario::parse(text, "eta.yaml", &common::repo_root()).unwrap()
}

fn eta(noise: f64) -> tephra_sim::eta::EtaReport {
    let opts = RunOptions {
        eta: Some(EtaOptions {
            every_ms: 60_000,
            noise,
        }),
        ..RunOptions::default()
    };
    let report = tephra_sim::run(&scenario(), opts, &mut |_| {}, &mut |_| {}).unwrap();
    common::assert_clean(&report);
    assert_eq!(report.jobs.completed, 20);
    report.eta.expect("an eta section")
}

#[test]
fn with_every_job_known_and_exact_run_times_each_start_is_predicted_exactly() {
    let e = eta(0.0);
    assert!(e.compared >= 10, "most jobs waited: {e:?}");
    assert_eq!((e.median_error_s, e.p90_error_s), (0.0, 0.0), "{e:?}");
    assert_eq!(e.not_within, 0);
}

#[test]
fn with_run_times_off_by_half_the_forecast_errs_and_says_so() {
    let e = eta(0.5);
    assert!(e.compared >= 10, "{e:?}");
    assert!(e.p90_error_s > 0.0, "{e:?}");
}
