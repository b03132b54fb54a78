//! The watchers: one per kind per cluster, each a `kube::runtime::watcher` stream turned into
//! [`Update`]s for the state loop. A (re)list arrives object by object between
//! [`Change::ListStart`] and [`Change::ListDone`], so that the state loop replaces what it knew
//! of that kind in that cluster instead of adding to it (after a watch error or a 410 nothing
//! is lost or counted twice), without holding the whole list in memory at once.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use tracing::Instrument;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as KubePodGroup;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tephra_api::{
    Cluster as ApiCluster, HyperNode, PodGroup, PropagationPolicy, Queue, ResourceBinding,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::slim::Watched;

pub use tephra_index::observed::{Change, Kind, Obj, Update};

/// How long a cluster that does not serve an [optional](Kind::optional) kind goes before it
/// is asked again (a CRD installed later is seen within this long).
pub const ABSENT_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// Starts a watcher of `api` that sends its updates to `tx` until the receiver is gone.
/// Errors are retried after [`crate::retry::watch`]'s delays, logged and counted. An
/// [optional](Kind::optional) kind the cluster does not serve (404) is reported once as an
/// empty list, so that the scheduler does not wait for it, and looked for again every
/// [`ABSENT_RECHECK`]: a member without the HyperNode CRD is not asked every few seconds.
pub fn spawn<K>(
    api: Api<K>,
    with: (Arc<str>, Kind, mpsc::Sender<Update>, Arc<Metrics>),
    wrap: fn(K) -> Obj,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    spawn_selected(api, None, with, wrap)
}

/// [`spawn`], watching only the objects a field selector (`fields`) picks.
pub fn spawn_selected<K>(
    api: Api<K>,
    fields: Option<String>,
    (cluster, kind, tx, metrics): (Arc<str>, Kind, mpsc::Sender<Update>, Arc<Metrics>),
    wrap: fn(K) -> Obj,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    // The client's own log lines (a connection refused) name the cluster through this span,
    // at the error level so that it is there whatever level the log shows.
    let span = tracing::error_span!("watch", cluster = %cluster, kind = ?kind);
    let task = async move {
        // With [`STREAMING_LISTS`], lists come as a stream of watch events first (Kubernetes'
        // streaming lists, on by default from 1.34): the server encodes while this side
        // decodes, where a paged list waits for each page whole (50,000 pods on a real
        // kube-apiserver: 2.1 s against 2.6–3.4 s). A server that refuses them is listed in
        // pages from then on.
        let mut streaming = STREAMING_LISTS;
        let mut stream = watcher(api.clone(), streaming, fields.as_deref())
            .backoff(crate::retry::watch())
            .boxed();
        let mut absent = false;
        let mut failing = Failing::default();
        let mut listing: Option<(std::time::Instant, u64)> = None;
        while let Some(event) = stream.next().await {
            let send = |change| {
                tx.send(Update {
                    cluster: Arc::clone(&cluster),
                    kind,
                    change,
                })
            };
            if let Err(e) = &event
                && kind.optional()
                && (error_code(e) == 404 || (kind.forbidden_is_absent() && error_code(e) == 403))
            {
                if !absent {
                    absent = true;
                    tracing::info!(
                        cluster = %cluster,
                        kind = kind.as_str(),
                        why = kind.absent_why(),
                        "not served by this cluster (or not readable): it has none"
                    );
                    for change in [Change::ListStart, Change::ListDone] {
                        if send(change).await.is_err() {
                            return;
                        }
                    }
                }
                tokio::time::sleep(ABSENT_RECHECK).await;
                stream = watcher(api.clone(), streaming, fields.as_deref())
                    .backoff(crate::retry::watch())
                    .boxed();
                continue;
            }
            absent = false;
            if streaming
                && let Err(e) = &event
                && refuses_streaming(e)
            {
                streaming = false;
                if first_refusal(&cluster) {
                    tracing::info!(
                        error = %crate::brief::watch(e),
                        "the server does not stream lists (sendInitialEvents); listing in pages"
                    );
                } else {
                    tracing::debug!("listing in pages");
                }
                stream = watcher(api.clone(), streaming, fields.as_deref())
                    .backoff(crate::retry::watch())
                    .boxed();
                continue;
            }
            let change = match event {
                Ok(WatchEvent::Init) => {
                    listing = Some((std::time::Instant::now(), 0));
                    Change::ListStart
                }
                Ok(WatchEvent::InitApply(o)) => {
                    if let Some((_, n)) = &mut listing {
                        *n += 1;
                    }
                    Change::Listed(wrap(o))
                }
                Ok(WatchEvent::InitDone) => {
                    if let Some((since, n)) = listing.take() {
                        tracing::debug!(
                            objects = n,
                            ms = since.elapsed().as_millis() as u64,
                            "listed"
                        );
                    }
                    Change::ListDone
                }
                Ok(WatchEvent::Apply(o)) => Change::Apply(wrap(o)),
                Ok(WatchEvent::Delete(o)) => Change::Delete(wrap(o)),
                Err(e) => {
                    let _ = tx
                        .send(Update {
                            cluster: Arc::clone(&cluster),
                            kind,
                            change: Change::Failed,
                        })
                        .await;
                    metrics.api_error(&cluster, "watch", error_code(&e));
                    failing.failed(&cluster, kind, &crate::brief::watch(&e));
                    continue;
                }
            };
            failing.works(&cluster, kind);
            let update = Update {
                cluster: Arc::clone(&cluster),
                kind,
                change,
            };
            if tx.send(update).await.is_err() {
                return;
            }
        }
    };
    tokio::spawn(task.instrument(span))
}

