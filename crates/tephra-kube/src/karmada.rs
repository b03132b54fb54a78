//! `tephra scheduler --fleet karmada`: tephra as a scheduler of a Karmada control plane. It
//! watches Karmada's `ResourceBinding`s and `Cluster`s, reaches each member with the token and
//! CA bundle of the Secret its Cluster names (as Karmada's own controllers do, Push mode), and
//! watches the member's nodes and pods; every period it plans a pass with
//! [`tephra_index::karmada::plan`] (the core, one gang per binding) and writes what
//! karmada-scheduler writes on the bindings whose `spec.schedulerName` is tephra's. Karmada's
//! binding, execution, failover and eviction controllers do the rest, unchanged; nothing of
//! tephra's own fleet chain runs in this mode.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tephra_index::endpoint::Endpoint;
use tephra_index::karmada::{
    self as plan, BINDING_GROUP, BINDING_VERSION, Binding, BindingWrite, CLUSTER_GROUP,
    CLUSTER_VERSION, Input, Member,
};
use tephra_scheduler::SchedulerConfig;
use tokio::sync::watch as signal;
use tokio::task::JoinHandle;

use crate::events::{EventFor, event};
use crate::leader::{self, LeaderOptions, Leadership};
use crate::metrics::{Metrics, ms};
use crate::run::StartError;
use crate::serve::Health;

/// The component tephra's Events on bindings come from.
pub const COMPONENT: &str = "tephra-scheduler";

/// How the Karmada mode runs.
#[derive(Clone, Debug)]
pub struct KarmadaOptions {
    /// The `spec.schedulerName`s of bindings tephra schedules.
    pub scheduler_names: Vec<String>,
    /// Time between passes.
    pub period: Duration,
    /// The scheduler configuration.
    pub config: Arc<SchedulerConfig>,
    /// This replica's name, in Events.
    pub identity: String,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub listen: Option<std::net::SocketAddr>,
    /// Leader election on a Lease on Karmada's API server; without it this replica leads.
    pub leader: Option<LeaderOptions>,
}

/// A running Karmada-mode scheduler.
pub struct KarmadaRunning {
    /// Where `/metrics` is served, if it is.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Whether Karmada's bindings and clusters are listed.
    pub ready: Arc<AtomicBool>,
    stop: signal::Sender<bool>,
    main: JoinHandle<()>,
    tasks: Vec<JoinHandle<()>>,
}

impl KarmadaRunning {
    /// Stops it: no write starts after this returns.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
        let _ = self.main.await;
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Karmada's ResourceBinding.
pub fn binding_resource() -> ApiResource {
    resource(
        BINDING_GROUP,
        BINDING_VERSION,
        "ResourceBinding",
        "resourcebindings",
    )
}

/// Karmada's ClusterResourceBinding.
pub fn cluster_binding_resource() -> ApiResource {
    resource(
        BINDING_GROUP,
        BINDING_VERSION,
        "ClusterResourceBinding",
        "clusterresourcebindings",
    )
}

/// Karmada's OverridePolicy (tephra's plan policies are its only ones read).
pub fn override_policy_resource() -> ApiResource {
    resource(
        "policy.karmada.io",
        "v1alpha1",
        "OverridePolicy",
        "overridepolicies",
    )
}

/// Karmada's Cluster.
pub fn cluster_resource() -> ApiResource {
    resource(CLUSTER_GROUP, CLUSTER_VERSION, "Cluster", "clusters")
}

/// A store of `ar`'s objects on Karmada's API server, kept by a watcher task.
fn dynamic_store(client: &Client, ar: &ApiResource) -> (Store<DynamicObject>, JoinHandle<()>) {
    dynamic_store_with(client, ar, watcher::Config::default())
}

/// [`dynamic_store`] of the objects `config` selects.
fn dynamic_store_with(
    client: &Client,
    ar: &ApiResource,
    config: watcher::Config,
) -> (Store<DynamicObject>, JoinHandle<()>) {
    let writer = reflector::store::Writer::new(ar.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let what = format!("karmada {}", ar.kind);
    let stream = reflector(writer, watcher(api, config));
    (store, tokio::spawn(drive(stream, what)))
}

/// Runs a reflector's stream until it ends, logging the first error of each run of failures.
async fn drive<K>(
    stream: impl futures::Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    what: String,
) {
    let mut s = std::pin::pin!(stream.backoff(crate::retry::watch()));
    let mut failing = false;
    while let Some(r) = s.next().await {
        match r {
            Ok(_) => failing = false,
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(watch = %what, error = %crate::brief::watch(&e), "watch failed");
            }
            Err(_) => {}
        }
    }
}

fn reflector<K>(
    writer: reflector::store::Writer<K>,
    stream: impl futures::Stream<Item = watcher::Result<watcher::Event<K>>>,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<K>>>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    kube::runtime::reflector(writer, stream)
}

/// A typed store of a member's objects, kept by a watcher task.
fn member_store<K>(client: &Client, cluster: &str) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let what = format!("member {cluster} {}", K::kind(&()));
    let stream = reflector(
        writer,
        watcher(api, watcher::Config::default().page_size(5000)),
    );
    (store, tokio::spawn(drive(stream, what)))
}

