//! The PodGroup controller's adapter: watches pods, and gives each pod of ours that names no
//! PodGroup the one [`tephra_controllers::bare_pod`] makes for it (created if it does not
//! exist, never rewritten), then annotates the pod with `scheduling.k8s.io/group-name`. The
//! owner's annotations (a ReplicaSet's, a StatefulSet's, ...) are read from the API when the
//! pod names one; an owner that cannot be read counts as having none, as in Volcano.
//!
//! Only the pods that want a PodGroup are kept in memory (a handful, for a moment each), not
//! every pod of the cluster: the watch looks at each pod as it passes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tephra_api::PodGroup;
use tephra_api::well_known::GROUP_NAME_ANNOTATION;
use tephra_controllers::bare_pod::{annotated_owner, group_name, needs_group, podgroup};
use tokio::task::JoinHandle;

use crate::events::{EventFor, record};
use crate::gone::{done_if_exists, done_if_gone};
use crate::leader::Leadership;
use crate::reconciler::{self, Reconciler, WorkQueue, resync};

/// How the PodGroup controller runs.
#[derive(Clone, Debug)]
pub struct BarePodOptions {
    /// This replica's name, on the Events it records.
    pub identity: String,
    /// The scheduler names whose pods get a PodGroup (`--scheduler-name`).
    pub scheduler_names: Vec<String>,
    /// Whether the PodGroup inherits its owner's `volcano.sh/` annotations and
    /// `scheduling.volcano.sh/group-min-member` (Volcano's `--inherit-owner-annotations`).
    pub inherit_owner_annotations: bool,
    /// How often every pod is looked at even if nothing changed.
    pub resync: Duration,
    /// Failed passes, by reason (`tephra_controller_errors_total`).
    pub errors: reconciler::ErrorCounter,
}

impl Default for BarePodOptions {
    fn default() -> Self {
        Self {
            identity: "tephra-controller-manager".into(),
            scheduler_names: vec![tephra_api::well_known::VOLCANO_SCHEDULER_NAME.into()],
            inherit_owner_annotations: true,
            resync: Duration::from_secs(30),
            errors: reconciler::ErrorCounter::default(),
        }
    }
}

type Key = (String, String);

fn pod_key(p: &Pod) -> Option<Key> {
    Some((p.namespace()?, p.name_any()))
}

/// The pods that want a PodGroup now, by key.
type Wanting = Arc<Mutex<HashMap<Key, Arc<Pod>>>>;

/// Starts the PodGroup controller. It writes only while `leadership` leads.
pub fn start(
    client: Client,
    options: BarePodOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    let errors = options.errors.clone();
    let (queue, rx) = WorkQueue::new();
    let wanting: Wanting = Arc::default();
    let mut tasks = Vec::new();
    {
        let (api, q, w) = (
            Api::<crate::slim::Watched<Pod>>::all(client.clone()),
            queue.clone(),
            wanting.clone(),
        );
        let ours = options.scheduler_names.clone();
        tasks.push(tokio::spawn(async move {
            let stream =
                watcher::watcher(api, watcher::Config::default()).backoff(crate::retry::watch());
            futures::pin_mut!(stream);
            while let Some(ev) = stream.next().await {
                let (pod, gone) = match ev {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        (p.into_inner(), false)
                    }
                    Ok(watcher::Event::Delete(p)) => (p.into_inner(), true),
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(error = %crate::brief::watch(&e), "pod watch error");
                        continue;
                    }
                };
                let Some(key) = pod_key(&pod) else { continue };
                let wants = !gone && needs_group(&pod, &ours);
                if let Ok(mut m) = w.lock() {
                    if wants {
                        m.insert(key.clone(), Arc::new(pod));
                    } else {
                        m.remove(&key);
                    }
                }
                if wants {
                    q.push(key);
                }
            }
        }));
    }
    {
        let w = wanting.clone();
        tasks.push(resync(&queue, options.resync, move || {
            w.lock()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        }));
    }
    let worker = Worker {
        client,
        options,
        wanting,
    };
    tasks.push(tokio::spawn(reconciler::run(
        worker, queue, rx, leadership, errors,
    )));
    tasks
}

struct Worker {
    client: Client,
    options: BarePodOptions,
    wanting: Wanting,
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {}", crate::brief::kube(.source))]
pub struct PassError {
    what: String,
    source: kube::Error,
}

impl Reconciler for Worker {
    type Key = Key;
    type Error = PassError;
    const NAME: &'static str = "podgroup";

    fn keys(&self) -> Vec<Key> {
        self.wanting
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    async fn pass(&mut self, key: &Key) -> Result<(), PassError> {
        let (ns, name) = key;
        let pod = self.wanting.lock().ok().and_then(|m| m.get(key).cloned());
        let Some(pod) = pod else {
            return Ok(());
        };
        if !needs_group(&pod, &self.options.scheduler_names) {
            return Ok(());
        }
        let owner = if self.options.inherit_owner_annotations {
            self.owner_annotations(&pod).await
        } else {
            BTreeMap::new()
        };
        let pg = match podgroup(&pod, &owner) {
            Ok(pg) => pg,
            Err(e) => {
                let on = EventFor {
                    namespace: ns,
                    api_version: "v1",
                    kind: "Pod",
                    name,
                    uid: pod.metadata.uid.clone(),
                };
                let message = format!("cannot make a PodGroup for the pod: {e}");
                record(
                    &self.client,
                    &on,
                    "FailedCreatePodGroup",
                    &message,
                    true,
                    &self.options.identity,
                )
                .await;
                return Ok(());
            }
        };
        let group = group_name(&pod);
        let pgs: Api<PodGroup> = Api::namespaced(self.client.clone(), ns);
        done_if_exists(pgs.create(&PostParams::default(), &pg).await).map_err(|source| {
            PassError {
                what: format!("creating PodGroup {ns}/{group} for pod {name}"),
                source,
            }
        })?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let patch =
            serde_json::json!({"metadata": {"annotations": {GROUP_NAME_ANNOTATION: group}}});
        done_if_gone(
            pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )
        .map_err(|source| PassError {
            what: format!("annotating pod {ns}/{name}"),
            source,
        })?;
        tracing::info!(namespace = %ns, pod = %name, podgroup = %group, "pod joined its PodGroup");
        Ok(())
    }

    fn reason(e: &PassError) -> &str {
        reconciler::api_reason(&e.source)
    }
}

impl Worker {
    /// The annotations of the pod's ReplicaSet, StatefulSet, DaemonSet or batch Job; none when
    /// it has no such owner or the owner cannot be read.
    async fn owner_annotations(&self, pod: &Pod) -> BTreeMap<String, String> {
        let Some((api_version, kind, owner)) = annotated_owner(pod) else {
            return BTreeMap::new();
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind),
            &plural,
        );
        let ns = pod.namespace().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &ns, &ar);
        match api.get(owner).await {
            Ok(o) => o.metadata.annotations.unwrap_or_default(),
            Err(e) => {
                tracing::debug!(namespace = %ns, kind, owner, error = %e,
                    "owner not readable; its annotations are not inherited");
                BTreeMap::new()
            }
        }
    }
}
