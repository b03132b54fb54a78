//! Scenario tests: small simulations end to end through `tephra_sim::run`, asserting on the
//! report and the event stream, as a user of `tephra sim` would read them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::assert_clean;

use std::collections::{BTreeMap, BTreeSet};

use tephra_sim::{Record, Report, RunOptions, Scenario};

fn load(name: &str) -> Scenario {
    Scenario::load(&common::repo_root().join("tests/scenarios").join(name)).unwrap()
}

fn run_with(s: &Scenario, seed: Option<u64>) -> (Report, Vec<Record>) {
    common::simulate(s, seed)
}

fn run(name: &str) -> (Report, Vec<Record>) {
    run_with(&load(name), None)
}

fn binds<'a>(events: &'a [Record], job: &str) -> Vec<&'a Record> {
    events
        .iter()
        .filter(|e| e.kind == "bind" && e.job.as_deref() == Some(job))
        .collect()
}

#[test]
fn gangs_are_all_or_nothing_under_contention() {
    let (r, events) = run("gang-contention.yaml");
    assert_clean(&r);
    assert_eq!(r.jobs.completed, 4);
    for job in ["default/a", "default/b", "default/c"] {
        let b = binds(&events, job);
        assert_eq!(b.len(), 2, "{job}");
        let times: BTreeSet<u64> = b.iter().map(|e| e.t as u64).collect();
        assert_eq!(
            times.len(),
            1,
            "{job}: its gang was bound at once, not piecemeal"
        );
    }
    // Only two 16-GPU gangs fit at once: the third started after one finished.
    let starts: Vec<f64> = ["default/a", "default/b", "default/c"]
        .iter()
        .map(|j| binds(&events, j)[0].t)
        .collect();
    assert_eq!(
        starts.iter().filter(|t| **t < 3600.0).count(),
        2,
        "{starts:?}"
    );
}

#[test]
fn a_fragmented_cluster_is_never_chosen() {
    let (r, events) = run("fragmented.yaml");
    assert_clean(&r);
    let b = binds(&events, "default/train");
    assert_eq!(b.len(), 2);
    assert!(
        b.iter().all(|e| e.cluster.as_deref() == Some("whole")),
        "{b:?}"
    );
}

#[test]
fn one_jobs_gpu_pods_are_packed_onto_one_node() {
    let (r, events) = run("gpu-packing.yaml");
    assert_clean(&r);
    let nodes: BTreeSet<&str> = binds(&events, "default/small")
        .iter()
        .filter_map(|e| e.node.as_deref())
        .collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(
        nodes.iter().next().copied(),
        Some("c1-gpu-0"),
        "nodes are named <cluster>-<pool>-<index>"
    );
}

#[test]
fn region_affinity_and_cluster_taints_are_honored() {
    let (r, events) = run("affinity-taints.yaml");
    assert_clean(&r);
    assert!(
        binds(&events, "default/pinned-west")
            .iter()
            .all(|e| e.cluster.as_deref() == Some("west"))
    );
    assert!(
        binds(&events, "default/blocked-west").is_empty(),
        "no toleration for west's taint"
    );
    assert!(
        binds(&events, "default/east-only")
            .iter()
            .all(|e| e.cluster.as_deref() == Some("east"))
    );
    assert_eq!(r.jobs.pending_at_end, 1);
    assert_eq!(r.jobs.completed, 2);
}

