//! Expected starts on a State fed as the watchers feed it: where each run's length comes from,
//! the predictions, and when the annotation is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::eta::Budget;

use super::*;
use crate::observed::{Change, Kind, Obj, Update};

fn stamp(t: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(t)
        .unwrap()
        .to_string()
}

fn apply(s: &mut State, now: i64, kind: Kind, obj: Obj) {
    let u = Update {
        cluster: Arc::from("local"),
        kind,
        change: Change::Apply(obj),
    };
    let errors = s.apply(now, u);
    assert!(errors.is_empty(), "{errors:?}");
}

/// PodGroup `name`, created at `name`'s place in the alphabet reversed (so that order of
/// creation is not order of name).
fn group(s: &mut State, name: &str, phase: &str, annotations: Value) {
    let created = 1_000 - i64::from(name.as_bytes()[0]);
    let pg = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": annotations,
                     "creationTimestamp": stamp(created)},
        "spec": {"minMember": 1, "queue": "default"},
        "status": {"phase": phase}
    });
    apply(
        s,
        0,
        Kind::PodGroup,
        Obj::PodGroup(Box::new(serde_json::from_value(pg).unwrap())),
    );
}

/// A pod of PodGroup `pg` asking 8 CPUs; `extra` is merged into it.
fn pod(s: &mut State, now: i64, name: &str, pg: &str, extra: Value) {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name,
                     "annotations": {"scheduling.k8s.io/group-name": pg}},
        "spec": {"schedulerName": "volcano",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}
    });
    merge(&mut p, extra);
    apply(
        s,
        now,
        Kind::Pod,
        Obj::Pod(Box::new(serde_json::from_value(p).unwrap())),
    );
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

/// One 8-CPU node; job `run` holds it since 400 and says it takes 20 minutes.
fn fleet() -> State {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.add_local("local").unwrap();
    let node = json!({
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    });
    apply(
        &mut s,
        0,
        Kind::Node,
        Obj::Node(Box::new(serde_json::from_value(node).unwrap())),
    );
    let q = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                   "metadata": {"name": "default"}, "spec": {"weight": 1}});
    apply(
        &mut s,
        0,
        Kind::Queue,
        Obj::Queue(Box::new(serde_json::from_value(q).unwrap())),
    );
    group(&mut s, "run", "Running", json!({}));
    running_since_400(&mut s, json!({"tephra.io/expected-duration": "20m"}));
    s
}

/// Pod `r0` of job `run`, on `n0` since 400, with `annotations` (its run's length, if any).
fn running_since_400(s: &mut State, annotations: Value) {
    pod(
        s,
        400,
        "r0",
        "run",
        json!({"metadata": {"annotations": annotations},
               "spec": {"nodeName": "n0"},
               "status": {"phase": "Running", "startTime": stamp(400)}}),
    );
}

/// Job `wait`, admitted, its PodGroup saying it runs 5 minutes; its pod waits.
fn five_minutes_waiting(s: &mut State) {
    let expected = json!({"tephra.io/expected-duration": "5m"});
    group(s, "wait", "Inqueue", expected);
    pod(s, 900, "w0", "wait", json!({}));
}

fn predict(s: &State, now: i64) -> Predictions {
    Round::new(
        s,
        Arc::new(SchedulerConfig::default_config()),
        now,
        Budget::default(),
        crate::state::durations::DEFAULT_RUN_S,
    )
    .run()
}

#[test]
fn the_waiting_jobs_start_when_the_runs_before_them_end_as_annotated() {
    let mut s = fleet();
    // `wait` says 5 minutes on its PodGroup; `next` says nothing (an hour by default).
    five_minutes_waiting(&mut s);
    group(&mut s, "next", "Pending", json!({}));
    pod(&mut s, 901, "x0", "next", json!({}));
    let p = predict(&s, 1_000);
    assert_eq!(p.jobs.get("ns/wait"), Some(&Expected::At(1_600)), "{p:?}");
    assert_eq!(p.jobs.get("ns/next"), Some(&Expected::At(1_900)), "{p:?}");
    assert!(!p.jobs.contains_key("ns/run"));
}

