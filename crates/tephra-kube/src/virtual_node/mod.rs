//! The fleet's virtual kubelet: one Node on the control plane that every declared pod is bound
//! to once a member has its copy, so that the control plane's own tools reach the pod where it
//! runs. `kubectl logs` on a declared pod is the API server asking this node's kubelet
//! endpoint, which tephra serves (`logs.rs`) by reading the copy's log from its member; where
//! the member cannot answer, the answer names the `--context` to use.
//!
//! One Node for the whole fleet, not one per member: a pod's `nodeName` never changes, and
//! failover moves a declared pod's copy between members. The Node is tainted
//! `virtual-kubelet.io/provider=tephra:NoSchedule` and labelled `type=virtual-kubelet`, as
//! virtual kubelets are, so that nothing else is scheduled to it. As leader, tephra registers
//! it, keeps its Lease in `kube-node-lease` renewed and its Ready condition fresh, as a kubelet
//! does; the node lifecycle controller then leaves it alone while tephra runs. If no replica
//! runs for longer than the pods' `node.kubernetes.io/unreachable` toleration (300 s by
//! default), the control plane evicts them, as it evicts the pods of any node gone that long.
//!
//! A bound pod is deleted gracefully: the API server marks it and waits for its kubelet. Here
//! that is tephra: the copy in the member is deleted with the same grace period, and once it
//! is gone (or its member has left the fleet) the declared pod is removed with a grace period
//! of 0 and its uid as precondition, as a kubelet confirms a deletion.

mod logs;
pub mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::clients::Clients;
use crate::leader::Leadership;

/// The taint that keeps every other pod off the virtual node.
pub const TAINT_KEY: &str = "virtual-kubelet.io/provider";
/// How often the Lease is renewed (a kubelet's default).
const LEASE_RENEW: Duration = Duration::from_secs(10);
/// The Lease's duration (a kubelet's default).
const LEASE_SECONDS: i32 = 40;
/// How often the Ready condition is written again.
const STATUS_EVERY: Duration = Duration::from_secs(60);
/// How often terminating pods are looked at.
const FINALIZE_EVERY: Duration = Duration::from_secs(1);

/// Where and how the virtual kubelet serves.
#[derive(Clone, Debug)]
pub struct VirtualNodeOptions {
    /// The Node's name.
    pub name: String,
    /// The address the API server dials (an IP, or a host name it resolves).
    pub address: String,
    /// Where the kubelet endpoint listens (port 0: any free port, announced on the Node).
    pub listen: SocketAddr,
    /// CAs (DER) the API server's client certificate must chain to.
    pub client_ca: Vec<Vec<u8>>,
    /// Common names of the client certificates allowed (the API server's
    /// `--kubelet-client-certificate`).
    pub client_names: Vec<String>,
    /// The serving certificate chain and key, PEM; `None`: a self-signed one for `address`.
    pub serving: Option<(Vec<u8>, Vec<u8>)>,
}

impl VirtualNodeOptions {
    /// The common name kubeadm gives the API server's kubelet client certificate.
    pub const KUBEADM_CLIENT: &str = "kube-apiserver-kubelet-client";
}

