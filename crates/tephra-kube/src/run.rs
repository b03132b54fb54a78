//! `tephra scheduler`: wires watchers → state → session loop → executor, the elector and
//! the HTTP endpoints, and runs until stopped. The loop owns the state; watchers and the
//! executor talk to it over channels, so a session never waits on the network.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use tephra_scheduler::config::{ConfigError, ParseOptions};
use tephra_scheduler::{ConfigHolder, SchedulerConfig, Step};
use tokio::sync::{mpsc, watch as signal};
use tokio::task::JoinHandle;

use crate::clients::{CONTROL_PLANE, Clients};
use crate::executor::{Done, Executor, Outcome, RateLimiter};
use crate::leader::{self, LeaderOptions, Leadership};
use crate::members;
use crate::metrics::{Metrics, ms};
use crate::report;
use crate::serve::{self, Health};
use crate::state::State;
use crate::tick;
use crate::watch::{self, Kind};
use crate::writes::{Planner, Write};

/// The name of the local cluster as a member.
pub const LOCAL: &str = "local";

/// The pods the first session places at most (then four times as many each next session, run
/// at once, until one places fewer than it may): the first gangs of a backlog are bound while
/// the rest is still being decided.
pub const FIRST_BUDGET: u64 = 256;
/// How much each capped session's budget grows over the last.
const BUDGET_GROWTH: u64 = 4;

/// Where member clusters come from (`--members`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberSource {
    /// The cluster the scheduler runs in, as member `local` (Volcano's one-cluster setup).
    Local,
    /// Every `Cluster` object of the control plane. Pods declared on the control plane are
    /// placed in a member and created there.
    Clusters,
    /// Both: the local cluster and the Clusters.
    Both,
}

/// How the scheduler runs (the `tephra scheduler` flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// Pods with one of these `schedulerName`s are placed (`--scheduler-name`).
    pub scheduler_names: Vec<String>,
    /// Time between sessions (`--schedule-period`).
    pub period: Duration,
    /// The `volcano-scheduler.conf` file (`--scheduler-conf`); tephra's default without one.
    pub config_path: Option<PathBuf>,
    /// Refuse Volcano plugins tephra does not implement (`--strict-config`).
    pub strict_config: bool,
    /// The queue of PodGroups that name none, or name `default` (`--default-queue`).
    pub default_queue: String,
    /// Where `/metrics` is served (`--listen-address`).
    pub listen: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served (`--healthz-address`); with `listen` when
    /// absent.
    pub healthz: Option<SocketAddr>,
    /// Leader election (`--leader-elect`); without it this replica always leads.
    pub leader: Option<LeaderOptions>,
    /// Node search of the actions that search nodes, where the configuration leaves it unset
    /// (`--minimum-feasible-nodes`, `--minimum-percentage-nodes-to-find`,
    /// `--percentage-nodes-to-find`).
    pub search: tephra_scheduler::placement::SearchArgs,
    /// Client-side write rate (`--kube-api-qps`, `--kube-api-burst`); 0 means unlimited.
    pub qps: f64,
    /// Burst of the rate limit.
    pub burst: u32,
    /// Writes in flight at most.
    pub concurrency: usize,
    /// This replica's name, in Events and the Lease.
    pub identity: String,
    /// Where member clusters come from (`--members`).
    pub members: MemberSource,
    /// How long a gang may stay below its minimum after failed binds before it is evicted
    /// whole and placed again (`--gang-bind-timeout`).
    pub gang_bind_timeout: Duration,
    /// How long the old copy of a gang moved by failover stays at most when its new placement
    /// does not run (`--graceful-eviction-timeout`; a task's own grace period wins).
    pub graceful_eviction_timeout: Duration,
    /// The scheduler's own Pod (`namespace`, `name`), for Events about the scheduler itself
    /// (the binary takes it from the downward API's `POD_NAMESPACE` and `POD_NAME`).
    pub pod: Option<(String, String)>,
    /// How long a gang's volume claims may take to be bound before its binds fail and it is
    /// placed again (`--volume-bind-timeout`; kube-scheduler's `bindTimeoutSeconds`).
    pub volume_bind_timeout: Duration,
    /// Node labels HyperNodes are discovered from, lowest tier first (`--topology-labels`).
    pub topology_labels: Vec<String>,
    /// The fleet's tiers above its clusters, lowest first (`--fleet-tiers`).
    pub fleet_tiers: Vec<String>,
    /// The web UI and its expected starts (`--ui-open`, `--eta-every`, ...).
    pub ui: crate::ui::UiOptions,
    /// The fleet's virtual kubelet (`--virtual-node`, fleet mode only): declared pods are bound
    /// to its Node once placed, and `kubectl logs` on them is served from their member.
    pub virtual_node: Option<crate::virtual_node::VirtualNodeOptions>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            scheduler_names: vec!["volcano".into()],
            period: Duration::from_secs(1),
            config_path: None,
            strict_config: false,
            default_queue: tephra_api::defaults::DEFAULT_QUEUE.to_string(),
            listen: None,
            healthz: None,
            leader: None,
            search: tephra_scheduler::placement::SearchArgs::default(),
            qps: 0.0,
            burst: 0,
            concurrency: 64,
            identity: "tephra-scheduler".into(),
            members: MemberSource::Local,
            gang_bind_timeout: Duration::from_secs(30),
            graceful_eviction_timeout: Duration::from_secs(600),
            pod: None,
            volume_bind_timeout: Duration::from_secs(600),
            topology_labels: Vec::new(),
            fleet_tiers: Vec::new(),
            ui: crate::ui::UiOptions::default(),
            virtual_node: None,
        }
    }
}