#[test]
fn every_job_finishes_after_a_cluster_outage() {
    let (r, events) = run("outage.yaml");
    assert_clean(&r);
    assert_eq!(r.jobs.submitted, 40);
    assert_eq!(r.jobs.completed, 40, "{:?}", r.jobs);
    assert!(r.pods.evicted > 0, "the outage hit running pods");
    let faults: Vec<&Record> = events.iter().filter(|e| e.kind == "fault").collect();
    assert!(faults.iter().any(|e| e.cluster.as_deref() == Some("gpu-a")));
    let recovers = events.iter().filter(|e| e.kind == "recover").count();
    assert_eq!(recovers, 2);
    // While gpu-a is down nothing is bound there.
    let down = (2400.0, 4200.0);
    assert!(
        events
            .iter()
            .filter(|e| e.kind == "bind" && e.t > down.0 && e.t < down.1)
            .all(|e| e.cluster.as_deref() != Some("gpu-a"))
    );
    // The chain: Unknown within a probe period past the failure threshold, the NoSchedule
    // taint with it, NoExecute five minutes later, and only then do gangs move.
    let at = |kind: &str, what: &str| {
        events
            .iter()
            .find(|e| e.kind == kind && e.reason.as_deref().is_some_and(|r| r.contains(what)))
            .map(|e| e.t)
    };
    let unknown = at("ready", "Unknown").unwrap();
    assert!(
        (2430.0..=2440.0).contains(&unknown),
        "detected at {unknown}"
    );
    assert_eq!(at("taint", "unreachable:NoSchedule"), Some(unknown));
    assert_eq!(at("taint", "unreachable:NoExecute"), Some(unknown + 300.0));
    let moved = at("evict", "TaintManager").unwrap();
    assert_eq!(moved, unknown + 300.0);
    let gpu_a = &r.failover.faults[0];
    assert_eq!(
        (gpu_a.cluster.as_str(), gpu_a.kind.as_str()),
        ("gpu-a", "unreachable")
    );
    assert!(
        gpu_a.jobs_moved > 0 && gpu_a.all_running_again_s.is_some(),
        "{gpu_a:?}"
    );
    // The node that went down in gpu-b restarted its gangs there, the member's own doing.
    assert!(at("evict", "node(s) down in cluster gpu-b").is_some());
}

#[test]
fn the_same_seed_gives_the_same_events_and_another_seed_does_not() {
    let s = load("outage.yaml");
    let (_, a) = run_with(&s, Some(11));
    let (_, b) = run_with(&s, Some(11));
    let (_, c) = run_with(&s, Some(12));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn events_are_in_time_order_with_the_documented_fields() {
    let (_, events) = run("outage.yaml");
    assert!(
        events.windows(2).all(|w| w[0].t <= w[1].t),
        "events.jsonl is in time order"
    );
    let submit = events.iter().find(|e| e.kind == "submit").unwrap();
    assert!(
        submit.min_available.is_some() && submit.splittable.is_some() && submit.queue.is_some()
    );
    let bind = events.iter().find(|e| e.kind == "bind").unwrap();
    for field in [
        &bind.job,
        &bind.queue,
        &bind.task,
        &bind.pod,
        &bind.cluster,
        &bind.node,
    ] {
        assert!(field.is_some(), "{bind:?}");
    }
    assert!(bind.resource("nvidia.com/gpu").is_some());
    let kinds: BTreeSet<&str> = events.iter().map(|e| e.kind).collect();
    for k in [
        "submit", "bind", "start", "finish", "evict", "fault", "recover",
    ] {
        assert!(kinds.contains(k), "no {k} event");
    }
}

#[test]
fn traces_replay_with_skips_reported() {
    let (r, events) = run("traces.yaml");
    assert_clean(&r);
    // Each trace contributes up to its limit; rows never scheduled in the trace are skipped
    // and reported, not replayed.
    assert_eq!(r.jobs.submitted, 200 + 50 + 40);
    let openb_skips: u64 = r
        .trace_skipped
        .iter()
        .filter(|(k, _)| k.contains("openb-pods"))
        .flat_map(|(_, v)| v.iter())
        .filter(|(why, _)| why.contains("never scheduled"))
        .map(|(_, n)| *n)
        .sum();
    assert!(openb_skips > 0, "{:?}", r.trace_skipped);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("rounded up to one whole GPU")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("split into tasks of at most 8 GPUs")),
        "{:?}",
        r.notes
    );
    // Trace nodes keep the trace's names.
    assert!(events.iter().any(|e| {
        e.kind == "bind"
            && e.node
                .as_deref()
                .is_some_and(|n| n.starts_with("openb-node-"))
    }));
    // A Philly 8+8 shape would be two tasks; Crux gangs above 8 GPUs are split into 8-GPU pods.
    let crux: BTreeMap<&str, usize> = events
        .iter()
        .filter(|e| {
            e.kind == "submit"
                && e.job
                    .as_deref()
                    .is_some_and(|j| j.starts_with("trace/crux-"))
        })
        .map(|e| {
            (
                e.job.as_deref().unwrap_or_default(),
                e.min_available.unwrap_or(0) as usize,
            )
        })
        .collect();
    assert_eq!(
        crux.get("trace/crux-0"),
        Some(&6),
        "48 GPUs = six 8-GPU pods"
    );
}

