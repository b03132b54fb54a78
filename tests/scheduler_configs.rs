//! Every scheduler configuration shipped under examples/scheduler loads, and Volcano's default
//! is accepted byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tephra_scheduler::SchedulerConfig;

#[test]
fn every_shipped_scheduler_config_loads() {
    let dir = common::repo_root().join("examples/scheduler");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "conf") {
            let text = std::fs::read_to_string(&path).unwrap();
            if let Err(e) = SchedulerConfig::parse(&text) {
                panic!("{}: {e}", path.display());
            }
            seen += 1;
        }
    }
    assert!(seen >= 3);
}

#[test]
fn the_shipped_tephra_default_is_the_built_in_default() {
    let text =
        std::fs::read_to_string(common::repo_root().join("examples/scheduler/tephra-default.conf"))
            .unwrap();
    assert_eq!(
        SchedulerConfig::parse(&text).unwrap(),
        SchedulerConfig::default_config()
    );
}

#[test]
fn tuned_arguments_are_read() {
    let text =
        std::fs::read_to_string(common::repo_root().join("examples/scheduler/gpu-binpack.conf"))
            .unwrap();
    let c = SchedulerConfig::parse(&text).unwrap();
    assert_eq!(c.action_args("allocate").len(), 3);
    let binpack = c.tiers[1].iter().find(|p| p.name == "binpack").unwrap();
    assert_eq!(binpack.arguments.len(), 5);
}