/// Serves `/metrics` and the health endpoints on `addr`, the address of flag `what`: the
/// bound address and the server's task, or the error naming the flag.
pub(crate) async fn serve_on(
    what: &'static str,
    addr: SocketAddr,
    health: Health,
) -> Result<(SocketAddr, JoinHandle<()>), StartError> {
    serve::start(addr, health)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// Why the scheduler could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration file cannot be read.
    #[error("--scheduler-conf {path}: {source}")]
    ConfigFile {
        /// Path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is refused.
    #[error("--scheduler-conf {path}: {source}")]
    Config {
        /// Path.
        path: String,
        /// Why.
        source: ConfigError,
    },
    /// The metrics could not be registered.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// An address could not be bound.
    #[error("{what} {addr}: {source}")]
    Bind {
        /// Which flag.
        what: &'static str,
        /// Address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The virtual kubelet could not start.
    #[error(transparent)]
    VirtualNode(#[from] crate::virtual_node::VirtualNodeError),
}

/// A running scheduler.
pub struct Running {
    /// Where `/metrics` is served, if it is.
    pub metrics_addr: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served, if they are.
    pub health_addr: Option<SocketAddr>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Whether this replica leads.
    pub leadership: Leadership,
    /// Whether every watcher has synced.
    pub ready: Arc<AtomicBool>,
    /// Where the virtual kubelet's endpoint listens, if it runs.
    pub virtual_node_addr: Option<SocketAddr>,
    stop: signal::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    main: JoinHandle<()>,
}

impl Running {
    /// Stops every task: no write starts after this returns.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
        let _ = self.main.await;
    }

    /// Stops at once, as a crash would (for tests of failover).
    pub fn kill(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.main.abort();
    }
}

fn read_config(path: &PathBuf, strict: bool) -> Result<(String, SchedulerConfig), StartError> {
    let text = std::fs::read_to_string(path).map_err(|source| StartError::ConfigFile {
        path: path.display().to_string(),
        source,
    })?;
    let parsed =
        SchedulerConfig::parse_with(&text, &tephra_scheduler::Registry, ParseOptions { strict })
            .map_err(|source| StartError::Config {
                path: path.display().to_string(),
                source,
            })?;
    Ok((text, parsed))
}

fn announce(config: &SchedulerConfig, metrics: &Metrics) {
    for w in &config.warnings {
        tracing::warn!(warning = %w, "scheduler configuration");
    }
    metrics.set_inert(&config.inert_plugins);
}

/// Starts the scheduler against `client`, the local cluster (member `local` and control plane).
pub async fn start(client: Client, options: Options) -> Result<Running, StartError> {
    let metrics = Arc::new(Metrics::new()?);
    let (config_text, mut config) = match &options.config_path {
        Some(p) => {
            let (t, c) = read_config(p, options.strict_config)?;
            (Some(t), c)
        }
        None => (None, SchedulerConfig::default_config()),
    };
    tephra_scheduler::default_node_search(&mut config, &options.search);
    announce(&config, &metrics);
    metrics.reload_ok.set(1);
    let ready = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let ui = crate::ui::Publisher::new(&options.ui, Arc::clone(&metrics));
    let health = Health {
        ready: Arc::clone(&ready),
        metrics: Arc::clone(&metrics),
        ui: Some(ui.ui().clone()),
    };
    let mut metrics_addr = None;
    let mut health_addr = None;
    if let Some(addr) = options.listen {
        let (a, t) = serve_on("--listen-address", addr, health.clone()).await?;
        metrics_addr = Some(a);
        health_addr = Some(a);
        tasks.push(t);
    }
    if let Some(addr) = options.healthz.filter(|h| Some(*h) != options.listen) {
        let (a, t) = serve_on("--healthz-address", addr, health).await?;
        health_addr = Some(a);
        tasks.push(t);
    }
    let (leadership, elector) = leader::elect(&client, options.leader.as_ref(), &metrics);
    tasks.extend(elector);
    let (tx, updates) = mpsc::channel(1024);
    let local_member = matches!(options.members, MemberSource::Local | MemberSource::Both);
    let fleet = matches!(options.members, MemberSource::Clusters | MemberSource::Both);
    // The control plane is the local cluster in a one-cluster setup.
    let control: Arc<str> = Arc::from(if fleet { CONTROL_PLANE } else { LOCAL });
    let mut expected: BTreeSet<(String, Kind)> = BTreeSet::new();
    let mut state = State::new(
        options.scheduler_names.clone(),
        options.default_queue.clone(),
    );
    if !options.topology_labels.is_empty() {
        state.discover_topology_from(options.topology_labels.clone());
    }
    if !options.fleet_tiers.is_empty() {
        state.set_fleet_tiers(&options.fleet_tiers);
    }
    let mut members = BTreeMap::new();
    if local_member {
        let local: Arc<str> = Arc::from(LOCAL);
        tasks.extend(watch::spawn_member(&client, &local, &tx, &metrics));
        expected.extend(watch::MEMBER_KINDS.map(|k| (LOCAL.to_string(), k)));
        members.insert(LOCAL.to_string(), client.clone());
        // Known from the start, so that its nodes have a cluster to join.
        let _ = state.add_local(LOCAL);
    }
    tasks.extend(watch::spawn_control(&client, &control, &tx, &metrics));
    expected.extend(watch::CONTROL_KINDS.map(|k| (control.to_string(), k)));
    // The dynamic MIG geometries, from the ConfigMap the configuration names when tephra
    // starts (as Volcano reads it once).
    let (cm_ns, cm_name) = tephra_scheduler::plugins::deviceshare::device_config_map(&config);
    tasks.push(watch::spawn_device_config(
        &client,
        &control,
        &tx,
        &metrics,
        (&cm_ns, &cm_name),
    ));
    expected.insert((control.to_string(), Kind::DeviceConfig));
    let declared = options.members == MemberSource::Clusters;
    // One cluster: sessions start once the kinds every pod depends on are listed.
    let defer = options.members == MemberSource::Local;
    if defer {
        state.defer_listing();
    }
    if fleet {
        tasks.extend(watch::spawn_fleet(
            &client, &control, &tx, &metrics, declared,
        ));
        expected.insert((control.to_string(), Kind::Cluster));
        expected.insert((control.to_string(), Kind::Policy));
    }
    if declared {
        expected.insert((control.to_string(), Kind::Pod));
        state.declare_from(Arc::clone(&control));
    }
    if local_member && fleet {
        state.pin_groups_to(Arc::from(LOCAL));
    }
    let (done_tx, done) = mpsc::unbounded_channel();
    let clients = Clients {
        control: client.clone(),
        members: Arc::new(std::sync::RwLock::new(members)),
    };
    let mut virtual_node_addr = None;
    let virtual_node = match options.virtual_node.clone().filter(|_| declared) {
        Some(vn) => {
            let name = vn.name.clone();
            let running =
                crate::virtual_node::start(clients.clone(), vn, leadership.clone()).await?;
            virtual_node_addr = Some(running.addr);
            tasks.extend(running.tasks);
            Some(name)
        }
        None => None,
    };
    let executor = Executor::new(
        clients.clone(),
        crate::executor::Settings {
            concurrency: options.concurrency,
            limiter: RateLimiter::new(options.qps, options.burst),
            identity: options.identity.clone(),
            volume_bind_timeout: options.volume_bind_timeout,
            virtual_node,
        },
        leadership.clone(),
        Arc::clone(&metrics),
        done_tx,
    );
    let (stop, stop_rx) = signal::channel(false);
    let lp = Loop {
        state,
        planner: Planner::default(),
        executor,
        metrics: Arc::clone(&metrics),
        leadership: leadership.clone(),
        ready: Arc::clone(&ready),
        expected,
        defer,
        started: false,
        budget: None,
        again: false,
        config: match config_text {
            Some(text) => ConfigHolder::read_from(config, text),
            None => ConfigHolder::new(config),
        },
        options,
        session: 0,
        was_leader: false,
        control_client: client,
        clients,
        tx,
        members: members::Running::default(),
        ui,
    };
    let main = tokio::spawn(lp.run(updates, done, stop_rx));
    Ok(Running {
        metrics_addr,
        health_addr,
        metrics,
        leadership,
        ready,
        virtual_node_addr,
        stop,
        tasks,
        main,
    })
}

struct Loop {
    state: State,
    planner: Planner,
    executor: Executor,
    metrics: Arc<Metrics>,
    leadership: Leadership,
    ready: Arc<AtomicBool>,
    expected: BTreeSet<(String, Kind)>,
    /// Whether sessions start before the [deferred](watch::deferred) kinds are listed.
    defer: bool,
    /// Whether sessions run: the kinds they need are listed.
    started: bool,
    /// The pods the next session may place at most, while a backlog is worked off in
    /// growing sessions run one after the other ([`FIRST_BUDGET`]).
    budget: Option<u64>,
    /// Run the next session at once (the last one used its whole budget).
    again: bool,
    /// The configuration in force, and the text it was read from.
    config: ConfigHolder,
    options: Options,
    session: u64,
    was_leader: bool,
    control_client: Client,
    clients: Clients,
    tx: mpsc::Sender<watch::Update>,
    members: members::Running,
    /// What the web UI shows.
    ui: crate::ui::Publisher,
}

fn unix_now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

impl Loop {
    async fn run(
        mut self,
        mut updates: mpsc::Receiver<watch::Update>,
        mut done: mpsc::UnboundedReceiver<Done>,
        mut stop: signal::Receiver<bool>,
    ) {
        let mut ticker = tokio::time::interval(self.options.period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                u = updates.recv() => {
                    let Some(u) = u else { return };
                    self.take(u);
                    // Take whatever else is waiting before the next session.
                    while let Ok(u) = updates.try_recv() {
                        self.take(u);
                    }
                }
                d = done.recv() => {
                    if let Some(d) = d {
                        self.finished(d);
                    }
                }
                _ = ticker.tick() => self.tick(),
                _ = tokio::task::yield_now(), if self.again => {
                    self.again = false;
                    self.tick();
                }
                _ = stop.changed() => return,
            }
        }
    }

    fn take(&mut self, u: watch::Update) {
        let (cluster, kind) = (u.cluster.to_string(), u.kind);
        let deleted_group = match (&u.change, kind) {
            (watch::Change::Delete(o), Kind::PodGroup) => Some(o.key()),
            _ => None,
        };
        let clusters_changed = kind == Kind::Cluster;
        let deleted_queue = match (&u.change, kind) {
            (watch::Change::Delete(o), Kind::Queue) => Some(o.key()),
            _ => None,
        };
        let deleted_cluster = match (&u.change, kind) {
            (watch::Change::Delete(o), Kind::Cluster) => Some(o.key()),
            _ => None,
        };
        for e in self.state.apply(unix_now(), u) {
            tracing::warn!(cluster = %cluster, kind = kind.as_str(), error = %e, "object not taken into the cache");
        }
        if let Some(g) = deleted_group {
            self.planner.forget_group(&g);
            let _ = self.metrics.unschedule_tasks.remove_label_values(&[&g]);
        }
        if let Some(q) = deleted_queue {
            self.metrics.forget_queue(&q);
        }
        if let Some(c) = deleted_cluster {
            self.metrics.forget_cluster(&c);
        }
        if clusters_changed {
            self.reconcile_members();
        }
        self.metrics
            .refused
            .set(i64::try_from(self.state.refused().len()).unwrap_or(i64::MAX));
        if !self.started
            && self
                .expected
                .iter()
                .filter(|(_, k)| !(self.defer && watch::deferred(*k)))
                .all(|(c, k)| self.state.is_synced(c, *k))
        {
            tracing::info!(
                held_back = self.state.held_back(),
                "the kinds sessions need are listed; sessions start"
            );
            self.started = true;
            self.budget = Some(FIRST_BUDGET);
            // The first session need not wait for the next period (a restart binds sooner).
            self.tick();
        }
        if !self.ready.load(Ordering::SeqCst)
            && self
                .expected
                .iter()
                .all(|(c, k)| self.state.is_synced(c, *k))
        {
            tracing::info!("every watcher has synced; ready");
            self.ready.store(true, Ordering::SeqCst);
        }
    }

    /// The configuration of the next session: while a backlog is worked off in capped
    /// sessions, enqueue and allocate only, allocate stopping at the budget (a session that
    /// leaves jobs untried must not evict for them); and no evictions until the
    /// PodDisruptionBudgets are listed.
    fn session_config(&self) -> Arc<SchedulerConfig> {
        let config = self.config.current();
        let control = self.expected.iter().find(|(_, k)| *k == Kind::Pdb);
        let no_pdbs = self.defer && control.is_some_and(|(c, k)| !self.state.is_synced(c, *k));
        if self.budget.is_none() && !no_pdbs {
            return config;
        }
        let mut c = (*config).clone();
        if let Some(budget) = self.budget {
            c.actions.retain(|a| a == "enqueue" || a == "allocate");
            c.action_args.entry("allocate".into()).or_default().insert(
                tephra_scheduler::actions::allocate::POD_BUDGET.into(),
                tephra_scheduler::config::ArgValue::Int(i64::try_from(budget).unwrap_or(i64::MAX)),
            );
        }
        if no_pdbs {
            c.actions.retain(|a| a != "preempt" && a != "reclaim");
        }
        Arc::new(c)
    }

    /// Starts, restarts or stops member watchers to match the Cluster objects.
    fn reconcile_members(&mut self) {
        let wanted = self.state.member_endpoints();
        let (control, tx, metrics, clients) = (
            self.control_client.clone(),
            self.tx.clone(),
            Arc::clone(&self.metrics),
            self.clients.clone(),
        );
        let (started, stopped) = self.members.reconcile(&wanted, &mut |name, e| {
            members::spawn(
                control.clone(),
                Arc::from(name),
                e.clone(),
                tx.clone(),
                Arc::clone(&metrics),
                clients.clone(),
            )
        });
        for name in stopped {
            tracing::info!(cluster = %name, "member stopped");
            if let Ok(mut m) = self.clients.members.write() {
                m.remove(&name);
            }
            for k in watch::MEMBER_KINDS {
                self.expected.remove(&(name.clone(), k));
            }
        }
        for name in started {
            tracing::info!(cluster = %name, "member started");
            self.metrics.cluster_started(&name);
            if !self.ready.load(Ordering::SeqCst) {
                self.expected
                    .extend(watch::MEMBER_KINDS.map(|k| (name.clone(), k)));
            }
        }
    }

    fn finished(&mut self, d: Done) {
        match (&d.write, &d.outcome) {
            (
                Write::Bind {
                    namespace, name, ..
                },
                Outcome::Ok,
            ) => {
                tracing::debug!(pod = %format!("{namespace}/{name}"), "bound");
            }
            (
                Write::Bind {
                    namespace,
                    name,
                    node,
                    ..
                },
                outcome,
            ) => {
                let pod = format!("{namespace}/{name}");
                tracing::warn!(pod = %pod, node = %node, outcome = ?outcome, "bind failed; the pod is placed again next session");
                self.state.bind_failed(&pod, unix_now());
            }
            (
                Write::Place {
                    cluster,
                    namespace,
                    name,
                    node,
                    ..
                },
                Outcome::Failed { code, message },
            ) => {
                // The copy was not made (a refusal, a member that stopped answering or took
                // new credentials): the declared pod waits to be placed again.
                let pod = format!("{namespace}/{name}");
                tracing::warn!(pod = %pod, cluster = %cluster, node = %node, code, error = %message,
                    "copy not created in the member; the pod is placed again next session");
                self.state.bind_failed(&pod, unix_now());
            }
            (w, Outcome::Failed { code, message }) => {
                tracing::warn!(verb = w.verb(), code, error = %message, "write failed");
            }
            (w, outcome) => tracing::debug!(verb = w.verb(), outcome = ?outcome, "written"),
        }
    }

    fn reload(&mut self) {
        let Some(path) = &self.options.config_path else {
            return;
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            // A mounted ConfigMap is briefly absent while it is swapped; keep the config.
            return;
        };
        let options = ParseOptions {
            strict: self.options.strict_config,
        };
        let search = &self.options.search;
        match self.config.reload_with(&text, options, |c| {
            tephra_scheduler::default_node_search(c, search);
        }) {
            Ok(false) => {}
            Ok(true) => {
                let c = self.config.current();
                tracing::info!(path = %path.display(), actions = ?c.actions, "scheduler configuration reloaded");
                announce(&c, &self.metrics);
                // What can never be placed may differ under the new plugins.
                self.state.config_changed();
                self.metrics.reload_ok.set(1);
            }
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "scheduler configuration refused; the last good one stays in force");
                self.metrics.reload_errors.inc();
                self.metrics.reload_ok.set(0);
                // An Event on the scheduler's own Pod, when it knows it.
                if let Some((namespace, pod)) = self.options.pod.clone() {
                    self.executor.submit(vec![Write::Event {
                        cluster: CONTROL_PLANE.into(),
                        namespace,
                        kind: crate::writes::Involved::Pod,
                        group: pod,
                        uid: None,
                        reason: "ConfigRefused".into(),
                        message: format!(
                            "{}: {e}; the last good configuration stays in force",
                            path.display()
                        ),
                        warning: true,
                    }]);
                }
            }
        }
    }

    fn tick(&mut self) {
        self.reload();
        let leading = self.leadership.is_leader();
        let config = self.config.current();
        let annotations = self.ui.show(&self.state, leading, &config, unix_now());
        self.executor.submit(annotations);
        if leading != self.was_leader {
            self.was_leader = leading;
            if leading {
                tracing::info!("leading: sessions start");
                // A new leader may find a backlog: its first sessions are capped too.
                self.budget = Some(FIRST_BUDGET);
            } else {
                self.executor.hold_reports(false);
            }
        }
        if !leading || !self.started {
            return;
        }
        self.session += 1;
        let started = Instant::now();
        let mut marks: Vec<(String, Instant)> = Vec::new();
        let metrics = Arc::clone(&self.metrics);
        let mut observe = |step: Step<'_>, begin: bool| {
            let name = match step {
                Step::Open => "open".to_string(),
                Step::Plugin(p) => p.to_string(),
                Step::Action(a) => a.to_string(),
                Step::Close => "close".to_string(),
            };
            if begin {
                marks.push((name, Instant::now()));
            } else if let Some((n, t)) = marks.pop() {
                let took = ms(t.elapsed());
                if took > 50.0 {
                    tracing::debug!(phase = %n, took_ms = took, "slow session phase");
                }
                match step {
                    Step::Action(a) => {
                        metrics.phase.with_label_values(&[&n]).observe(took);
                        metrics.action.with_label_values(&[a]).observe(took);
                    }
                    Step::Plugin(p) => metrics
                        .plugin
                        .with_label_values(&[p, "OnSessionOpen"])
                        .observe(took),
                    Step::Open | Step::Close => {
                        metrics.phase.with_label_values(&[&n]).observe(took);
                    }
                }
            }
        };
        let now = unix_now();
        let budget = self.budget;
        let d = self
            .state
            .session(self.session_config(), now, self.session, &mut observe);
        // A capped session that used its whole budget leaves jobs untried: the next, with a
        // larger budget, runs at once, while this one's binds go out.
        if let Some(b) = budget {
            let placed = (d.binds.len() + d.pipelined.len()) as u64;
            if placed >= b {
                self.budget = Some(b.saturating_mul(BUDGET_GROWTH));
                self.again = true;
            } else {
                self.budget = None;
            }
            // The next session's binds come at once: until the backlog is worked off, the
            // reports wait behind them too.
            self.executor.hold_reports(self.budget.is_some());
        }
        let decided = started.elapsed();
        let wall = k8s_openapi::jiff::Timestamp::now();
        let clock = tick::Clock {
            now,
            now_ms: wall.as_millisecond(),
            stamp: Time(wall),
        };
        let deadlines = tick::Deadlines {
            graceful_eviction_ms: i64::try_from(self.options.graceful_eviction_timeout.as_millis())
                .unwrap_or(i64::MAX),
            gang_bind_s: i64::try_from(self.options.gang_bind_timeout.as_secs())
                .unwrap_or(i64::MAX),
        };
        let writes = tick::writes(&mut self.state, &mut self.planner, &d, &clock, &deadlines);
        let planned = started.elapsed();
        let count = writes.len();
        self.executor.submit(writes);
        self.metrics.e2e.observe(ms(started.elapsed()));
        report::session(&self.metrics, self.state.cache().world(), &d, now);
        tracing::debug!(
            session = self.session,
            core_ms = ms(decided),
            planned_ms = ms(planned),
            took_ms = ms(started.elapsed()),
            binds = d.binds.len(),
            writes = count,
            "session done"
        );
        if !d.binds.is_empty() || !d.evictions.is_empty() {
            tracing::info!(
                session = self.session,
                binds = d.binds.len(),
                evictions = d.evictions.len(),
                took_ms = ms(started.elapsed()),
                "session"
            );
        }
    }
}