/// One member's watchers.
struct MemberWatch {
    endpoint: Endpoint,
    nodes: Store<Node>,
    pods: Store<Pod>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for MemberWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl MemberWatch {
    fn synced(&self) -> bool {
        use futures::FutureExt;
        self.nodes.wait_until_ready().now_or_never().is_some()
            && self.pods.wait_until_ready().now_or_never().is_some()
    }
}

/// A binding as tephra last wrote it, used until the watch shows a version other than the one
/// the write started from (so that a pass never plans on a binding it has just placed).
struct Written {
    before: String,
    after: Binding,
}

/// Starts the Karmada-mode scheduler on the Karmada API server `client` speaks to.
pub async fn start(client: Client, options: KarmadaOptions) -> Result<KarmadaRunning, StartError> {
    let metrics = Arc::new(Metrics::new()?);
    let ready = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let mut metrics_addr = None;
    if let Some(addr) = options.listen {
        let health = Health {
            ready: Arc::clone(&ready),
            metrics: Arc::clone(&metrics),
            ui: None,
        };
        let (a, t) = crate::run::serve_on("--listen-address", addr, health).await?;
        metrics_addr = Some(a);
        tasks.push(t);
    }
    let (leadership, elector) = leader::elect(&client, options.leader.as_ref(), &metrics);
    tasks.extend(elector);
    let (stop, stopped) = signal::channel(false);
    let (bindings, bindings_task) = dynamic_store(&client, &binding_resource());
    let (cluster_bindings, cluster_bindings_task) =
        dynamic_store(&client, &cluster_binding_resource());
    let (clusters, clusters_task) = dynamic_store(&client, &cluster_resource());
    let (plans, plans_task) = dynamic_store_with(
        &client,
        &override_policy_resource(),
        watcher::Config::default().labels(plan::PLAN_POLICY_LABEL),
    );
    let (queues, queues_w) = reflector::store();
    let queues_stream = reflector(
        queues_w,
        watcher(
            Api::<tephra_api::Queue>::all(client.clone()),
            watcher::Config::default(),
        ),
    );
    let queues_task = tokio::spawn(drive(queues_stream, "karmada Queue".to_string()));
    let stores = Stores {
        bindings,
        cluster_bindings,
        clusters,
        queues,
        plans,
    };
    tasks.extend([
        bindings_task,
        cluster_bindings_task,
        clusters_task,
        queues_task,
        plans_task,
    ]);
    let shared = Shared {
        metrics: Arc::clone(&metrics),
        ready: Arc::clone(&ready),
        leadership,
    };
    let main = tokio::spawn(run(client, options, stores, shared, stopped));
    Ok(KarmadaRunning {
        metrics_addr,
        metrics,
        ready,
        stop,
        main,
        tasks,
    })
}

/// What the Karmada mode watches on Karmada's API server.
struct Stores {
    bindings: Store<DynamicObject>,
    cluster_bindings: Store<DynamicObject>,
    clusters: Store<DynamicObject>,
    /// Volcano Queues (none while the CRD is not installed there).
    queues: Store<tephra_api::Queue>,
    /// tephra's plan policies (OverridePolicies labelled [`plan::PLAN_POLICY_LABEL`]).
    plans: Store<DynamicObject>,
}

/// What the loop shares with the endpoints and the elector.
struct Shared {
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    leadership: Leadership,
}

async fn run(
    client: Client,
    options: KarmadaOptions,
    stores: Stores,
    shared: Shared,
    mut stopped: signal::Receiver<bool>,
) {
    let Stores {
        bindings,
        cluster_bindings,
        clusters,
        queues,
        plans,
    } = stores;
    // Plans written by this replica that its watch has not shown yet.
    let mut planned: HashMap<String, plan::NodePlan> = HashMap::new();
    let mut templates = Templates::default();
    let mut members: HashMap<String, MemberWatch> = HashMap::new();
    let mut unreachable: HashMap<String, String> = HashMap::new();
    let mut written: HashMap<String, Written> = HashMap::new();
    let mut problems: HashMap<String, Instant> = HashMap::new();
    let mut session = 0u64;
    let mut tick = tokio::time::interval(options.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let _ = tokio::join!(
        bindings.wait_until_ready(),
        cluster_bindings.wait_until_ready(),
        clusters.wait_until_ready(),
        plans.wait_until_ready()
    );
    tracing::info!("karmada mode: bindings and clusters synced");
    shared.ready.store(true, Ordering::SeqCst);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        if *stopped.borrow() {
            return;
        }
        if !shared.leadership.is_leader() {
            // Another replica writes; what this one wrote is stale by then.
            written.clear();
            planned.clear();
            continue;
        }
        // The members: a watcher pair per Cluster that names an endpoint.
        let mut api_clusters = BTreeMap::new();
        for c in clusters.state() {
            let name = c.name_any();
            let value = match serde_json::to_value(c.as_ref()) {
                Ok(v) => v,
                Err(_) => continue,
            };
            match plan::cluster_from_value(value) {
                Ok(cluster) => {
                    api_clusters.insert(name, cluster);
                }
                Err(e) => note(&mut problems, e.to_string()),
            }
        }
        members.retain(|name, m| {
            api_clusters
                .get(name)
                .and_then(Endpoint::of)
                .is_some_and(|e| e == m.endpoint)
        });
        for (name, c) in &api_clusters {
            if members.contains_key(name) {
                continue;
            }
            let Some(endpoint) = Endpoint::of(c) else {
                continue;
            };
            match crate::members::connect(&client, &endpoint).await {
                Ok(member) => {
                    unreachable.remove(name);
                    let (nodes, t1) = member_store::<Node>(&member, name);
                    let (pods, t2) = member_store::<Pod>(&member, name);
                    members.insert(
                        name.clone(),
                        MemberWatch {
                            endpoint,
                            nodes,
                            pods,
                            tasks: vec![t1, t2],
                        },
                    );
                }
                Err(e) => {
                    let e = e.to_string();
                    if unreachable.get(name) != Some(&e) {
                        tracing::warn!(cluster = %name, error = %e, "cannot reach the member");
                        unreachable.insert(name.clone(), e);
                    }
                }
            }
        }
        let view: BTreeMap<String, Member> = api_clusters
            .into_iter()
            .map(|(name, cluster)| {
                let m = members.get(&name);
                let synced = m.is_some_and(MemberWatch::synced);
                let member = Member {
                    cluster,
                    synced,
                    nodes: m
                        .filter(|_| synced)
                        .map(|m| m.nodes.state().iter().map(|n| (**n).clone()).collect())
                        .unwrap_or_default(),
                    pods: m
                        .filter(|_| synced)
                        .map(|m| m.pods.state().iter().map(|p| (**p).clone()).collect())
                        .unwrap_or_default(),
                };
                (name, member)
            })
            .collect();
        // The bindings, as last written where the watch has not caught up.
        let mut list = Vec::new();
        let all_bindings: Vec<Arc<DynamicObject>> = bindings
            .state()
            .into_iter()
            .chain(cluster_bindings.state())
            .collect();
        for b in &all_bindings {
            let key = format!("{}/{}", b.namespace().unwrap_or_default(), b.name_any());
            let rv = b.resource_version().unwrap_or_default();
            if let Some(w) = written.get(&key) {
                if w.before == rv {
                    list.push(w.after.clone());
                    continue;
                }
                written.remove(&key);
            }
            let value = match serde_json::to_value(b.as_ref()) {
                Ok(v) => v,
                Err(_) => continue,
            };
            match Binding::from_value(value) {
                Ok(b) => list.push(b),
                Err(e) => note(&mut problems, e.to_string()),
            }
        }
        let keys: std::collections::HashSet<String> = list.iter().map(Binding::key).collect();
        written.retain(|k, _| keys.contains(k));
        let (queue_of, pod_groups) = templates
            .read_all(&client, &options.scheduler_names, &list, &mut problems)
            .await;
        let queue_list: Vec<tephra_api::Queue> =
            queues.state().iter().map(|q| (**q).clone()).collect();
        let mut node_plans: BTreeMap<String, plan::NodePlan> = plans
            .state()
            .iter()
            .filter_map(|p| plan::read_plan_policy(&serde_json::to_value(p.as_ref()).ok()?))
            .collect();
        // What this replica wrote wins until the watch shows the same.
        planned.retain(|k, p| node_plans.get(k) != Some(p) && keys.contains(k));
        node_plans.extend(planned.iter().map(|(k, p)| (k.clone(), p.clone())));
        session += 1;
        let started = Instant::now();
        let out = plan::plan(&Input {
            scheduler_names: &options.scheduler_names,
            members: &view,
            bindings: &list,
            queues: &queue_list,
            queue_of: &queue_of,
            plans: &node_plans,
            pod_groups: &pod_groups,
            config: Arc::clone(&options.config),
            now: k8s_openapi::jiff::Timestamp::now().as_second(),
            session,
        });
        for p in out.problems {
            note(&mut problems, p);
        }
        shared.metrics.e2e.observe(ms(started.elapsed()));
        if !out.writes.is_empty() {
            tracing::debug!(session, writes = out.writes.len(), took = ?started.elapsed(), "karmada pass");
        }
        for w in out.writes {
            let key = format!("{}/{}", w.namespace, w.name);
            let before = all_bindings
                .iter()
                .find(|b| {
                    b.namespace().unwrap_or_default() == w.namespace && b.name_any() == w.name
                })
                .and_then(|b| b.resource_version())
                .unwrap_or_default();
            let result = match (&w.patch, &w.event) {
                (Some(_), _) => Some("scheduled"),
                (None, Some(("Warning", _, _))) => Some("unschedulable"),
                _ => None,
            };
            if let Some(policy) = &w.policy {
                match write_plan(&client, policy).await {
                    Ok(()) => {
                        if let Some((k, p)) = plan::read_plan_policy(policy) {
                            planned.insert(k, p);
                        }
                    }
                    Err(e) => {
                        // Placed without its plan, the member would schedule the gang on its
                        // own: the binding waits for the next pass instead.
                        failed(&shared.metrics, "overridepolicy", &e);
                        tracing::warn!(binding = %key, error = %crate::brief::kube(&e), "writing the plan policy failed; the binding is placed once it is written");
                        continue;
                    }
                }
            }
            match write(&client, &w, &options.identity).await {
                Ok(after) => {
                    if let Some(r) = result {
                        shared.metrics.attempts.with_label_values(&[r]).inc();
                    }
                    if let Some(after) = after {
                        written.insert(key, Written { before, after });
                    }
                }
                Err(e) => {
                    failed(&shared.metrics, "resourcebinding", &e);
                    tracing::warn!(binding = %key, error = %crate::brief::kube(&e), "writing the binding failed")
                }
            }
        }
    }
}

/// Counts a write that failed: a scheduling attempt in error, and an API error by `verb`.
fn failed(metrics: &Metrics, verb: &str, e: &kube::Error) {
    metrics.attempts.with_label_values(&["error"]).inc();
    let code = match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    };
    metrics.api_error("karmada", verb, code);
}