/// One watch's run of failures: the first of each distinct error is a warning, its repeats
/// are counted (debug lines), and the watch working again says how many there were.
#[derive(Default)]
struct Failing {
    last: Option<String>,
    count: u64,
}

impl Failing {
    fn failed(&mut self, cluster: &str, kind: Kind, error: &str) {
        self.count += 1;
        if self.last.as_deref() == Some(error) {
            tracing::debug!(
                cluster,
                kind = kind.as_str(),
                error,
                failures = self.count,
                "watch still failing; retrying"
            );
        } else {
            tracing::warn!(
                cluster,
                kind = kind.as_str(),
                error,
                "watch failed; retrying"
            );
            self.last = Some(error.to_string());
        }
    }

    fn works(&mut self, cluster: &str, kind: Kind) {
        if self.count > 0 {
            tracing::info!(
                cluster,
                kind = kind.as_str(),
                failures = self.count,
                "watch works again"
            );
            *self = Self::default();
        }
    }
}

/// The HTTP status of a watcher error, 0 when there is none.
fn error_code(e: &watcher::Error) -> u16 {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code,
        watcher::Error::WatchError(s) => s.code,
        _ => 0,
    }
}

/// The watchers of one member cluster: its Nodes and Pods, its storage objects (claims,
/// volumes, classes, attach limits), its DRA objects (device classes, slices, claims) and its
/// HyperNodes.
pub fn spawn_member(
    client: &Client,
    cluster: &Arc<str>,
    tx: &mpsc::Sender<Update>,
    metrics: &Arc<Metrics>,
) -> Vec<JoinHandle<()>> {
    let go = |kind| (Arc::clone(cluster), kind, tx.clone(), Arc::clone(metrics));
    vec![
        spawn(
            Api::<Watched<Node>>::all(client.clone()),
            go(Kind::Node),
            |o| Obj::Node(Box::new(o.into_inner())),
        ),
        spawn(
            Api::<Watched<Pod>>::all(client.clone()),
            go(Kind::Pod),
            |o| Obj::Pod(Box::new(o.into_inner())),
        ),
        spawn(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            go(Kind::Pvc),
            |o| Obj::Pvc(Box::new(o)),
        ),
        spawn(
            Api::<PersistentVolume>::all(client.clone()),
            go(Kind::Pv),
            |o| Obj::Pv(Box::new(o)),
        ),
        spawn(
            Api::<StorageClass>::all(client.clone()),
            go(Kind::StorageClass),
            |o| Obj::StorageClass(Box::new(o)),
        ),
        spawn(
            Api::<CSINode>::all(client.clone()),
            go(Kind::CsiNode),
            |o| Obj::CsiNode(Box::new(o)),
        ),
        spawn(
            Api::<DeviceClass>::all(client.clone()),
            go(Kind::DeviceClass),
            |o| Obj::DeviceClass(Box::new(o)),
        ),
        spawn(
            Api::<ResourceSlice>::all(client.clone()),
            go(Kind::ResourceSlice),
            |o| Obj::ResourceSlice(Box::new(o)),
        ),
        spawn(
            Api::<ResourceClaim>::all(client.clone()),
            go(Kind::ResourceClaim),
            |o| Obj::ResourceClaim(Box::new(o)),
        ),
        spawn(
            Api::<HyperNode>::all(client.clone()),
            go(Kind::HyperNode),
            |o| Obj::HyperNode(Box::new(o)),
        ),
    ]
}