#[test]
fn a_run_lasts_its_deadline_then_what_the_same_queue_and_shape_took_before() {
    let mut s = fleet();
    // A completed run of the same queue and request: 7 minutes.
    group(&mut s, "done", "Completed", json!({}));
    pod(
        &mut s,
        2_000,
        "d0",
        "done",
        json!({"status": {"phase": "Succeeded", "startTime": stamp(100),
               "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"terminated": {"exitCode": 0, "finishedAt": stamp(520)}}}]}}),
    );
    // `dl` has a deadline of 10 minutes; `h` is like `done`.
    group(&mut s, "dl", "Inqueue", json!({}));
    pod(
        &mut s,
        900,
        "dl0",
        "dl",
        json!({"spec": {"activeDeadlineSeconds": 600}}),
    );
    group(&mut s, "h", "Inqueue", json!({}));
    pod(&mut s, 901, "h0", "h", json!({}));
    let world = s.cache().world();
    let spec = |k: &str| {
        world
            .tasks
            .get(world.task_id(k).unwrap())
            .unwrap()
            .spec
            .clone()
    };
    use crate::state::durations::Source;
    assert_eq!(
        s.durations().expected(world, &spec("ns/dl0")),
        (600, Source::Deadline)
    );
    assert_eq!(
        s.durations().expected(world, &spec("ns/h0")),
        (420, Source::History)
    );
    assert_eq!(
        s.durations().expected(world, &spec("ns/r0")),
        (1_200, Source::Annotation)
    );
    // `run` has run 600 of its 1200 s at 1000.
    assert_eq!(s.durations().remaining(world, &spec("ns/r0"), 1_000), 600);
    // `h` was created first: it runs 420 s from 1600, then `dl`.
    let p = predict(&s, 1_000);
    assert_eq!(p.jobs.get("ns/h"), Some(&Expected::At(1_600)), "{p:?}");
    assert_eq!(p.jobs.get("ns/dl"), Some(&Expected::At(2_020)), "{p:?}");
}

#[test]
fn the_annotation_is_written_when_missing_or_moved_enough_and_removed_once_running() {
    let mut s = fleet();
    five_minutes_waiting(&mut s);
    let p = predict(&s, 1_000);
    let writes = annotation_writes(&s, &p, 1_000);
    let value = |w: &[Write]| -> Vec<(String, Option<String>)> {
        w.iter()
            .filter_map(|w| match w {
                Write::GroupAnnotation { name, set, .. } => Some((name.clone(), set[0].1.clone())),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        value(&writes),
        vec![("wait".to_string(), Some(stamp(1_600)))]
    );
    // Written 30 s off (a tenth of the 600 s wait is 60 s): left as it is.
    let written = |at: i64| json!({"tephra.io/expected-duration": "5m", EXPECTED_START: stamp(at)});
    group(&mut s, "wait", "Inqueue", written(1_630));
    assert!(annotation_writes(&s, &p, 1_000).is_empty());
    // Written 90 s off: more than a tenth of the wait and a minute.
    group(&mut s, "wait", "Inqueue", written(1_690));
    assert_eq!(value(&annotation_writes(&s, &p, 1_000)).len(), 1);
    // Running: the annotation goes.
    group(&mut s, "wait", "Running", written(1_600));
    assert_eq!(
        value(&annotation_writes(&s, &p, 1_000)),
        vec![("wait".to_string(), None)]
    );
}

#[test]
fn a_job_larger_than_any_node_is_said_never_not_after_the_horizon() {
    let mut s = fleet();
    group(&mut s, "big", "Inqueue", json!({}));
    pod(
        &mut s,
        900,
        "b0",
        "big",
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}}),
    );
    let p = predict(&s, 1_000);
    let never = Expected::Never(tephra_scheduler::eta::Never::Fits);
    assert_eq!(p.jobs.get("ns/big"), Some(&never));
    assert_eq!(Expected::parse(&never.text()), Some(never));
    assert!(never.text().starts_with("never: "), "{}", never.text());
    // Its view says why, where a later start would give a time.
    let mut view = crate::view::FleetView::default();
    view.jobs.push(crate::view::JobView {
        namespace: "ns".into(),
        name: "big".into(),
        ..crate::view::JobView::default()
    });
    annotate_view(&mut view, &p);
    assert_eq!(view.jobs[0].expected_after, None);
    assert_eq!(
        view.jobs[0].expected_never.as_deref(),
        Some("it can never be placed as the fleet is")
    );
    // "after" is for a start beyond the horizon, and reads back.
    let after = Expected::After(1_000 + 24 * 3600);
    assert_eq!(Expected::parse(&after.text()), Some(after));
    assert!(after.text().starts_with("after 1970-01-02T"));
    let lost = Expected::Never(tephra_scheduler::eta::Never::NoQueue);
    assert_eq!(Expected::parse(&lost.text()), Some(lost));
    assert!(after.moved(never, 1_000), "a change of kind is written");
    assert!(!never.moved(never, 1_000));
}

#[test]
fn a_move_is_worth_writing_past_a_tenth_of_the_wait_and_a_minute() {
    let old = Expected::At(2_000);
    assert!(
        !old.moved(Expected::At(2_080), 1_000),
        "80 s of a 1000 s wait"
    );
    assert!(old.moved(Expected::At(2_101), 1_000));
    assert!(
        !Expected::At(1_100).moved(Expected::At(1_150), 1_000),
        "under a minute"
    );
    assert!(Expected::At(1_100).moved(Expected::At(1_161), 1_000));
    assert!(old.moved(Expected::After(2_000), 1_000), "a change of kind");
    assert_eq!(Expected::parse(&old.text()), Some(old));
    assert_eq!(Expected::parse("soon"), None);
}

#[test]
fn an_expected_start_says_which_running_jobs_it_assumes_end_first_and_how_sure_it_is() {
    let mut s = fleet();
    five_minutes_waiting(&mut s);
    let p = predict(&s, 1_000);
    // `run` says 20 minutes and ends at 1600, when `wait` starts: declared, so high.
    let b = p
        .basis
        .get("ns/wait")
        .expect("a basis for the expected start");
    assert_eq!(b.confidence, Confidence::High, "{b:?}");
    assert_eq!(b.pods, 1);
    assert_eq!(
        b.ends,
        vec![AssumedEnd {
            job: "ns/run".into(),
            at: 1_600,
            from: "its tephra.io/expected-duration"
        }]
    );
    assert_eq!(
        b.text(),
        format!(
            "high confidence; assumes 1 running pod(s) end before it, last of all: ns/run ends \
             at {} (its tephra.io/expected-duration)",
            stamp(1_600)
        )
    );
    // The basis is written with the expected start, in one write.
    let writes = annotation_writes(&s, &p, 1_000);
    let Some(Write::GroupAnnotation { set, .. }) = writes.first() else {
        panic!("{writes:?}");
    };
    assert_eq!(set[1], (EXPECTED_START_BASIS.to_string(), Some(b.text())));
    // Without the running job's annotation nothing is known of it: the default hour, low.
    let mut s = fleet();
    running_since_400(&mut s, json!({}));
    five_minutes_waiting(&mut s);
    let p = predict(&s, 1_000);
    let b = &p.basis["ns/wait"];
    assert_eq!(p.jobs.get("ns/wait"), Some(&Expected::At(4_000)));
    assert_eq!(b.confidence, Confidence::Low, "{b:?}");
    assert_eq!(b.ends[0].from, "nothing known: the default run");
}

#[test]
fn a_pod_runs_for_the_sim_duration_tephra_dev_gives_it_when_nothing_declares_a_run() {
    let mut s = fleet();
    running_since_400(&mut s, json!({"tephra.io/sim-duration": "3h"}));
    five_minutes_waiting(&mut s);
    let world = s.cache().world();
    let spec = world
        .tasks
        .get(world.task_id("ns/r0").unwrap())
        .unwrap()
        .spec
        .clone();
    use crate::state::durations::Source;
    assert_eq!(
        s.durations().expected(world, &spec),
        (3 * 3600, Source::Simulated)
    );
    let p = predict(&s, 1_000);
    assert_eq!(p.jobs.get("ns/wait"), Some(&Expected::At(400 + 3 * 3600)));
    assert_eq!(p.basis["ns/wait"].confidence, Confidence::High);
}