/// Logs a problem once every ten minutes at most.
fn note(problems: &mut HashMap<String, Instant>, line: String) {
    let now = Instant::now();
    let due = problems
        .get(&line)
        .is_none_or(|t| now.duration_since(*t) > Duration::from_secs(600));
    if due {
        tracing::warn!(problem = %line, "karmada mode cannot read an object");
        problems.insert(line, now);
    }
}

/// Creates or updates a plan policy (server-side apply, as tephra's field manager).
async fn write_plan(client: &Client, policy: &serde_json::Value) -> Result<(), kube::Error> {
    let namespace = policy["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = policy["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &override_policy_resource());
    api.patch(
        name,
        &PatchParams::apply(COMPONENT).force(),
        &Patch::Apply(policy),
    )
    .await?;
    Ok(())
}

/// Carries out one binding write: the object (placement), then its status, then an Event.
/// Returns the binding as written, when it wrote the object.
async fn write(
    client: &Client,
    w: &BindingWrite,
    identity: &str,
) -> Result<Option<Binding>, kube::Error> {
    let cluster_scoped = w.namespace.is_empty();
    let api: Api<DynamicObject> = if cluster_scoped {
        Api::all_with(client.clone(), &cluster_binding_resource())
    } else {
        Api::namespaced_with(client.clone(), &w.namespace, &binding_resource())
    };
    let params = PatchParams::default();
    let mut last = None;
    if let Some(p) = &w.patch {
        last = Some(api.patch(&w.name, &params, &Patch::Merge(p)).await?);
    }
    if let Some(s) = &w.status {
        last = Some(api.patch_status(&w.name, &params, &Patch::Merge(s)).await?);
    }
    if let Some((kind, reason, message)) = &w.event {
        // A ClusterResourceBinding's Events go to `default`, as Karmada records them.
        let namespace = if cluster_scoped {
            "default"
        } else {
            &w.namespace
        };
        let on = EventFor {
            namespace,
            api_version: "work.karmada.io/v1alpha2",
            kind: if cluster_scoped {
                "ClusterResourceBinding"
            } else {
                "ResourceBinding"
            },
            name: &w.name,
            uid: last.as_ref().and_then(|o| o.uid()),
        };
        let ev = event(
            &on,
            reason,
            message,
            *kind == "Warning",
            COMPONENT,
            identity,
        );
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client.clone(), namespace);
        if let Err(e) = events.create(&Default::default(), &ev).await {
            tracing::warn!(binding = %w.name, error = %crate::brief::kube(&e), "recording an event failed");
        }
    }
    Ok(last
        .filter(|_| w.patch.is_some())
        .and_then(|o| serde_json::to_value(o).ok())
        .and_then(|v| Binding::from_value(v).ok()))
}

