//! The chart on the real Kubernetes (`tephra-envtest`): real API servers, each with its
//! controller manager and simulated kubelets, the rendered objects installed on them as Helm
//! would, kubeconfigs with the ServiceAccounts' real tokens (TokenRequest) for the Deployments'
//! processes, and the audit logs read as they grow: the chart's ServiceAccounts' refusals, and
//! the grants their requests used, with what admission checked beyond each request's verb (an
//! apply that creates is a `create`; a new `blockOwnerDeletion` reference needs `update` on the
//! owner's `finalizers`, under `OwnerReferencesPermissionEnforcement`).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::core::GroupVersionKind;
use serde_json::Value;
use tephra_envtest::audit::AuditEvent;
use tephra_envtest::kubelet::{KubeletOptions, Kubelets, NodeSpec};
use tephra_envtest::{Cluster, ClusterOptions, Env, Release, User};

use super::roles::Grants;
use super::{NS, apply, deployment_accounts, of_kind};

/// Whether `user` is one of the chart's ServiceAccounts (all live in the release namespace).
pub fn is_chart_account(user: &str) -> bool {
    user.strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.strip_prefix(NS))
        .is_some_and(|rest| rest.starts_with(':'))
}

/// The chart's ServiceAccounts' requests in one API server's audit log, read as it grows.
pub struct AuditTail {
    cluster: String,
    path: PathBuf,
    state: Mutex<Tail>,
}

#[derive(Default)]
struct Tail {
    offset: u64,
    events: Vec<AuditEvent>,
    /// Where the API server was restarted: from the event index where it stopped to the one
    /// where it was ready again.
    restarts: Vec<(usize, Option<usize>)>,
}

impl Tail {
    /// Whether the event at `i` came while the API server restarted: it serves before it is
    /// ready, when its authorizer has not loaded the roles yet and refuses what they grant
    /// (`RBAC: [clusterrole ... not found]`); a real client meets these too, and retries.
    fn while_restarting(&self, i: usize) -> bool {
        self.restarts
            .iter()
            .any(|(from, to)| i >= *from && to.is_none_or(|t| i < t))
    }
}

impl AuditTail {
    fn new(cluster: &Cluster) -> Self {
        Self {
            cluster: cluster.name().to_string(),
            path: cluster.dir().join("audit.log"),
            state: Mutex::default(),
        }
    }

    /// Reads what was logged since the last read (whole lines only).
    fn refresh(&self) -> MutexGuard<'_, Tail> {
        let mut tail = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return tail;
        };
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(tail.offset)).is_err() || file.read_to_end(&mut bytes).is_err()
        {
            return tail;
        }
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            return tail;
        };
        let text = String::from_utf8_lossy(&bytes[..=end]);
        let new = tephra_envtest::audit::parse(&text)
            .into_iter()
            .filter(|e| is_chart_account(&e.user));
        tail.events.extend(new);
        tail.offset += end as u64 + 1;
        tail
    }

    /// The chart's ServiceAccounts' requests so far.
    pub fn events(&self) -> Vec<AuditEvent> {
        self.refresh().events.clone()
    }

    /// The API server is being stopped, to be started again.
    pub fn restarting(&self) {
        let mut tail = self.refresh();
        let at = tail.events.len();
        tail.restarts.push((at, None));
    }

    /// The API server is ready again after [`AuditTail::restarting`].
    pub fn restarted(&self) {
        let mut tail = self.refresh();
        let at = tail.events.len();
        if let Some((_, to)) = tail.restarts.last_mut() {
            *to = Some(at);
        }
    }

    /// Their refused requests so far, one line each: the request and the server's message
    /// (but those made while the server restarted: see `Tail::while_restarting`).
    pub fn refusals(&self) -> Vec<String> {
        let tail = self.refresh();
        tail.events
            .iter()
            .enumerate()
            .filter(|(i, e)| e.refused() && !tail.while_restarting(*i))
            .map(|(_, e)| {
                format!(
                    "{}: {} {} {}/{} {}/{}: {}",
                    self.cluster,
                    e.user,
                    e.verb,
                    e.group,
                    e.resource_path(),
                    e.namespace,
                    e.name,
                    e.message
                )
            })
            .collect()
    }
}

