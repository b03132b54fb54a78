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

fn corpus_confs() -> Option<Vec<std::path::PathBuf>> {
    let root = common::repo_root().join("../shared/volcano-corpus/volcano");
    if !root.is_dir() {
        return None;
    }
    let mut out = Vec::new();
    for dir in [
        "extracted-confs",
        "docs-extracted/confs",
        "installer/helm/chart/volcano/config",
    ] {
        for entry in std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "conf") {
                out.push(path);
            }
        }
    }
    out.sort();
    Some(out)
}

/// Every scheduler configuration Volcano ships (in its installer and Helm chart) and every one
/// in its user guide loads: Volcano plugins tephra does not implement load with a warning, and
/// arguments that have no effect here are accepted with one.
#[test]
fn every_volcano_shipped_and_documented_config_loads() {
    let Some(files) = corpus_confs() else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED (passes without running): ../shared/volcano-corpus is absent\n",
        );
        return;
    };
    assert!(files.len() >= 25, "corpus lost configs: {}", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        match SchedulerConfig::parse(&text) {
            Ok(c) => {
                for w in &c.warnings {
                    println!("{}: warning: {w}", path.display());
                }
            }
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Volcano's vGPU user guide's configuration turns GPU sharing on with its policy, with no
/// warning: `deviceshare` is a plugin tephra implements.
#[test]
fn volcanos_vgpu_guide_config_turns_sharing_on_with_its_policy() {
    let Some(files) = corpus_confs() else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED (passes without running): ../shared/volcano-corpus is absent\n",
        );
        return;
    };
    let path = files
        .iter()
        .find(|p| p.ends_with("how_to_use_volcano_vgpu__block1__volcano-scheduler.conf"))
        .expect("the corpus has the vGPU guide's configuration");
    let c = SchedulerConfig::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let plugin = c
        .tiers
        .iter()
        .flatten()
        .find(|p| p.name == "deviceshare")
        .unwrap();
    let g = tephra_scheduler::plugins::deviceshare::config(plugin);
    assert!(g.enabled);
    assert_eq!(g.policy, tephra_scheduler::framework::gpus::Policy::Binpack);
    assert!(
        c.warnings.iter().all(|w| !w.contains("deviceshare")),
        "{:?}",
        c.warnings
    );
}

/// Volcano's gpushare user guides' configurations (`deviceshare.GPUSharingEnable`,
/// `deviceshare.GPUNumberEnable`) turn their mode on, with no warning about `deviceshare`.
#[test]
fn volcanos_gpushare_guides_configs_turn_their_mode_on() {
    let Some(files) = corpus_confs() else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED (passes without running): ../shared/volcano-corpus is absent\n",
        );
        return;
    };
    for (name, memory, number) in [
        (
            "how_to_use_gpu_sharing__block1__volcano-scheduler.conf",
            true,
            false,
        ),
        (
            "how_to_use_gpu_number__block1__volcano-scheduler.conf",
            false,
            true,
        ),
    ] {
        let path = files
            .iter()
            .find(|p| p.ends_with(name))
            .expect("the corpus has the gpushare guides' configurations");
        let c = SchedulerConfig::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let plugin = c
            .tiers
            .iter()
            .flatten()
            .find(|p| p.name == "deviceshare")
            .unwrap();
        let g = tephra_scheduler::plugins::deviceshare::config(plugin);
        assert_eq!((g.share_memory, g.share_number), (memory, number), "{name}");
        assert!(
            c.warnings.iter().all(|w| !w.contains("deviceshare")),
            "{name}: {:?}",
            c.warnings
        );
    }
}