/// What the bindings' resource templates say (the queue, the PodGroup their pods name), read
/// once per template version: each binding of tephra's has its template read when it is first
/// seen and whenever the template it was made from changes (`spec.resource.resourceVersion`).
#[derive(Default)]
struct Templates {
    /// Binding key → (template version, what it says).
    seen: HashMap<String, (Option<String>, TemplateFacts)>,
    /// The API resource of each template kind, from discovery.
    kinds: HashMap<(String, String), ApiResource>,
}

/// What one template says.
#[derive(Clone, Debug, Default)]
struct TemplateFacts {
    queue: Option<String>,
    pod_group: Option<String>,
}

impl Templates {
    /// Each binding's queue and the PodGroup its pods name, by binding key.
    async fn read_all(
        &mut self,
        client: &Client,
        names: &[String],
        bindings: &[Binding],
        problems: &mut HashMap<String, Instant>,
    ) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        self.seen
            .retain(|k, _| bindings.iter().any(|b| &b.key() == k));
        let mut queues = BTreeMap::new();
        let mut groups = BTreeMap::new();
        for b in bindings
            .iter()
            .filter(|b| names.contains(&b.spec.scheduler_name))
        {
            let key = b.key();
            let r = &b.spec.resource;
            let fresh = self
                .seen
                .get(&key)
                .is_some_and(|(version, _)| version == &r.resource_version);
            if !fresh {
                match self.read(client, b).await {
                    Ok(facts) => {
                        self.seen
                            .insert(key.clone(), (r.resource_version.clone(), facts));
                    }
                    Err(e) => note(
                        problems,
                        format!(
                            "resourcebinding {key}: its template {} {}: {e}",
                            r.kind, r.name
                        ),
                    ),
                }
            }
            if let Some((_, facts)) = self.seen.get(&key) {
                if let Some(q) = &facts.queue {
                    queues.insert(key.clone(), q.clone());
                }
                if let Some(g) = &facts.pod_group {
                    groups.insert(key, g.clone());
                }
            }
        }
        (queues, groups)
    }

    async fn read(&mut self, client: &Client, b: &Binding) -> Result<TemplateFacts, String> {
        let r = &b.spec.resource;
        let (group, version) = match r.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), r.api_version.clone()),
        };
        let kind_key = (r.api_version.clone(), r.kind.clone());
        let ar = match self.kinds.get(&kind_key) {
            Some(ar) => ar.clone(),
            None => {
                let gvk = GroupVersionKind::gvk(&group, &version, &r.kind);
                let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|e| crate::brief::kube(&e))?;
                self.kinds.insert(kind_key, ar.clone());
                ar
            }
        };
        let api: Api<DynamicObject> = match &r.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let template = api
            .get_opt(&r.name)
            .await
            .map_err(|e| crate::brief::kube(&e))?;
        let value = template.and_then(|t| serde_json::to_value(t).ok());
        Ok(TemplateFacts {
            queue: value.as_ref().and_then(plan::template_queue),
            pod_group: value.as_ref().and_then(plan::template_pod_group),
        })
    }
}