/// Why the virtual kubelet could not start.
#[derive(Debug, thiserror::Error)]
pub enum VirtualNodeError {
    /// The certificates are unusable.
    #[error("virtual node TLS: {0}")]
    Tls(String),
    /// The endpoint's address cannot be bound.
    #[error("virtual node: listening on {addr}: {source}")]
    Listen {
        /// Address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The running virtual kubelet.
pub struct VirtualNode {
    /// Where its endpoint listens.
    pub addr: SocketAddr,
    /// Its tasks.
    pub tasks: Vec<JoinHandle<()>>,
}

/// Starts the virtual kubelet of the fleet whose clusters `clients` reaches.
pub async fn start(
    clients: Clients,
    options: VirtualNodeOptions,
    leadership: Leadership,
) -> Result<VirtualNode, VirtualNodeError> {
    let serving = match &options.serving {
        Some((cert, key)) => tls::Serving::from_pem(cert, key)?,
        None => tls::Serving::self_signed(&options.address)?,
    };
    let acceptor = tls::acceptor(serving, &options.client_ca)?;
    let listener =
        TcpListener::bind(options.listen)
            .await
            .map_err(|source| VirtualNodeError::Listen {
                addr: options.listen,
                source,
            })?;
    let addr = listener
        .local_addr()
        .map_err(|source| VirtualNodeError::Listen {
            addr: options.listen,
            source,
        })?;
    let options = Arc::new(options);
    let serve = logs::Endpoint {
        clients: clients.clone(),
        node: options.name.clone(),
        allowed: options.client_names.clone(),
    };
    let tasks = vec![
        tokio::spawn(logs::serve(listener, acceptor, Arc::new(serve))),
        tokio::spawn(keep_node(
            clients.control.clone(),
            Arc::clone(&options),
            addr.port(),
            leadership.clone(),
        )),
        tokio::spawn(finalize(clients, options.name.clone(), leadership)),
    ];
    tracing::info!(node = %options.name, %addr, "virtual kubelet serving");
    Ok(VirtualNode { addr, tasks })
}

/// The Node as tephra registers it: labels, taint, and a status naming its endpoint.
pub fn node(name: &str, address: &str, port: u16) -> Node {
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "type": "virtual-kubelet",
                "kubernetes.io/role": "agent",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                tephra_api::well_known::VIRTUAL_NODE: "true",
            },
        },
        "spec": {"taints": [{"key": TAINT_KEY, "value": "tephra", "effect": "NoSchedule"}]},
        "status": status(address, port),
    });
    serde_json::from_value(node).unwrap_or_default()
}

/// The Node's status: Ready, the address and port the API server dials.
fn status(address: &str, port: u16) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let kind = if address.parse::<std::net::IpAddr>().is_ok() {
        "InternalIP"
    } else {
        "Hostname"
    };
    json!({
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "tephra serves this node: its pods run in member clusters",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }],
        "addresses": [{"type": kind, "address": address}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": {
            "kubeletVersion": concat!("tephra-", env!("CARGO_PKG_VERSION")),
            "operatingSystem": "linux", "architecture": "amd64",
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
            "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": "",
        },
    })
}

/// As leader: registers the Node, renews its Lease and refreshes its Ready condition.
async fn keep_node(
    client: Client,
    options: Arc<VirtualNodeOptions>,
    port: u16,
    leadership: Leadership,
) {
    let mut tick = tokio::time::interval(LEASE_RENEW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut fresh: Option<tokio::time::Instant> = None;
    let mut failing = false;
    loop {
        tick.tick().await;
        if !leadership.is_leader() {
            fresh = None;
            continue;
        }
        let result = async {
            let mut uid = None;
            if fresh.is_none_or(|at| at.elapsed() >= STATUS_EVERY) {
                uid = Some(register(&client, &options, port).await?);
                fresh = Some(tokio::time::Instant::now());
            }
            renew(&client, &options.name, uid).await
        }
        .await;
        match result {
            Ok(()) if failing => {
                failing = false;
                tracing::info!(node = %options.name, "virtual node heartbeats again");
            }
            Ok(()) => {}
            Err(e) => {
                fresh = None;
                if !failing {
                    tracing::warn!(node = %options.name, error = %e, "virtual node heartbeat failed");
                }
                failing = true;
            }
        }
    }
}

/// Creates the Node, or writes its status; returns its uid.
async fn register(
    client: &Client,
    options: &VirtualNodeOptions,
    port: u16,
) -> Result<String, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let made = node(&options.name, &options.address, port);
    // Registered before (by this replica or another): its status says where it is served now.
    crate::gone::done_if_exists(nodes.create(&PostParams::default(), &made).await)?;
    let patch = json!({"status": status(&options.address, port)});
    let live = nodes
        .patch_status(
            &options.name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await?;
    Ok(live.uid().unwrap_or_default())
}

/// Renews the node's Lease, made (owned by the Node, `owner`) when missing.
async fn renew(client: &Client, name: &str, owner: Option<String>) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let patch = json!({"spec": {"holderIdentity": name, "renewTime": now}});
    match leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(e) if crate::gone::is_gone(&e) => {}
        other => return other.map(|_| ()),
    }
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("kube-node-lease".into()),
            owner_references: owner.filter(|u| !u.is_empty()).map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.to_string(),
                    uid,
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_string()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    };
    crate::gone::done_if_exists(leases.create(&PostParams::default(), &lease).await)
}