/// One real cluster of a chart test.
pub struct RealCluster {
    /// Its name.
    pub name: String,
    /// An admin client.
    pub client: kube::Client,
    /// Its nodes' kubelets.
    pub kubelets: Kubelets,
    /// Its audit log.
    pub audit: Arc<AuditTail>,
    /// The API server and controller manager.
    pub cluster: Cluster,
}

/// Real clusters on one environment (dropped last).
pub struct Real {
    /// The clusters, in the order asked for.
    pub clusters: Vec<RealCluster>,
    /// Their environment.
    pub env: Env,
}

impl Real {
    /// Starts one cluster per `(name, nodes)`, each an API server (logging the bodies of writes
    /// too) with its controller manager and kubelets for its nodes; `None` (after saying why)
    /// without the real components, except under `CI`, where it fails.
    pub async fn start(specs: &[(&str, Vec<NodeSpec>)]) -> Option<Self> {
        let bins = tephra_envtest::require(&Release::Oldest)?;
        let env = Env::start(bins).await.expect("etcd starts");
        let options = ClusterOptions {
            controller_manager: true,
            audit_request_bodies: true,
            // Streaming lists refused, as by a Kubernetes before 1.34: the components list
            // in pages, the path whose grants (`list` and `watch`) the chart must cover; a
            // streaming list is authorized as `watch` alone.
            apiserver_args: vec!["--feature-gates=WatchList=false".into()],
            ..ClusterOptions::default()
        };
        let clusters = futures::future::try_join_all(
            specs
                .iter()
                .map(|(name, _)| env.cluster(name, options.clone())),
        )
        .await
        .expect("the API servers start");
        let kubelet = KubeletOptions {
            start_delay: Duration::from_millis(100),
            heartbeat: Duration::from_secs(1),
        };
        let started =
            futures::future::join_all(specs.iter().zip(&clusters).map(|((_, nodes), cluster)| {
                let kubelet = kubelet.clone();
                async move {
                    let client = cluster.client().await.expect("an admin client");
                    let kubelets = Kubelets::start(client.clone(), nodes, kubelet)
                        .await
                        .expect("the nodes are ready");
                    (client, kubelets)
                }
            }))
            .await;
        let clusters = specs
            .iter()
            .zip(clusters)
            .zip(started)
            .map(|(((name, _), cluster), (client, kubelets))| RealCluster {
                name: name.to_string(),
                client,
                kubelets,
                audit: Arc::new(AuditTail::new(&cluster)),
                cluster,
            })
            .collect();
        Some(Self { clusters, env })
    }

    /// The cluster named `name`.
    pub fn get(&self, name: &str) -> &RealCluster {
        self.clusters
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no cluster {name}"))
    }

    /// A guard over every cluster's audit log.
    pub fn guard(&self) -> super::Guard {
        super::Guard::Real(self.clusters.iter().map(|c| c.audit.clone()).collect())
    }
}

/// Installs rendered objects as Helm would: the CRDs first (until Established), the release
/// namespace, then every other object with server-side apply and strict field validation
/// (retried while a new CRD's kind is not yet discovered). Panics naming a refused object.
pub async fn install(client: &kube::Client, docs: &[Value]) {
    let crds: Vec<Value> = of_kind(docs, "CustomResourceDefinition")
        .into_iter()
        .cloned()
        .collect();
    tephra_envtest::objects::install_crds(client, &crds)
        .await
        .expect("the chart's CRDs are established");
    tephra_envtest::tier::namespace(client, NS)
        .await
        .expect("the release namespace");
    for doc in docs
        .iter()
        .filter(|d| d["kind"] != "CustomResourceDefinition")
    {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match apply(client, doc).await {
                Ok(()) => break,
                Err(e) if e.contains("is not served") && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("{} {} refused: {e}", doc["kind"], doc["metadata"]["name"]),
            }
        }
    }
}

/// A kubeconfig for each ServiceAccount the rendered Deployments run as, with a token the
/// cluster issued it (TokenRequest).
pub async fn kubeconfigs(cluster: &Cluster, docs: &[Value]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for sa in deployment_accounts(docs) {
        let token = cluster
            .service_account_token(NS, &sa)
            .await
            .expect("a token");
        out.insert(
            sa,
            cluster
                .kubeconfig(&User::Token(token))
                .expect("a kubeconfig"),
        );
    }
    out
}

