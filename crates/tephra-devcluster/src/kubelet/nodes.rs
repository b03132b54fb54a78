//! The simulated kubelets' nodes: registering a node (its Node object and Lease), the
//! heartbeats that renew the Leases and the Ready conditions, and the NotReady fault.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Kubelet, NodeSpec, str_at};
use crate::api::{DeleteOpts, Scope, WriteOpts};
use crate::conditions::set_condition;
use crate::resource::Builtin;
use crate::status::ApiError;
use crate::store::Obj;
use crate::time;

impl Kubelet {
    /// The pod garbage collector's part: pods bound to a node that is gone fail with
    /// `NodeLost` and are removed.
    pub(super) fn node_lost(self: &Arc<Self>, node: &str) {
        let api = self.api.clone();
        let pods = self.api.builtin(Builtin::Pod);
        let (all, _) = api.store.list("/pods", None, None);
        let node = node.to_string();
        let targets: Vec<Obj> = all
            .into_iter()
            .filter(|p| str_at(&p.value, "/spec/nodeName") == node)
            .collect();
        let task = tokio::spawn(async move {
            for p in targets {
                let key = p.key();
                let uid = p.uid().to_string();
                let _ = api.update(
                    &pods,
                    &key,
                    Scope::Status,
                    &WriteOpts::default(),
                    &mut |cur| {
                        let mut v = cur.clone();
                        if str_at(cur, "/metadata/uid") != uid
                            || matches!(str_at(cur, "/status/phase"), "Succeeded" | "Failed")
                        {
                            return Ok(v);
                        }
                        v["status"]["phase"] = json!("Failed");
                        v["status"]["reason"] = json!("NodeLost");
                        v["status"]["message"] = json!(format!(
                            "Node {node} which was running pod {} is unresponsive",
                            key.1
                        ));
                        Ok(v)
                    },
                );
                let _ = api.delete(
                    &pods,
                    &key,
                    &DeleteOpts {
                        grace: Some(0),
                        uid: Some(uid),
                        ..DeleteOpts::default()
                    },
                );
            }
        });
        self.tasks_push(task);
    }

