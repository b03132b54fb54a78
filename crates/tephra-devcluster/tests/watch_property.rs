//! Property: with writers changing objects concurrently and watchers starting at random
//! moments from the resourceVersion of a list, every watcher sees every change after its start
//! exactly once, in resourceVersion order. A pod's delete is two changes, as in kube-apiserver:
//! the pod is marked for deletion (a `MODIFIED` with its `deletionTimestamp`), then removed; the
//! mark, whose resourceVersion the delete does not answer, must come before its removal.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use proptest::prelude::*;
use serde_json::json;

type Op = (u8, bool);

fn rv_of(p: &Pod) -> u64 {
    p.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs one writer's ops; returns the resourceVersion and type of each change it made.
async fn writer(pods: Api<Pod>, id: usize, ops: Vec<Op>) -> Vec<(u64, &'static str)> {
    let mut exists = [false; 4];
    let mut out = Vec::new();
    for (n, (slot, delete)) in ops.into_iter().enumerate() {
        let slot = usize::from(slot % 4);
        let name = format!("w{id}-{slot}");
        if !exists[slot] {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"n": n.to_string()}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }))
            .unwrap();
            let p = pods.create(&PostParams::default(), &pod).await.unwrap();
            out.push((rv_of(&p), "ADDED"));
            exists[slot] = true;
        } else if delete {
            let p = pods
                .delete(&name, &DeleteParams::default())
                .await
                .unwrap()
                .left()
                .unwrap();
            out.push((rv_of(&p), "DELETED"));
            exists[slot] = false;
        } else {
            let patch = Patch::Merge(json!({"metadata": {"labels": {"n": n.to_string()}}}));
            let p = pods
                .patch(&name, &PatchParams::default(), &patch)
                .await
                .unwrap();
            out.push((rv_of(&p), "MODIFIED"));
        }
    }
    out
}

/// Starts watching after `delay_ms` from the resourceVersion of a list taken then; collects
/// changes until it has seen `last` (or times out).
async fn watcher(
    pods: Api<Pod>,
    delay_ms: u64,
    mut last: tokio::sync::watch::Receiver<u64>,
) -> (u64, Vec<(u64, &'static str, String)>) {
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    let start: u64 = pods
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default().timeout(60), &start.to_string())
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    loop {
        let target = *last.borrow();
        if target != 0 && seen.last().is_some_and(|(rv, _, _)| *rv >= target) {
            break;
        }
        if target != 0 && target <= start {
            break;
        }
        let next = tokio::select! {
            next = tokio::time::timeout(Duration::from_secs(20), stream.try_next()) => next,
            changed = last.changed() => {
                if changed.is_err() {
                    break;
                }
                continue;
            }
        };
        let Ok(Ok(Some(ev))) = next else {
            break;
        };
        let (p, t) = match ev {
            WatchEvent::Added(p) => (p, "ADDED"),
            WatchEvent::Modified(p) if p.metadata.deletion_timestamp.is_some() => (p, "MARKED"),
            WatchEvent::Modified(p) => (p, "MODIFIED"),
            WatchEvent::Deleted(p) => (p, "DELETED"),
            _ => continue,
        };
        seen.push((rv_of(&p), t, p.metadata.name.unwrap_or_default()));
    }
    (start, seen)
}

/// The changes a watcher saw but the deletion marks, after checking that each mark comes
/// before its pod's removal.
fn without_marks(seen: &[(u64, &'static str, String)]) -> Vec<(u64, &'static str)> {
    for (i, (rv, t, name)) in seen.iter().enumerate() {
        if *t == "MARKED" {
            assert!(
                seen[i + 1..]
                    .iter()
                    .any(|(_, t2, n2)| *t2 == "DELETED" && n2 == name),
                "the deletion mark of {name} at {rv} is not followed by its removal"
            );
        }
    }
    seen.iter()
        .filter(|(_, t, _)| *t != "MARKED")
        .map(|(rv, t, _)| (*rv, *t))
        .collect()
}

fn check(writers: Vec<Vec<Op>>, delays: Vec<u64>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let h = common::single().await;
        let client = common::client(&h, "local").await;
        let pods: Api<Pod> = Api::default_namespaced(client);
        let (last_tx, last_rx) = tokio::sync::watch::channel(0u64);
        let watchers: Vec<_> = delays
            .into_iter()
            .map(|d| tokio::spawn(watcher(pods.clone(), d, last_rx.clone())))
            .collect();
        let writers: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(i, ops)| tokio::spawn(writer(pods.clone(), i, ops)))
            .collect();
        let mut changes = Vec::new();
        for w in writers {
            changes.extend(w.await.unwrap());
        }
        changes.sort();
        let last = changes.last().map_or(1, |c| c.0);
        last_tx.send(last).unwrap();
        for w in watchers {
            let (start, seen) = w.await.unwrap();
            let expected: Vec<_> = changes
                .iter()
                .filter(|(rv, _)| *rv > start)
                .cloned()
                .collect();
            assert_eq!(
                without_marks(&seen),
                expected,
                "watcher from {start} saw something else than every later change once, in order"
            );
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_watcher_sees_every_change_once_in_resource_version_order(
        writers in prop::collection::vec(prop::collection::vec((0u8..4, any::<bool>()), 5..30), 2..5),
        delays in prop::collection::vec(0u64..60, 1..5),
    ) {
        check(writers, delays);
    }
}