/// The watchers of the control plane: PodGroups (Volcano's, and Kubernetes' own where the
/// server serves `scheduling.k8s.io/v1beta1`), Queues, PriorityClasses and
/// PodDisruptionBudgets.
pub fn spawn_control(
    client: &Client,
    cluster: &Arc<str>,
    tx: &mpsc::Sender<Update>,
    metrics: &Arc<Metrics>,
) -> Vec<JoinHandle<()>> {
    let go = |kind| (Arc::clone(cluster), kind, tx.clone(), Arc::clone(metrics));
    vec![
        spawn(
            Api::<PodGroup>::all(client.clone()),
            go(Kind::PodGroup),
            |o| Obj::PodGroup(Box::new(o)),
        ),
        spawn_kube_groups(client.clone(), go(Kind::KubePodGroup)),
        spawn(Api::<Queue>::all(client.clone()), go(Kind::Queue), |o| {
            Obj::Queue(Box::new(o))
        }),
        spawn(
            Api::<PriorityClass>::all(client.clone()),
            go(Kind::PriorityClass),
            |o| Obj::PriorityClass(Box::new(o)),
        ),
        spawn(
            Api::<PodDisruptionBudget>::all(client.clone()),
            go(Kind::Pdb),
            |o| Obj::Pdb(Box::new(o)),
        ),
    ]
}

/// The watcher of the vGPU device configuration ConfigMap `namespace/name` in the scheduler's
/// own cluster (`cluster`): its dynamic MIG geometries.
pub fn spawn_device_config(
    client: &Client,
    cluster: &Arc<str>,
    tx: &mpsc::Sender<Update>,
    metrics: &Arc<Metrics>,
    (namespace, name): (&str, &str),
) -> JoinHandle<()> {
    spawn_selected(
        Api::<ConfigMap>::namespaced(client.clone(), namespace),
        Some(format!("metadata.name={name}")),
        (
            Arc::clone(cluster),
            Kind::DeviceConfig,
            tx.clone(),
            Arc::clone(metrics),
        ),
        |o| Obj::DeviceConfig(Box::new(o)),
    )
}

/// The watchers of a fleet's control plane: its `Cluster` objects, its PropagationPolicies,
/// its ResourceBindings (for their graceful-eviction tasks) and, with `declared`, its Pods (the pods jobs declare there, for the scheduler to place in a
/// member).
pub fn spawn_fleet(
    client: &Client,
    control: &Arc<str>,
    tx: &mpsc::Sender<Update>,
    metrics: &Arc<Metrics>,
    declared: bool,
) -> Vec<JoinHandle<()>> {
    let go = |kind| (Arc::clone(control), kind, tx.clone(), Arc::clone(metrics));
    let mut out = vec![
        spawn(
            Api::<ApiCluster>::all(client.clone()),
            go(Kind::Cluster),
            |o| Obj::Cluster(Box::new(o)),
        ),
        spawn(
            Api::<PropagationPolicy>::all(client.clone()),
            go(Kind::Policy),
            |o| Obj::Policy(Box::new(o)),
        ),
        spawn(
            Api::<ResourceBinding>::all(client.clone()),
            go(Kind::Binding),
            |o| Obj::Binding(Box::new(o)),
        ),
    ];
    if declared {
        out.push(spawn(
            Api::<Watched<Pod>>::all(client.clone()),
            go(Kind::Pod),
            |o| Obj::Pod(Box::new(o.into_inner())),
        ));
        // The claims declared pods use, copied to their member when they are placed.
        out.push(spawn(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            go(Kind::Pvc),
            |o| Obj::Pvc(Box::new(o)),
        ));
        out.push(spawn(
            Api::<ResourceClaim>::all(client.clone()),
            go(Kind::ResourceClaim),
            |o| Obj::ResourceClaim(Box::new(o)),
        ));
    }
    out
}