/// What each chart ServiceAccount was allowed to do, from one server's audit log: each
/// authorized request that admission did not refuse, as (group, resource[/subresource], verb);
/// what `OwnerReferencesPermissionEnforcement` checked beyond it: a write that gave an object
/// a new owner (by uid, against the owners its earlier writes in the log gave it) as `delete`
/// on it; an apply or update that created its object as a `create` too; and for each object
/// created with a `blockOwnerDeletion` reference, `update` on the owner's `finalizers` (its
/// kind mapped to its resource by the server's discovery).
pub async fn used_grants(client: &kube::Client, tail: &AuditTail) -> BTreeMap<String, Grants> {
    let mut used: BTreeMap<String, Grants> = BTreeMap::new();
    let mut resources: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    // The owner uids of each object (group, resource, namespace, name) written with owners.
    let mut owners: BTreeMap<[String; 4], std::collections::BTreeSet<String>> = BTreeMap::new();
    for e in tail.events() {
        if e.refused() || e.decision != "allow" || e.resource.is_empty() {
            continue;
        }
        let set = used.entry(e.user.clone()).or_default();
        set.insert((e.group.clone(), e.resource_path(), e.verb.clone()));
        let object = [
            e.group.clone(),
            e.resource.clone(),
            e.namespace.clone(),
            e.name.clone(),
        ];
        let named: std::collections::BTreeSet<String> =
            e.request_owners.iter().map(|o| o.uid.clone()).collect();
        if e.subresource.is_empty() && !named.is_empty() {
            match (e.code, owners.get_mut(&object)) {
                (201, _) => drop(owners.insert(object, named)),
                (200, Some(known)) => {
                    if !named.is_subset(known) {
                        set.insert((e.group.clone(), e.resource.clone(), "delete".into()));
                    }
                    known.extend(named);
                }
                _ => {}
            }
        }
        if e.code != 201 {
            continue;
        }
        if matches!(e.verb.as_str(), "patch" | "update") && e.subresource.is_empty() {
            set.insert((e.group.clone(), e.resource.clone(), "create".into()));
        }
        for owner in e
            .request_owners
            .iter()
            .filter(|o| o.block_owner_deletion == Some(true))
        {
            let key = (owner.api_version.clone(), owner.kind.clone());
            if !resources.contains_key(&key) {
                let (group, version) = owner
                    .api_version
                    .rsplit_once('/')
                    .unwrap_or(("", owner.api_version.as_str()));
                let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
                let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .unwrap_or_else(|e| panic!("{key:?} is not served: {e}"));
                resources.insert(key.clone(), (resource.group, resource.plural));
            }
            let (group, plural) = &resources[&key];
            set.insert((
                group.clone(),
                format!("{plural}/finalizers"),
                "update".into(),
            ));
        }
    }
    used
}

/// A CSI external provisioner for the `fast` class, as far as a scheduler depends on one:
/// each claim of the class whose node the scheduler selected (`volume.kubernetes.io/
/// selected-node`) gets a volume on that node, pre-bound to it, which the controller manager's
/// PV controller then binds. Runs until aborted.
pub fn provisioner(client: kube::Client) -> tokio::task::JoinHandle<()> {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use kube::api::{Api, PostParams};
    tokio::spawn(async move {
        let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        loop {
            for c in claims
                .list(&Default::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                let spec = c.spec.clone().unwrap_or_default();
                let node = c
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("volume.kubernetes.io/selected-node"));
                let (Some(node), Some(uid), None) = (node, &c.metadata.uid, &spec.volume_name)
                else {
                    continue;
                };
                if spec.storage_class_name.as_deref() != Some("fast") {
                    continue;
                }
                let storage = spec
                    .resources
                    .and_then(|r| r.requests)
                    .and_then(|r| r.get("storage").cloned());
                let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
                    "apiVersion": "v1", "kind": "PersistentVolume",
                    "metadata": {"name": format!("pvc-{uid}")},
                    "spec": {"capacity": {"storage": storage}, "accessModes": spec.access_modes,
                             "storageClassName": "fast", "persistentVolumeReclaimPolicy": "Delete",
                             "csi": {"driver": "csi.example.com", "volumeHandle": uid},
                             "claimRef": {"namespace": c.metadata.namespace, "name": c.metadata.name,
                                          "uid": uid},
                             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": "kubernetes.io/hostname", "operator": "In",
                                  "values": [node]}]}]}}}
                }))
                .unwrap();
                let _ = volumes.create(&PostParams::default(), &pv).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}