/// The member a declared pod's copy is in, by its `tephra.io/member` label.
fn member_of(p: &Pod) -> Option<&str> {
    p.labels()
        .get(tephra_api::well_known::MEMBER)
        .map(String::as_str)
}

/// As leader: finishes the deletion of the pods bound to the node, as their kubelet.
async fn finalize(clients: Clients, node: String, leadership: Leadership) {
    let pods: Api<Pod> = Api::all(clients.control.clone());
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let stream = reflector::reflector(writer, watcher::watcher(pods, config))
        .default_backoff()
        .touched_objects();
    let watch = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    let mut tick = tokio::time::interval(FINALIZE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut told: BTreeMap<String, String> = BTreeMap::new();
    loop {
        tick.tick().await;
        if watch.is_finished() {
            return;
        }
        if !leadership.is_leader() {
            continue;
        }
        let terminating: Vec<Arc<Pod>> = reader
            .state()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .collect();
        told.retain(|uid, _| terminating.iter().any(|p| p.uid().as_ref() == Some(uid)));
        for p in terminating {
            if let Err(e) = finish_deletion(&clients, &p).await {
                let uid = p.uid().unwrap_or_default();
                let text = e.to_string();
                if told.get(&uid) != Some(&text) {
                    tracing::warn!(pod = %format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
                        error = %text, "deleting a declared pod's copy failed; retrying");
                    told.insert(uid, text);
                }
            }
        }
    }
}

/// Deletes the copy of the terminating declared pod `p` and, once it is gone, `p` itself.
async fn finish_deletion(clients: &Clients, p: &Pod) -> Result<(), kube::Error> {
    let namespace = p.namespace().unwrap_or_default();
    let name = p.name_any();
    let uid = p.uid().unwrap_or_default();
    let member = member_of(p).and_then(|m| clients.member(m));
    if let Some(member) = member {
        let copies: Api<Pod> = Api::namespaced(member, &namespace);
        if let Some(copy) = copies.get_opt(&name).await? {
            let copies_it = copy
                .annotations()
                .get(tephra_api::well_known::DECLARED_UID)
                .is_some_and(|u| *u == uid);
            if copies_it {
                if copy.metadata.deletion_timestamp.is_none() {
                    let params = DeleteParams {
                        grace_period_seconds: p
                            .metadata
                            .deletion_grace_period_seconds
                            .and_then(|g| u32::try_from(g).ok()),
                        preconditions: Some(Preconditions {
                            uid: copy.uid(),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    crate::gone::done_if_gone(copies.delete(&name, &params).await)?;
                }
                return Ok(());
            }
        }
    }
    let pods: Api<Pod> = Api::namespaced(clients.control.clone(), &namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(&name, &params).await {
        Ok(_) => Ok(()),
        // Gone, or a new pod of the same name: nothing of this one is left.
        Err(e) if crate::gone::is_gone(&e) || crate::gone::is_conflict(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Binds the declared pod `namespace/name` to the virtual node `node` (its copy is placed);
/// one bound already (placed again after failover) stays where it is.
pub async fn bind(
    control: &Client,
    namespace: &str,
    name: &str,
    node: &str,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(control.clone(), namespace);
    let body = tephra_api::binding::pod_binding(namespace, name, node);
    let r = pods
        .create_subresource::<_, serde_json::Value>("binding", name, &PostParams::default(), &body)
        .await;
    match r {
        Err(e) if crate::gone::is_gone(&e) || crate::gone::is_conflict(&e) => Ok(()),
        other => other.map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_tainted_labelled_and_names_its_endpoint() {
        let n = node("tephra", "10.0.0.7", 10250);
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(v["metadata"]["labels"]["type"], "virtual-kubelet");
        assert_eq!(v["spec"]["taints"][0]["key"], TAINT_KEY);
        assert_eq!(v["spec"]["taints"][0]["effect"], "NoSchedule");
        assert_eq!(
            v["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
        assert_eq!(v["status"]["addresses"][0]["type"], "InternalIP");
        assert_eq!(v["status"]["addresses"][0]["address"], "10.0.0.7");
        assert_eq!(v["status"]["conditions"][0]["status"], "True");
        let by_name = serde_json::to_value(node("t", "tephra.example", 1)).unwrap();
        assert_eq!(by_name["status"]["addresses"][0]["type"], "Hostname");
    }
}