#[test]
fn a_bad_scenario_is_refused_naming_file_line_and_field() {
    let text = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {name: p, count: 1, capacity: {cpu: \"4\"}}\nworkload:\n  jobs:\n    - {name: j, tasks: [{name: w, replicas: 1, resources: {cpu: \"1\"}, duration: 10x}]}\n";
    let err = Scenario::parse(text, "bad.yaml", std::path::Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("bad.yaml: "), "{err}");
    assert!(err.contains("line 8"), "{err}");
    assert!(err.contains("unknown unit \"x\""), "{err}");

    let unknown_queue = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {name: p, count: 1, capacity: {cpu: \"4\"}}\nworkload:\n  jobs:\n    - {name: j, queue: nope, tasks: [{name: w, replicas: 1, resources: {cpu: \"1\"}, duration: 1m}]}\n";
    let err = Scenario::parse(unknown_queue, "q.yaml", std::path::Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("workload.jobs[0] (j).queue: unknown queue \"nope\""),
        "{err}"
    );
}

#[test]
fn shipped_volcano_job_manifests_run_unchanged() {
    let s = Scenario::load(&common::repo_root().join("examples/sim/volcano-jobs.yaml")).unwrap();
    let (r, events) = run_with(&s, None);
    assert_clean(&r);
    assert_eq!((r.jobs.submitted, r.jobs.completed), (3, 3), "{:?}", r.jobs);
    let torch = binds(&events, "ml/llama-finetune");
    assert_eq!(torch.len(), 5, "master + 4 workers as one gang");
    assert!(torch.iter().all(|e| e.cluster.as_deref() == Some("gpu")));
    let submit = events
        .iter()
        .find(|e| e.kind == "submit" && e.job.as_deref() == Some("analytics/nightly-etl"))
        .unwrap();
    assert_eq!(
        submit.min_available,
        Some(1),
        "Volcano's minAvailable from the manifest"
    );
    assert_eq!(submit.t, 60.0, "tephra.io/sim-submit-at");
}

#[test]
fn a_broken_manifest_is_refused_with_the_admission_message() {
    let text = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {name: p, count: 1, capacity: {cpu: \"4\"}}\nworkload:\n  manifests: [tests/broken/job-minavailable-exceeds-replicas.yaml]\n";
    let s = Scenario::parse(text, "m.yaml", &common::repo_root()).unwrap();
    let err = match tephra_sim::run(&s, RunOptions::default(), &mut |_| {}, &mut |_| {}) {
        Ok(_) => panic!("a broken manifest must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("workload.manifests[0]"), "{err}");
    assert!(
        err.contains("spec.minAvailable must not exceed the total replicas"),
        "{err}"
    );
}

fn first_bind(events: &[Record], job: &str) -> Option<f64> {
    binds(events, job).first().map(|e| e.t)
}

#[test]
fn queues_weighted_one_two_three_get_their_deserved_gpu_share() {
    let (r, _) = run("fair-weights.yaml");
    assert_clean(&r);
    for (name, q) in &r.queues {
        assert!(
            q.jobs_submitted > q.jobs_completed,
            "queue {name} must stay saturated for the test to mean anything"
        );
        // Within 5%, or within half a pod of it: reclaim never takes a queue below its
        // deserved share, so a queue of 2-GPU pods may keep up to one pod above a deserved
        // share that is not a whole number of pods (10.7 of 64 GPUs for weight 1).
        let half_pod = 1.0 / 64.0;
        let off_abs = (q.actual_share - q.deserved_share).abs();
        let off = off_abs / q.deserved_share;
        assert!(
            off <= 0.05 || off_abs <= half_pod,
            "queue {name}: actual {:.3} vs deserved {:.3}",
            q.actual_share,
            q.deserved_share
        );
    }
    assert!(
        r.fairness.jain_gpu_share > 0.99,
        "Jain's index {}",
        r.fairness.jain_gpu_share
    );
}

#[test]
fn a_high_priority_gang_preempts_just_enough_low_priority_training() {
    let (r, events) = run("preemption.yaml");
    assert_clean(&r);
    assert_eq!(r.pods.preempted, 1, "one spare worker of train-a is enough");
    let evict = events.iter().find(|e| e.kind == "evict").unwrap();
    assert_eq!(evict.job.as_deref(), Some("default/train-a"));
    assert!(
        evict
            .reason
            .as_deref()
            .unwrap()
            .starts_with("preempted by default/urgent (priority 1000)")
    );
    let started = first_bind(&events, "default/urgent").unwrap();
    assert!(
        started - 3600.0 < 120.0,
        "urgent waited {}s",
        started - 3600.0
    );
    // train-b (a gang at its minimum) was left alone.
    assert!(
        events
            .iter()
            .filter(|e| e.kind == "evict")
            .all(|e| e.job.as_deref() != Some("default/train-b"))
    );
}

#[test]
fn a_queue_back_from_idle_reclaims_its_share() {
    let (r, events) = run("reclaim.yaml");
    assert_clean(&r);
    assert!(r.pods.reclaimed > 0);
    assert!(
        events
            .iter()
            .filter(|e| e.kind == "evict")
            .all(|e| e.queue.as_deref() == Some("research")
                && e.reason.as_deref().unwrap().starts_with("reclaimed by"))
    );
    // Research never drops below its deserved half of the fleet: at most 4 of its 8
    // four-GPU jobs (16 of 32 GPUs) are reclaimed.
    assert!(r.pods.reclaimed <= 4, "{}", r.pods.reclaimed);
    let prod = &r.queues["prod"];
    assert_eq!(prod.jobs_completed, 4);
    assert!(
        prod.wait_s.mean < 120.0,
        "prod waited {}s on average",
        prod.wait_s.mean
    );
}

#[test]
fn a_big_gang_is_not_starved_by_a_stream_of_small_jobs() {
    let with_sla = load("starvation.yaml");
    let (r, events) = run_with(&with_sla, None);
    assert_clean(&r);
    assert_eq!(r.jobs.completed, r.jobs.submitted);
    let waited = first_bind(&events, "default/big").unwrap() - 300.0;
    assert!(
        waited < 2.0 * 3600.0,
        "with the sla reservation the gang waited {waited}s"
    );
    // The same workload without the sla plugin starves the gang until the stream ends.
    let mut without = with_sla.clone();
    without.scheduler.config = Some(tephra_sim::scenario::ConfigRef::Path(
        "../../examples/scheduler/tephra-default.conf".into(),
    ));
    let (_, events) = run_with(&without, None);
    let waited_without = first_bind(&events, "default/big").unwrap() - 300.0;
    assert!(
        waited_without > 10.0 * 3600.0,
        "without sla the gang waited only {waited_without}s"
    );
}

#[test]
fn a_late_gang_keeps_what_frees_up_across_sessions_against_other_queues_small_jobs() {
    // Issue 9, item 6: the 64-GPU gang is submitted at 1h and is late at 2h (sla 1h). Without
    // room held from one session to the next, the other queues' small jobs refill every node
    // that starts to free, and it had not started 6 hours later.
    let (r, events) = run("sla-other-queues.yaml");
    assert_clean(&r);
    let deadline = 2.0 * 3600.0;
    let started = first_bind(&events, "default/big").expect("the gang never started");
    assert!(
        started <= deadline + 2.0 * 3600.0,
        "the gang started {}s after its deadline",
        started - deadline
    );
    // The stream kept running meanwhile: holding room for the gang did not stop the others.
    assert!(r.jobs.completed > 500, "{:?}", r.jobs);
}

#[test]
fn gangs_that_each_need_most_of_the_cluster_never_deadlock() {
    let (r, _) = run("deadlock.yaml");
    assert_clean(&r);
    assert_eq!((r.jobs.submitted, r.jobs.completed), (10, 10));
}

#[test]
fn a_team_gets_its_lent_guarantee_back_within_its_orgs_limit() {
    let (r, events) = run("hierarchy.yaml");
    assert_clean(&r);
    assert_eq!(r.queues["team-a"].jobs_completed, 2);
    // team-b borrowed up to the org's 24-GPU capability, never more.
    let mut b_gpus: i64 = 0;
    let mut peak = 0;
    for e in &events {
        if e.queue.as_deref() != Some("team-b") {
            continue;
        }
        let g: i64 = e
            .resource("nvidia.com/gpu")
            .and_then(|q| q.parse().ok())
            .unwrap_or(0);
        match e.kind {
            "bind" => b_gpus += g,
            "evict" | "finish" => b_gpus -= g,
            _ => {}
        }
        peak = peak.max(b_gpus);
    }
    assert_eq!(
        peak, 24,
        "team-b borrows team-a's unused guarantee up to the org's capability"
    );
    // team-a takes back its 16 GPUs: four of team-b's 4-GPU pods are reclaimed, no more, so
    // team-b keeps its deserved 8.
    assert_eq!(r.pods.reclaimed, 4);
    assert!(events.iter().filter(|e| e.kind == "evict").all(|e| {
        e.reason
            .as_deref()
            .unwrap()
            .starts_with("reclaimed by default/a-")
    }));
}

#[test]
fn fifty_random_fault_schedules_lose_nothing_and_break_no_invariant() {
    // The outage scenario's fleet and workload, with 6 faults drawn per seed over 4 hours
    // instead of its two: every schedule must leave the checker clean and lose no job.
    let text =
        std::fs::read_to_string(common::repo_root().join("tests/scenarios/outage.yaml")).unwrap();
    let head = text.split("faults:").next().unwrap();
    let text = format!(
        "{head}faults: {{random: {{count: 6, meanDuration: 20m}}}}\nrun: {{seed: 1, until: 4h}}\n"
    );
    let s = Scenario::parse(&text, "random-faults.yaml", &common::repo_root()).unwrap();
    let mut faults_seen = 0;
    let mut moved = 0;
    for seed in 0..50 {
        let (r, events) = run_with(&s, Some(seed));
        assert_clean(&r);
        faults_seen += events.iter().filter(|e| e.kind == "fault").count();
        moved += events
            .iter()
            .filter(|e| {
                e.kind == "evict"
                    && e.reason
                        .as_deref()
                        .is_some_and(|r| r.contains("TaintManager"))
            })
            .count();
    }
    assert_eq!(faults_seen, 50 * 6, "every drawn fault happened");
    assert!(
        moved > 0,
        "some faults lasted past the NoExecute grace and moved gangs"
    );
}

/// The quick start's fleet and workload under 1,000 random fault schedules (8 faults over 12
/// hours each). Slow: `cargo test --release --test sim_scenarios -- --ignored
/// a_thousand_random_fault_schedules`.
#[test]
#[ignore = "slow: 1,000 full runs of the quick start"]
fn a_thousand_random_fault_schedules_over_the_quick_start_lose_nothing() {
    let path = common::repo_root().join("examples/sim/quickstart.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let head = text.split("\nfaults:").next().unwrap();
    let text = format!(
        "{head}\nfaults: {{random: {{count: 8, meanDuration: 30m}}}}\nrun: {{seed: 1, until: 12h, podStartDelay: 10s}}\n"
    );
    let s = Scenario::parse(&text, "random-quickstart.yaml", path.parent().unwrap()).unwrap();
    let (mut moved, mut dup, mut detect, mut back) = (0, 0.0, 0.0f64, 0.0f64);
    for seed in 0..1000 {
        let (r, _) = run_with(&s, Some(seed));
        assert_clean(&r);
        let f = &r.failover;
        moved += f.jobs_moved;
        dup += f.duplicate_gang_s;
        detect = detect.max(f.max_detection_delay_s.unwrap_or(0.0));
        back = back.max(f.max_all_running_again_s.unwrap_or(0.0));
    }
    assert!(moved > 0);
    eprintln!(
        "1,000 schedules: {moved} gangs moved or restarted, {dup} duplicate-gang seconds (all within the grace), \
         longest detection {detect} s, longest until all ran again {back} s"
    );
}

/// `examples/sim/<name>`.
fn example(name: &str) -> Scenario {
    Scenario::load(&common::repo_root().join("examples/sim").join(name)).unwrap()
}

/// Gangs of GPU slices through a member's outage: those that ran in the member that went away
/// are placed again, slices and all, where their slices fit, every job finishes, and no GPU is
/// over-committed at any bind (the checker counts each GPU's pods, memory and cores).
#[test]
fn gangs_of_gpu_slices_move_with_their_slices_when_a_member_fails() {
    let (r, events) = run("shared-gpus-outage.yaml");
    assert_clean(&r);
    assert_eq!(r.invariants.gpu_overcommits, 0);
    assert_eq!(r.jobs.completed, r.jobs.submitted, "{:?}", r.jobs);
    assert!(r.pods.evicted > 0, "the outage hit running slices");
    // Jobs bound in east before the outage and again in west after it.
    let moved: BTreeSet<&str> = events
        .iter()
        .filter(|e| e.kind == "bind" && e.cluster.as_deref() == Some("east") && e.t < 2400.0)
        .filter_map(|e| e.job.as_deref())
        .filter(|job| {
            binds(&events, job)
                .iter()
                .any(|b| b.cluster.as_deref() == Some("west") && b.t > 2400.0)
        })
        .collect();
    assert!(!moved.is_empty(), "no gang of slices moved to west");
}

#[test]
fn sharing_gpus_runs_more_of_the_same_jobs_than_whole_gpus_and_overcommits_none() {
    let (shared, events) = run_with(&example("shared-gpus.yaml"), None);
    let (whole, _) = run_with(&example("whole-gpus.yaml"), None);
    assert_clean(&shared);
    assert_clean(&whole);
    assert_eq!(shared.jobs.submitted, whole.jobs.submitted);
    // Four slices of a GPU run where one whole GPU did: far more of the jobs finish in the
    // same four hours.
    assert!(
        shared.jobs.completed as f64 >= 1.5 * whole.jobs.completed as f64,
        "shared {} against whole {}",
        shared.jobs.completed,
        whole.jobs.completed
    );
    // Slices of one GPU went to several pods at once.
    let on_one_node = events
        .iter()
        .filter(|e| e.kind == "bind" && e.node.as_deref() == Some("gpu-a100-0"))
        .count();
    assert!(on_one_node > 8, "{on_one_node} binds on an 8-GPU node");
}

/// A week of a nightly pipeline beside a stream of other work: the CronJob makes the nightly
/// Job at 02:00 Berlin time of each day it is not forbidden (the night before still runs), the
/// JobFlow ends Succeed, and the pipeline's waits are measured in its queue.
#[test]
fn a_week_of_a_nightly_cronjob_and_a_jobflow_runs_on_the_virtual_clock() {
    let (r, events) = run_with(&example("nightly-pipeline.yaml"), None);
    assert_clean(&r);
    let notes = r.notes.join("\n");
    let made: u32 = notes
        .lines()
        .find_map(|l| l.strip_prefix("CronJob default/nightly-train: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{notes}"));
    assert!((5..=7).contains(&made), "{notes}");
    assert!(
        notes.contains("JobFlow default/pipeline: Succeed, 3 job(s) made"),
        "{notes}"
    );
    // 02:00 in Berlin is 01:00 UTC in winter (the simulated week starts 1 January 1970).
    for e in events.iter().filter(|e| {
        e.kind == "submit"
            && e.job
                .as_deref()
                .is_some_and(|j| j.starts_with("default/nightly-train-"))
    }) {
        assert_eq!((e.t as i64) % 86_400 / 3600, 1, "{e:?}");
    }
    assert!(
        r.queues.contains_key("nightly"),
        "the pipeline's waits are measured"
    );
}
