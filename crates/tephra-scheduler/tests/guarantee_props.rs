//! Property: with the capacity plugin, a queue's guarantee is always satisfiable when the fleet
//! can satisfy it. Other queues may fill the fleet while a guaranteed queue is idle; when it
//! comes back with work within its guarantee, one session places that work (bound, or
//! pipelined onto what reclaim frees).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::config::DEFAULT_CONFIG;
use tephra_scheduler::model::{Cluster, QueueSpec};
use tephra_scheduler::testing::{
    GangJob, Role, add_cluster, add_job, add_nodes, apply_binds, resources,
};
use tephra_scheduler::{Cache, Event, SchedulerConfig, schedule};

fn config() -> Arc<SchedulerConfig> {
    let text = DEFAULT_CONFIG
        .replace(
            "actions: \"enqueue, allocate, backfill\"",
            "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
        )
        .replace("  - name: proportion\n", "  - name: capacity\n");
    Arc::new(SchedulerConfig::parse(&text).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_guarantee_within_the_fleet_is_always_honoured(
        nodes in 2usize..6,
        guaranteed_nodes in 1usize..3,
        borrower_jobs in 1usize..8,
        borrower_gang in 1u32..3,
        back_pods in 1u32..3,
    ) {
        let guaranteed_nodes = guaranteed_nodes.min(nodes - 1);
        let mut c = Cache::new();
        add_cluster(&mut c, Cluster::named("east")).unwrap();
        add_nodes(&mut c, "east", "gpu", nodes, &[("cpu", "96"), ("memory", "1Ti"), ("pods", "110"), ("nvidia.com/gpu", "8")], &[]).unwrap();
        let guarantee = (guaranteed_nodes * 8).to_string();
        let mut owner = QueueSpec::named("owner");
        owner.guarantee = Some(resources(&mut c, &[("nvidia.com/gpu", &guarantee)]).unwrap());
        owner.deserved = owner.guarantee;
        c.apply(Event::QueueUpsert(Box::new(owner))).unwrap();
        let rest = ((nodes - guaranteed_nodes) * 8).to_string();
        let mut borrower = QueueSpec::named("borrower");
        borrower.deserved = Some(resources(&mut c, &[("nvidia.com/gpu", &rest)]).unwrap());
        c.apply(Event::QueueUpsert(Box::new(borrower))).unwrap();
        // The borrower fills the fleet (8-GPU pods, gangs of borrower_gang).
        for i in 0..borrower_jobs {
            let j = GangJob::new(&format!("b{i}"), vec![Role::new("w", borrower_gang, &[("cpu", "8"), ("nvidia.com/gpu", "8")])])
                .queue("borrower")
                .created(i as i64);
            add_job(&mut c, &j).unwrap();
            let d = schedule(c.snapshot(), config(), 0, 1);
            apply_binds(&mut c, &d).unwrap();
            c.clear_changed();
        }
        // The owner comes back asking for no more than its guarantee.
        let want = back_pods.min(guaranteed_nodes as u32);
        let j = GangJob::new("back", vec![Role::new("w", want, &[("cpu", "8"), ("nvidia.com/gpu", "8")])])
            .queue("owner")
            .created(100);
        add_job(&mut c, &j).unwrap();
        let d = schedule(c.snapshot(), config(), 0, 2);
        let placed = d.binds.iter().chain(&d.pipelined).filter(|b| b.job == "default/back").count();
        prop_assert_eq!(placed, want as usize, "guarantee not honoured: {:?} {:?}", d.events, d.evictions);
        // Only the borrower gives back, no more than the owner needs (rounded up to whole
        // gangs, since a gang at its minimum goes whole), and single-pod jobs never below the
        // borrower's own deserved share.
        prop_assert!(d.evictions.iter().all(|e| e.job.starts_with("default/b") && e.job != "default/back"));
        let held_pods = c.world().tasks.iter().filter(|(_, t)| t.spec.placement.is_some()).count();
        let needed = (want as usize).saturating_sub(nodes - held_pods);
        let gang = borrower_gang as usize;
        prop_assert!(
            d.evictions.len() <= needed.div_ceil(gang) * gang,
            "{} pods evicted for {} needed: {:?}", d.evictions.len(), needed, d.evictions
        );
        if gang == 1 {
            let (held, after) = (held_pods * 8, (held_pods - d.evictions.len()) * 8);
            let deserved = (nodes - guaranteed_nodes) * 8;
            prop_assert!(
                after >= deserved.min(held),
                "borrower pushed to {} GPUs, below its deserved {} (held {})", after, deserved, held
            );
        }
    }
}