    /// Registers a node: the Node object (capacity, allocatable, Ready) and its Lease.
    pub fn register(&self, spec: &NodeSpec) -> Result<(), ApiError> {
        let nodes = self.api.builtin(Builtin::Node);
        let now = time::now_rfc3339();
        let mut labels: BTreeMap<String, String> = spec.labels.clone();
        labels
            .entry("kubernetes.io/hostname".into())
            .or_insert_with(|| spec.name.clone());
        labels
            .entry("kubernetes.io/os".into())
            .or_insert_with(|| "linux".into());
        labels
            .entry("kubernetes.io/arch".into())
            .or_insert_with(|| "amd64".into());
        let index = self.api.store.count("/nodes");
        let node = json!({
            "metadata": {"name": spec.name, "labels": labels, "annotations": spec.annotations},
            "spec": {"taints": spec.taints},
            "status": {
                "capacity": spec.capacity,
                "allocatable": spec.capacity,
                "conditions": [ready_condition(true, &now)],
                "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", index / 250, index % 250 + 1)},
                              {"type": "Hostname", "address": spec.name}],
                "nodeInfo": {"kubeletVersion": "v1.32.0-tephra", "kubeProxyVersion": "", "osImage": "tephra simulated node",
                             "kernelVersion": "", "containerRuntimeVersion": "sim://1", "operatingSystem": "linux",
                             "architecture": "amd64", "machineID": "", "systemUUID": "", "bootID": ""},
            },
        });
        let mut node = node;
        if spec.taints.is_empty()
            && let Some(s) = node.get_mut("spec").and_then(Value::as_object_mut)
        {
            s.remove("taints");
        }
        self.api.create(&nodes, None, node, &WriteOpts::default())?;
        self.lift_not_ready(&spec.name)?;
        let leases = self.api.builtin(Builtin::Lease);
        self.api.create(
            &leases,
            Some("kube-node-lease"),
            json!({"metadata": {"name": spec.name},
                   "spec": {"holderIdentity": spec.name, "leaseDurationSeconds": 40,
                            "renewTime": time::now_rfc3339_micro()}}),
            &WriteOpts::default(),
        )?;
        Ok(())
    }

    /// Removes the `node.kubernetes.io/not-ready` taint a new Node is created with, once its
    /// kubelet runs it (the node lifecycle controller's part for a Ready node); a node held
    /// NotReady by a fault keeps it.
    pub(super) fn lift_not_ready(&self, node: &str) -> Result<(), ApiError> {
        if self.state().not_ready.contains(node) {
            return Ok(());
        }
        let nodes = self.api.builtin(Builtin::Node);
        let key = (String::new(), node.to_string());
        let tainted = |v: &Value| {
            v.pointer("/spec/taints")
                .and_then(Value::as_array)
                .is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t.get("key").and_then(Value::as_str) == Some(NOT_READY))
                })
        };
        if !self
            .api
            .get(&nodes, &key)
            .is_some_and(|n| tainted(&n.value))
        {
            return Ok(());
        }
        self.api.update(
            &nodes,
            &key,
            Scope::All,
            &WriteOpts::default(),
            &mut |cur| {
                let mut v = cur.clone();
                if let Some(ts) = v.pointer_mut("/spec/taints").and_then(Value::as_array_mut) {
                    ts.retain(|t| t.get("key").and_then(Value::as_str) != Some(NOT_READY));
                    if ts.is_empty()
                        && let Some(s) = v.get_mut("spec").and_then(Value::as_object_mut)
                    {
                        s.remove("taints");
                    }
                }
                Ok(v)
            },
        )?;
        Ok(())
    }

    pub(super) async fn heartbeats(self: Arc<Self>) {
        let leases = self.api.builtin(Builtin::Lease);
        let mut tick = tokio::time::interval(self.opts.heartbeat.max(Duration::from_millis(100)));
        tick.tick().await;
        loop {
            tick.tick().await;
            let (nodes, not_ready): (Vec<String>, HashSet<String>) = {
                let st = self.state();
                (st.nodes.keys().cloned().collect(), st.not_ready.clone())
            };
            for n in nodes.iter().filter(|n| !not_ready.contains(*n)) {
                let key = ("kube-node-lease".to_string(), n.clone());
                let _ = self.api.update(
                    &leases,
                    &key,
                    Scope::Main,
                    &WriteOpts::default(),
                    &mut |cur| {
                        let mut v = cur.clone();
                        v["spec"]["renewTime"] = json!(time::now_rfc3339_micro());
                        Ok(v)
                    },
                );
            }
        }
    }

    /// Marks a node NotReady (its Ready condition False, the `node.kubernetes.io/not-ready`
    /// NoSchedule taint, no more Lease renewals) or Ready again.
    pub fn set_ready(&self, node: &str, ready: bool) -> Result<(), ApiError> {
        {
            let mut st = self.state();
            if ready {
                st.not_ready.remove(node);
            } else {
                st.not_ready.insert(node.to_string());
            }
        }
        let nodes = self.api.builtin(Builtin::Node);
        let key = (String::new(), node.to_string());
        self.api.update(&nodes, &key, Scope::All, &WriteOpts::default(), &mut |cur| {
            let mut v = cur.clone();
            let now = time::now_rfc3339();
            set_condition(&mut v, ready_condition(ready, &now));
            let taint = json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": now});
            let mut taints: Vec<Value> = cur.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default();
            taints.retain(|t| t.get("key").and_then(Value::as_str) != Some("node.kubernetes.io/not-ready"));
            if !ready {
                taints.push(taint);
            }
            if taints.is_empty() {
                if let Some(s) = v.get_mut("spec").and_then(Value::as_object_mut) {
                    s.remove("taints");
                }
            } else {
                v["spec"]["taints"] = json!(taints);
            }
            Ok(v)
        })?;
        Ok(())
    }
}

/// The taint of a node that is not ready.
const NOT_READY: &str = "node.kubernetes.io/not-ready";

fn ready_condition(ready: bool, now: &str) -> Value {
    if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "kubelet stopped posting node status (tephra-devcluster fault)",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    }
}
