//! Queues in a session: priority within a queue, admission only through open queues and not
//! under a missing parent or in a cycle, overcommit, fifo against traverse, and queue status.

use super::*;

#[test]
fn higher_priority_jobs_go_first_within_a_queue() {
    let mut c = gpu_cluster(1);
    add_job(
        &mut c,
        &GangJob::new("low", vec![gpu_role("w", 1, "8")]).priority(1),
    )
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("high", vec![gpu_role("w", 1, "8")])
            .priority(100)
            .created(5),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(binds_of(&d, "default/high").len(), 1);
    assert!(binds_of(&d, "default/low").is_empty());
}

#[test]
fn enqueue_admits_pending_jobs_only_through_open_queues() {
    let mut c = gpu_cluster(2);
    let mut closed = QueueSpec::named("closed");
    closed.state = QueueState::Closed;
    c.apply(Event::QueueUpsert(Box::new(closed))).unwrap();
    add_job(
        &mut c,
        &GangJob::new("open-job", vec![gpu_role("w", 1, "8")]).phase(GroupPhase::Pending),
    )
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("closed-job", vec![gpu_role("w", 1, "8")])
            .queue("closed")
            .phase(GroupPhase::Pending),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(
        binds_of(&d, "default/open-job").len(),
        1,
        "enqueued and allocated in one session"
    );
    assert!(binds_of(&d, "default/closed-job").is_empty());
    assert_eq!(
        d.group("default/closed-job").unwrap().phase,
        GroupPhase::Pending
    );
    assert!(
        d.event_for("default/closed-job")
            .unwrap()
            .message
            .contains("queue closed is Closed")
    );
}

#[test]
fn a_queue_under_a_missing_parent_or_in_a_cycle_admits_nothing_and_says_why() {
    let mut c = gpu_cluster(4);
    let queue = |name: &str, parent: &str| {
        let mut q = QueueSpec::named(name);
        q.parent = Some(parent.to_string());
        Event::QueueUpsert(Box::new(q))
    };
    for e in [
        queue("orphan", "gone"),
        queue("a", "b"),
        queue("b", "a"),
        queue("team", "root"),
    ] {
        c.apply(e).unwrap();
    }
    for (job, q) in [("j-orphan", "orphan"), ("j-a", "a"), ("j-team", "team")] {
        add_job(
            &mut c,
            &GangJob::new(job, vec![gpu_role("w", 1, "8")])
                .queue(q)
                .phase(GroupPhase::Pending),
        )
        .unwrap();
    }
    let d = run(&c);
    assert_eq!(
        binds_of(&d, "default/j-team").len(),
        1,
        "a sound tree admits"
    );
    for (job, says) in [
        (
            "default/j-orphan",
            "queue orphan: spec.parent \"gone\" does not exist",
        ),
        (
            "default/j-a",
            "queue a: spec.parent makes a cycle (a → b → a)",
        ),
    ] {
        assert!(binds_of(&d, job).is_empty(), "{job} was placed");
        assert_eq!(d.group(job).unwrap().phase, GroupPhase::Pending);
        let message = &d.event_for(job).unwrap().message;
        assert!(message.contains(says), "{job}: {message}");
    }
}

#[test]
fn enqueue_holds_back_jobs_whose_min_resources_exceed_the_overcommitted_fleet() {
    let mut c = gpu_cluster(1);
    // 1.2 x 8 GPUs = 9.6: a 16-GPU gang is not admitted at all.
    add_job(
        &mut c,
        &GangJob::new("huge", vec![gpu_role("w", 2, "8")]).phase(GroupPhase::Pending),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(d.group("default/huge").unwrap().phase, GroupPhase::Pending);
    assert_eq!(
        d.event_for("default/huge").unwrap().reason,
        "NotInqueueable"
    );
}

#[test]
fn a_fifo_queue_blocks_behind_its_head_and_a_traverse_queue_does_not() {
    for (strategy, expect_small) in [(Dequeue::Fifo, 0), (Dequeue::Traverse, 1)] {
        // The head could be placed once the busy node frees up, not now.
        let mut c = gpu_cluster(2);
        occupy(&mut c, "busy", 1);
        let mut q = QueueSpec::named("team");
        q.dequeue = strategy;
        c.apply(Event::QueueUpsert(Box::new(q))).unwrap();
        add_job(
            &mut c,
            &GangJob::new("head", vec![gpu_role("w", 2, "8")])
                .queue("team")
                .priority(10),
        )
        .unwrap();
        add_job(
            &mut c,
            &GangJob::new("small", vec![gpu_role("w", 1, "1")])
                .queue("team")
                .created(1),
        )
        .unwrap();
        let d = run(&c);
        assert_eq!(
            binds_of(&d, "default/small").len(),
            expect_small,
            "{strategy:?}"
        );
    }
}

#[test]
fn queue_status_reports_allocation_and_podgroup_counts() {
    let mut c = gpu_cluster(1);
    add_job(&mut c, &GangJob::new("a", vec![gpu_role("w", 1, "8")])).unwrap();
    add_job(
        &mut c,
        &GangJob::new("b", vec![gpu_role("w", 1, "8")]).created(1),
    )
    .unwrap();
    let d = run(&c);
    let q = d.queues.iter().find(|q| q.name == "default").unwrap();
    assert_eq!(
        q.allocated.get("nvidia.com/gpu").map(String::as_str),
        Some("8")
    );
    assert_eq!((q.running, q.inqueue), (1, 1));
}