/// The kinds [`spawn_member`] watches.
pub const MEMBER_KINDS: [Kind; 10] = [
    Kind::Node,
    Kind::Pod,
    Kind::Pvc,
    Kind::Pv,
    Kind::StorageClass,
    Kind::CsiNode,
    Kind::DeviceClass,
    Kind::ResourceSlice,
    Kind::ResourceClaim,
    Kind::HyperNode,
];
/// Watches Kubernetes' own PodGroups at the version the cluster serves (see
/// [`crate::workload_api`]): `v1beta1` unless only `v1alpha3` is served.
fn spawn_kube_groups(
    client: Client,
    with: (Arc<str>, Kind, mpsc::Sender<Update>, Arc<Metrics>),
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let version = match crate::workload_api::served(&client).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(cluster = %with.0, error = %e,
                    "which version of scheduling.k8s.io PodGroups the cluster serves is not known: watching v1beta1");
                None
            }
        };
        let task = if version == Some("v1alpha3") {
            spawn(
                Api::<k8s_openapi::api::scheduling::v1alpha3::PodGroup>::all(client),
                with,
                |o| {
                    let metadata = o.metadata.clone();
                    // The two versions have the same fields: this reads whole.
                    let g = crate::workload_api::from_alpha(o).unwrap_or_else(|| {
                        tracing::warn!(podgroup = ?metadata.name, "a v1alpha3 PodGroup does not read as v1beta1");
                        KubePodGroup {
                            metadata,
                            ..KubePodGroup::default()
                        }
                    });
                    Obj::KubePodGroup(Box::new(g))
                },
            )
        } else {
            spawn(Api::<KubePodGroup>::all(client), with, |o| {
                Obj::KubePodGroup(Box::new(o))
            })
        };
        // Stopped with this task (aborting it drops the guard).
        struct AbortOnDrop(JoinHandle<()>);
        impl Drop for AbortOnDrop {
            fn drop(&mut self) {
                self.0.abort();
            }
        }
        let mut guard = AbortOnDrop(task);
        let _ = (&mut guard.0).await;
    })
}

/// The kinds [`spawn_control`] watches.
pub const CONTROL_KINDS: [Kind; 5] = [
    Kind::PodGroup,
    Kind::KubePodGroup,
    Kind::Queue,
    Kind::PriorityClass,
    Kind::Pdb,
];
/// Whether one cluster's sessions need not wait for `kind` to be listed (`--members local`):
/// pods whose placement reads a volume or DRA kind wait for it behind a gate of tephra's own
/// (`tephra_index::state::held`), gangs with a `networkTopology` wait for the HyperNodes (the
/// core's `Event::HyperNodesDeferred`), and evictions (preempt, reclaim) wait for the
/// PodDisruptionBudgets. A cold kube-apiserver was seen to end the (empty) HyperNode list
/// 0.7 s after every other kind, holding back the first bind.
pub fn deferred(kind: Kind) -> bool {
    use tephra_index::state::held::{DEVICE_KINDS, VOLUME_KINDS};
    kind == Kind::Pdb
        || kind == Kind::HyperNode
        || kind == Kind::DeviceConfig
        || VOLUME_KINDS.contains(&kind)
        || DEVICE_KINDS.contains(&kind)
}

fn watcher<K>(
    api: Api<K>,
    streaming: bool,
    fields: Option<&str>,
) -> impl futures::Stream<Item = watcher::Result<WatchEvent<K>>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    // Large pages where lists are paged: a relist of 100,000 pods in 20 requests rather than
    // 200.
    let mut config = watcher::Config::default().page_size(5000);
    if let Some(f) = fields {
        config = config.fields(f);
    }
    watcher::watcher(
        api,
        if streaming {
            config.streaming_lists()
        } else {
            config
        },
    )
}

/// Whether watchers start with a streaming list: the first bind at 5,000 nodes / 50,000 pods
/// on a real kube-apiserver came at 2.1–2.3 s against 2.8–3.6 s paged.
const STREAMING_LISTS: bool = true;

/// Whether `cluster` refused a streaming list for the first time since the process started
/// (the line that says so is written once per cluster, not once per kind).
fn first_refusal(cluster: &Arc<str>) -> bool {
    static REFUSED: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());
    REFUSED
        .lock()
        .map(|mut r| r.insert(cluster.to_string()))
        .unwrap_or(true)
}

/// Whether a watch that asked for its initial state as a stream (`sendInitialEvents`) was
/// refused because the server does not serve streaming lists: Kubernetes before 1.34 without
/// the `WatchList` feature gate answers 422 Invalid (400 from some aggregated servers).
fn refuses_streaming(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::WatchStartFailed(kube::Error::Api(s)) | watcher::Error::WatchError(s)
            if s.code == 422 || s.code == 400
    )
}
