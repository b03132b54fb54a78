//! Faults driven through the API itself, for `tephra dev` users: annotate a Cluster on the
//! control plane with `tephra.io/dev-fault: unreachable` (the member stops answering) or a
//! 5xx code such as `"503"` (it answers every request with it), or a Node in a member with
//! `tephra.io/dev-fault: not-ready`; remove the annotation to restore. Deleting a Node is the
//! node-deletion fault as it is. Tests call the same faults on [`Handle`] directly.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cluster::Handle;
use crate::store::{EventType, Subscriber};

/// The annotation that injects a fault.
pub const FAULT_ANNOTATION: &str = "tephra.io/dev-fault";

fn annotation(obj: &Value) -> String {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(FAULT_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn name(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Watches the fault annotations of every Cluster (on the control plane) and Node (on each
/// member) and applies them, until the returned task is aborted (abort it before dropping the
/// handle: it holds one).
pub fn watch_annotations(handle: Arc<Handle>) -> JoinHandle<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Option<String>, EventType, Value)>();
    // Clusters on the control plane: member faults.
    if let Some(cp) = handle.control_plane() {
        let (etx, mut erx) = mpsc::unbounded_channel();
        if let Ok(start) = cp.api.store.watch(
            "cluster.tephra.io/clusters",
            None,
            Subscriber::Unbounded(etx),
        ) {
            for o in start.initial {
                let _ = tx.send((None, EventType::Added, o.value.clone()));
            }
        }
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = erx.recv().await {
                if tx.send((None, ev.type_, ev.object.value.clone())).is_err() {
                    return;
                }
            }
        });
    }
    // Nodes in each member: node faults.
    for m in handle.members() {
        let (etx, mut erx) = mpsc::unbounded_channel();
        let _ = m
            .api
            .store
            .watch("/nodes", None, Subscriber::Unbounded(etx));
        let member = m.api.name.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = erx.recv().await {
                if tx
                    .send((Some(member.clone()), ev.type_, ev.object.value.clone()))
                    .is_err()
                {
                    return;
                }
            }
        });
    }
    drop(tx);
    tokio::spawn(async move {
        let mut members: HashMap<String, String> = HashMap::new();
        let mut nodes: HashMap<(String, String), String> = HashMap::new();
        while let Some((member, type_, obj)) = rx.recv().await {
            let want = if type_ == EventType::Deleted {
                String::new()
            } else {
                annotation(&obj)
            };
            match member {
                None => {
                    let cluster = name(&obj);
                    if handle.server(&cluster).is_none() || members.get(&cluster) == Some(&want) {
                        continue;
                    }
                    members.insert(cluster.clone(), want.clone());
                    let result = match want.as_str() {
                        "" => handle.restore_member(&cluster).await,
                        "unreachable" => {
                            let _ = handle.restore_member(&cluster).await;
                            handle.stop_member(&cluster).await
                        }
                        code => match code.parse::<u16>() {
                            Ok(c) if (500..600).contains(&c) => {
                                let _ = handle.restore_member(&cluster).await;
                                handle.fail_member_with(&cluster, c)
                            }
                            _ => {
                                tracing::warn!(%cluster, fault = %code, "unknown fault: use unreachable or a 5xx code");
                                Ok(())
                            }
                        },
                    };
                    tracing::info!(%cluster, fault = %want, ok = result.is_ok(), "member fault");
                }
                Some(member) => {
                    if type_ == EventType::Deleted {
                        nodes.remove(&(member, name(&obj)));
                        continue;
                    }
                    let key = (member.clone(), name(&obj));
                    let was = nodes.get(&key).cloned().unwrap_or_default();
                    if was == want {
                        continue;
                    }
                    nodes.insert(key.clone(), want.clone());
                    let result = match want.as_str() {
                        "not-ready" => handle.node_not_ready(&member, &key.1),
                        "" => handle.node_ready(&member, &key.1),
                        other => {
                            tracing::warn!(node = %key.1, fault = %other, "unknown node fault: use not-ready");
                            Ok(())
                        }
                    };
                    tracing::info!(%member, node = %key.1, fault = %want, ok = result.is_ok(), "node fault");
                }
            }
        }
    })
}
