//! The discrete-event engine: a virtual clock, an event queue (arrivals, session ticks, pod
//! start and finish, faults), and the real scheduler core fed through the cache's event API.
//!
//! Sessions run on the scheduler period, but only when something changed since the last one
//! (an arrival, a finish, a fault): with nothing new a session would decide the same, so the
//! simulator skips it and simulated months cost little.
//!
//! Faults: until the failover controllers land, one simple rule stands in for them, named
//! [`REQUEUE_RULE`]: a fault that takes a cluster or a node away fails the pods there, and
//! every gang that lost a pod is re-queued whole (all its pods go back to Pending), so that
//! the scheduler places the gang again.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tephra_scheduler::cache::{Cache, Event};
use tephra_scheduler::model::{
    Cluster, Dequeue, GroupPhase, JobPolicy, NodeSpec, PodGroupSpec, PodSpec, QueueSpec,
    QueueState, Taint, TaskShape, TaskStatus,
};
use tephra_scheduler::resources::{PODS, ResourceError, Resources};
use tephra_scheduler::{SchedulerConfig, schedule};

use crate::checker::{CheckBind, CheckCluster, Checker, NodeKey};
use crate::record::Record;
use crate::report::{Report, Stats};
use crate::scenario::{ConfigRef, FaultKind, Scenario, ScenarioError, TraceFormat};
use crate::workload::{Merged, SimJob, effect};

/// Resource quantities as (name, quantity).
type Quantities = Vec<(String, String)>;

/// The name of the stand-in fault rule, as it appears in events and the report.
pub const REQUEUE_RULE: &str = "RequeueGangOnFault";

/// Errors running a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The world could not be built (a bad quantity, too many resource names, ...).
    #[error("{source_name}: {message}")]
    Build {
        /// Scenario file.
        source_name: String,
        /// What failed.
        message: String,
    },
}

/// How the run is driven.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Overrides `run.seed`.
    pub seed: Option<u64>,
    /// Overrides `run.until`, in ms.
    pub until_ms: Option<i64>,
}

/// Progress, reported now and then during a run.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Simulated seconds so far.
    pub simulated_s: f64,
    /// Simulated seconds the run will reach, when known.
    pub until_s: Option<f64>,
    /// Jobs submitted.
    pub submitted: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Pods bound.
    pub bound: u64,
    /// Wall seconds so far.
    pub wall_s: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Fault(usize),
    FaultEnd(usize),
    Released(String, u32),
    Finish(String, u32),
    Start(String, u32),
    Arrival,
    Tick,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PodState {
    Pending,
    Bound,
    Running,
    /// Evicted, terminating: still holds its node until the grace period ends.
    Releasing,
    Done,
}

struct PodRt {
    job: String,
    shape: Arc<TaskShape>,
    request: Vec<(String, String)>,
    index: u32,
    duration_ms: i64,
    state: PodState,
    /// The state a Releasing pod was in when evicted.
    releasing_from: PodState,
    node: Option<(String, String)>,
    generation: u32,
    started_ms: i64,
    gpus: i64,
    cpu_milli: i64,
}

struct JobRt {
    queue: String,
    min: u32,
    pods: Vec<String>,
    submit_ms: i64,
    started: u32,
    waited: bool,
    done: u32,
    group: PodGroupSpec,
}

/// A simulation in progress.
pub struct Sim<'s> {
    scenario: &'s Scenario,
    cache: Cache,
    config: Arc<SchedulerConfig>,
    now: i64,
    seq: u64,
    queue: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    sources: Merged,
    jobs: HashMap<String, JobRt>,
    pods: HashMap<String, PodRt>,
    tick_pending: bool,
    last_tick: Option<i64>,
    dirty: bool,
    session: u64,
    until_ms: Option<i64>,
    period: i64,
    start_delay: i64,
    grace: i64,
    checker: Checker,
    stats: Stats,
    /// Nodes of each cluster in scenario order, with their capacity.
    nodes: BTreeMap<String, Vec<(String, Quantities)>>,
    clusters: BTreeMap<String, Cluster>,
    down_nodes: BTreeMap<(String, String), u32>,
    wall: Instant,
}

fn build_err<E: std::fmt::Display>(s: &Scenario) -> impl Fn(E) -> SimError + '_ {
    move |e| SimError::Build {
        source_name: s.source.clone(),
        message: e.to_string(),
    }
}

fn load_config(s: &Scenario) -> Result<SchedulerConfig, SimError> {
    let text = match &s.scheduler.config {
        None => return Ok(SchedulerConfig::default_config()),
        Some(ConfigRef::Path(p)) => {
            let path = s.resolve(p);
            std::fs::read_to_string(&path).map_err(|e| {
                SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: format!("scheduler.config: {}: {e}", path.display()),
                })
            })?
        }
        Some(ConfigRef::Inline(v)) => serde_saphyr::to_string(v).map_err(|e| {
            SimError::Scenario(ScenarioError::Invalid {
                path: s.source.clone(),
                message: format!("scheduler.config: {e}"),
            })
        })?,
    };
    SchedulerConfig::parse(&text).map_err(|e| {
        SimError::Scenario(ScenarioError::Invalid {
            path: s.source.clone(),
            message: format!("scheduler.config: {e}"),
        })
    })
}

fn resources_of(cache: &mut Cache, list: &[(String, String)]) -> Result<Resources, ResourceError> {
    cache
        .names_mut()
        .parse(list.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

fn scaled(list: &[(String, String)], name: &str) -> i64 {
    let scale = if name == "cpu" { 1000 } else { 1 };
    list.iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| tephra_scheduler::quantity::parse_scaled(v, scale).ok())
        .unwrap_or(0)
}

impl<'s> Sim<'s> {
    /// Builds the fleet, queues and sources. Nothing runs yet.
    pub fn new(scenario: &'s Scenario, opts: RunOptions) -> Result<Self, SimError> {
        let config = Arc::new(load_config(scenario)?);
        let mut s = scenario.clone();
        if let Some(seed) = opts.seed {
            s.run.seed = seed;
        }
        let sources = Merged::open(&s)?;
        let mut sim = Self {
            scenario,
            cache: Cache::new(),
            config,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            sources,
            jobs: HashMap::new(),
            pods: HashMap::new(),
            tick_pending: false,
            last_tick: None,
            dirty: false,
            session: 0,
            until_ms: opts.until_ms.or(scenario.run.until.map(|d| d.0)),
            period: scenario.scheduler.period.0.max(1),
            start_delay: scenario.run.pod_start_delay.0.max(0),
            grace: scenario.run.eviction_grace_period.0.max(0),
            checker: Checker::default(),
            stats: Stats::default(),
            nodes: BTreeMap::new(),
            clusters: BTreeMap::new(),
            down_nodes: BTreeMap::new(),
            wall: Instant::now(),
        };
        sim.build_fleet()?;
        sim.build_queues()?;
        for (name, value) in &scenario.scheduler.priority_classes {
            sim.apply(Event::PriorityClassUpsert {
                name: name.clone(),
                value: *value,
            })?;
        }
        for (i, f) in scenario.faults.iter().enumerate() {
            sim.push(f.at.0, Ev::Fault(i));
        }
        if let Some(t) = sim.sources.peek() {
            sim.push(t, Ev::Arrival);
        }
        Ok(sim)
    }

    fn apply(&mut self, e: Event) -> Result<(), SimError> {
        self.cache.apply(e).map_err(build_err(self.scenario))
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, ev)));
    }

    fn add_cluster(&mut self, c: Cluster) -> Result<(), SimError> {
        self.checker.cluster(
            &c.name,
            CheckCluster {
                labels: c.labels.clone(),
                provider: c.provider.clone(),
                region: c.region.clone(),
                zone: c.zones.first().cloned(),
                taints: c.taints.clone(),
                ready: true,
            },
        );
        self.stats.cluster(&c.name);
        self.clusters.insert(c.name.clone(), c.clone());
        self.apply(Event::ClusterUpsert(c))
    }

    fn add_node(
        &mut self,
        spec: NodeSpec,
        capacity: Vec<(String, String)>,
    ) -> Result<(), SimError> {
        self.checker.node(&spec.cluster, &spec.name, &capacity);
        self.stats.capacity(
            &spec.cluster,
            scaled(&capacity, "nvidia.com/gpu"),
            scaled(&capacity, "cpu"),
        );
        self.nodes
            .entry(spec.cluster.clone())
            .or_default()
            .push((spec.name.clone(), capacity));
        self.apply(Event::NodeUpsert(spec))
    }

    fn build_fleet(&mut self) -> Result<(), SimError> {
        let s = self.scenario;
        for c in &s.fleet.clusters {
            let mut cluster = Cluster::named(&c.name);
            cluster.labels = c.labels.clone();
            cluster.provider = c.provider.clone();
            cluster.region = c.region.clone();
            cluster.zones = c.zone.clone().into_iter().collect();
            cluster.price = c.price.clone();
            cluster.taints = c
                .taints
                .iter()
                .map(|t| Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: effect(t.effect),
                })
                .collect();
            self.add_cluster(cluster)?;
            for pool in &c.node_pools {
                let capacity: Vec<(String, String)> = pool
                    .capacity
                    .iter()
                    .map(|(k, v)| (k.clone(), v.0.clone()))
                    .collect();
                let alloc = resources_of(&mut self.cache, &capacity).map_err(build_err(s))?;
                let taints: Vec<Taint> = pool
                    .taints
                    .iter()
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: effect(t.effect),
                    })
                    .collect();
                for i in 0..pool.count {
                    self.add_node(
                        NodeSpec {
                            name: format!("{}-{}-{i}", c.name, pool.name),
                            cluster: c.name.clone(),
                            labels: pool.labels.clone(),
                            taints: taints.clone(),
                            allocatable: alloc,
                            unschedulable: false,
                            ready: true,
                        },
                        capacity.clone(),
                    )?;
                }
            }
        }
        if let Some(ft) = &s.fleet.from_trace {
            if ft.format != TraceFormat::AlibabaGpu2023 {
                return Err(SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: "fleet.fromTrace.format: only alibaba-gpu-2023 has a node list".into(),
                }));
            }
            let path = s.resolve(&ft.path);
            let nodes = crate::traces::openb_nodes(&path).map_err(|message| {
                SimError::Scenario(ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: format!("fleet.fromTrace.path: {message}"),
                })
            })?;
            let n = ft.clusters.max(1);
            for c in 0..n {
                self.add_cluster(Cluster::named(&format!("openb-{c}")))?;
            }
            for (i, node) in nodes.into_iter().enumerate() {
                let cluster = format!("openb-{}", i % n);
                let alloc = resources_of(&mut self.cache, &node.capacity).map_err(build_err(s))?;
                self.add_node(
                    NodeSpec {
                        name: node.name,
                        cluster,
                        labels: node.labels,
                        taints: Vec::new(),
                        allocatable: alloc,
                        unschedulable: false,
                        ready: true,
                    },
                    node.capacity,
                )?;
            }
        }
        Ok(())
    }

    fn build_queues(&mut self) -> Result<(), SimError> {
        let s = self.scenario;
        for q in &s.queues {
            let list = |r: &Option<crate::scenario::Resources>| -> Option<Vec<(String, String)>> {
                r.as_ref()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
            };
            let mut spec = QueueSpec::named(&q.name);
            spec.weight = q.weight.unwrap_or(1);
            if let Some(l) = list(&q.capability) {
                spec.capability = Some(resources_of(&mut self.cache, &l).map_err(build_err(s))?);
            }
            if let Some(l) = list(&q.guarantee) {
                spec.guarantee = Some(resources_of(&mut self.cache, &l).map_err(build_err(s))?);
            }
            if let Some(l) = list(&q.deserved) {
                spec.deserved = Some(resources_of(&mut self.cache, &l).map_err(build_err(s))?);
            }
            spec.reclaimable = q.reclaimable.unwrap_or(true);
            spec.parent = q.parent.clone();
            spec.priority = q.priority.unwrap_or(0);
            spec.dequeue = match q.dequeue_strategy.as_deref() {
                Some("fifo") => Dequeue::Fifo,
                _ => Dequeue::Traverse,
            };
            spec.state = match q.state.as_deref() {
                Some("Closed") => QueueState::Closed,
                Some("Closing") => QueueState::Closing,
                _ => QueueState::Open,
            };
            self.stats.queue(&q.name, spec.weight);
            self.apply(Event::QueueUpsert(spec))?;
        }
        Ok(())
    }

    fn mark_dirty(&mut self) {
        self.dirty = true;
        if !self.tick_pending {
            let next = (self.now + self.period - 1) / self.period * self.period;
            let next = if next < self.now { self.now } else { next };
            // A change made by a session waits for the next period, never the same instant.
            let next = if self.last_tick == Some(next) {
                next + self.period
            } else {
                next
            };
            self.tick_pending = true;
            self.push(next, Ev::Tick);
        }
    }

    fn submit(&mut self, job: SimJob, out: &mut dyn FnMut(&Record)) -> Result<(), SimError> {
        let key = job.key();
        let total = job.replicas();
        let min = job.min_member.unwrap_or(total).min(total).max(1);
        let mut shapes = Vec::new();
        let mut min_resources = Resources::ZERO;
        let mut counted = 0u32;
        for t in &job.tasks {
            let mut request =
                resources_of(&mut self.cache, &t.request).map_err(build_err(self.scenario))?;
            request.set(PODS, 1);
            let shape = Arc::new(TaskShape {
                role: t.role.clone(),
                request,
                node_selector: t.node_selector.clone(),
                affinity: t.affinity.clone(),
                tolerations: t.tolerations.clone(),
                priority: job.priority,
                preemptable: true,
                namespace: job.namespace.clone(),
                priority_class: None,
            });
            let take = t.replicas.min(min.saturating_sub(counted));
            min_resources.add(&request.times(i64::from(take)));
            counted += take;
            shapes.push(shape);
        }
        let group = PodGroupSpec {
            namespace: job.namespace.clone(),
            name: job.name.clone(),
            queue: job.queue.clone(),
            min_member: min,
            min_task_member: job
                .tasks
                .iter()
                .filter_map(|t| t.min.map(|m| (t.role.clone(), m)))
                .collect(),
            min_resources: Some(min_resources),
            priority_class: None,
            priority: Some(job.priority),
            phase: GroupPhase::Pending,
            created: self.now / 1000,
            policy: Arc::new(job.policy.clone()),
        };
        self.checker.job(&key, min, job.policy.clone());
        let wants_gpu = job
            .tasks
            .iter()
            .any(|t| scaled(&t.request, "nvidia.com/gpu") > 0);
        self.stats.submitted(&job.queue, wants_gpu);
        out(&Record::submit(
            self.now,
            &key,
            &job.queue,
            min,
            job.policy.splittable,
        ));
        self.apply(Event::PodGroupUpsert(group.clone()))?;
        let mut pod_names = Vec::new();
        for (t, shape) in job.tasks.iter().zip(&shapes) {
            for i in 0..t.replicas {
                let name = format!("{}-{}-{i}", job.name, t.role);
                let pod_key = format!("{}/{name}", job.namespace);
                self.apply(Event::PodUpsert(PodSpec {
                    namespace: job.namespace.clone(),
                    name,
                    group: Some(job.name.clone()),
                    shape: Arc::clone(shape),
                    index: i,
                    status: TaskStatus::Pending,
                    placement: None,
                    created: self.now / 1000,
                }))?;
                self.pods.insert(
                    pod_key.clone(),
                    PodRt {
                        job: key.clone(),
                        shape: Arc::clone(shape),
                        request: t.request.clone(),
                        index: i,
                        duration_ms: t.duration_ms.max(0),
                        state: PodState::Pending,
                        releasing_from: PodState::Pending,
                        node: None,
                        generation: 0,
                        started_ms: 0,
                        gpus: scaled(&t.request, "nvidia.com/gpu"),
                        cpu_milli: scaled(&t.request, "cpu"),
                    },
                );
                pod_names.push(pod_key);
            }
        }
        self.jobs.insert(
            key,
            JobRt {
                queue: job.queue.clone(),
                min,
                pods: pod_names,
                submit_ms: self.now,
                started: 0,
                waited: false,
                done: 0,
                group,
            },
        );
        self.mark_dirty();
        Ok(())
    }

    fn pod_event(&mut self, key: &str, status: TaskStatus) -> Result<(), SimError> {
        let Some(p) = self.pods.get(key) else {
            return Ok(());
        };
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let group = self.jobs.get(&p.job).map(|j| j.group.name.clone());
        let spec = PodSpec {
            namespace: ns.to_string(),
            name: name.to_string(),
            group,
            shape: Arc::clone(&p.shape),
            index: p.index,
            status,
            placement: p.node.clone(),
            created: 0,
        };
        self.apply(Event::PodUpsert(spec))
    }

    fn tick(&mut self, out: &mut dyn FnMut(&Record)) -> Result<(), SimError> {
        self.tick_pending = false;
        self.last_tick = Some(self.now);
        if !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        self.session += 1;
        let started = Instant::now();
        let d = schedule(
            self.cache.snapshot(),
            Arc::clone(&self.config),
            self.now / 1000,
            self.session,
        );
        self.stats.session(started.elapsed().as_secs_f64() * 1000.0);
        let mut checks = Vec::new();
        for b in &d.binds {
            let Some(p) = self.pods.get_mut(&b.task) else {
                continue;
            };
            if p.state != PodState::Pending {
                continue;
            }
            p.state = PodState::Bound;
            p.node = Some((b.cluster.clone(), b.node.clone()));
            let generation = p.generation;
            checks.push(CheckBind {
                job: b.job.clone(),
                pod: b.task.clone(),
                cluster: b.cluster.clone(),
                node: b.node.clone(),
                request: p.request.clone(),
            });
            let queue = self
                .jobs
                .get(&b.job)
                .map(|j| j.queue.clone())
                .unwrap_or_default();
            out(&Record::placed(
                "bind", self.now, &b.job, &queue, b, &p.request,
            ));
            self.stats
                .bound(&b.cluster, &queue, p.gpus, p.cpu_milli, self.now);
            self.pod_event(&b.task.clone(), TaskStatus::Bound)?;
            self.push(
                self.now + self.start_delay,
                Ev::Start(b.task.clone(), generation),
            );
        }
        self.checker.binds(&checks);
        // Preemption and reclaim: evicted pods terminate over the grace period, then go
        // back to Pending (see `release_pod`).
        for e in &d.evictions {
            let kind = if e.reason.starts_with("reclaimed") {
                "reclaim"
            } else {
                "preempt"
            };
            self.evict_pod(&e.task, &e.reason, kind, out)?;
        }
        if !d.evictions.is_empty() {
            self.mark_dirty();
        }
        // Decisions are applied below; the next session only revisits jobs that change.
        self.cache.clear_changed();
        for g in &d.groups {
            let Some(job) = self.jobs.get_mut(&g.job) else {
                continue;
            };
            if job.group.phase != g.phase {
                job.group.phase = g.phase;
                let spec = job.group.clone();
                self.apply(Event::PodGroupUpsert(spec))?;
            }
        }
        Ok(())
    }

    /// The pod, if an event of this `generation` still applies to it and it is in `state`
    /// (a re-queued pod's old start and finish events are stale).
    fn current_pod(&mut self, pod: &str, generation: u32, state: PodState) -> Option<&mut PodRt> {
        self.pods
            .get_mut(pod)
            .filter(|p| p.generation == generation && p.state == state)
    }

    fn start(
        &mut self,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let now = self.now;
        let Some(p) = self.current_pod(pod, generation, PodState::Bound) else {
            return Ok(());
        };
        p.state = PodState::Running;
        p.started_ms = now;
        let finish = now + p.duration_ms;
        let job_key = p.job.clone();
        let node = p.node.clone().unwrap_or_default();
        let request = p.request.clone();
        self.pod_event(pod, TaskStatus::Running)?;
        self.push(finish, Ev::Finish(pod.to_string(), generation));
        if let Some(j) = self.jobs.get_mut(&job_key) {
            j.started += 1;
            if !j.waited && j.started >= j.min {
                j.waited = true;
                self.stats
                    .waited(&j.queue, (self.now - j.submit_ms) as f64 / 1000.0);
            }
            out(&Record::pod(
                "start", self.now, &job_key, &j.queue, pod, &node, &request, None,
            ));
        }
        Ok(())
    }

    fn finish(
        &mut self,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let now = self.now;
        let Some(p) = self.current_pod(pod, generation, PodState::Running) else {
            return Ok(());
        };
        p.state = PodState::Done;
        let job_key = p.job.clone();
        let node = p.node.clone().unwrap_or_default();
        let (gpus, cpu, ran) = (p.gpus, p.cpu_milli, now - p.started_ms);
        let request = p.request.clone();
        self.pod_event(pod, TaskStatus::Succeeded)?;
        self.checker.released(&job_key, pod, true);
        let Some(j) = self.jobs.get_mut(&job_key) else {
            return Ok(());
        };
        let queue = j.queue.clone();
        self.stats.released(&node.0, &queue, gpus, cpu, self.now);
        self.stats.gpu_time(&queue, gpus, ran);
        out(&Record::pod(
            "finish", self.now, &job_key, &queue, pod, &node, &request, None,
        ));
        j.done += 1;
        if j.done as usize == j.pods.len() {
            self.complete(&job_key)?;
        }
        self.mark_dirty();
        Ok(())
    }

    /// A finished job leaves the cache and the engine: memory follows jobs in flight.
    fn complete(&mut self, key: &str) -> Result<(), SimError> {
        let Some(j) = self.jobs.remove(key) else {
            return Ok(());
        };
        for pod in &j.pods {
            self.pods.remove(pod);
            let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
            self.apply(Event::PodDelete {
                namespace: ns.into(),
                name: name.into(),
            })?;
        }
        self.apply(Event::PodGroupDelete {
            namespace: j.group.namespace.clone(),
            name: j.group.name.clone(),
        })?;
        self.checker.job_done(key);
        self.stats.completed(&j.queue);
        Ok(())
    }

    /// The stand-in failover rule: every gang with a pod on a lost node goes back to Pending.
    /// Evicts one bound or running pod. A pod lost to a fault is gone at once; a preempted or
    /// reclaimed one terminates over `run.evictionGracePeriod`, holding its node meanwhile.
    /// Returns whether it held a node.
    fn evict_pod(
        &mut self,
        pod: &str,
        reason: &str,
        kind: &'static str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<bool, SimError> {
        let Some(p) = self.pods.get_mut(pod) else {
            return Ok(false);
        };
        if !matches!(p.state, PodState::Bound | PodState::Running) {
            return Ok(false);
        }
        let node = p.node.clone().unwrap_or_default();
        let request = p.request.clone();
        let job_key = p.job.clone();
        let generation = p.generation;
        let queue = self
            .jobs
            .get(&job_key)
            .map(|j| j.queue.clone())
            .unwrap_or_default();
        self.stats.evicted(kind);
        out(&Record::pod(
            "evict",
            self.now,
            &job_key,
            &queue,
            pod,
            &node,
            &request,
            Some(reason.to_string()),
        ));
        if kind == "fault" || self.grace == 0 {
            self.release_pod(pod)?;
        } else {
            if let Some(p) = self.pods.get_mut(pod) {
                p.releasing_from = p.state;
                p.state = PodState::Releasing;
            }
            self.pod_event(pod, TaskStatus::Releasing)?;
            self.push(
                self.now + self.grace,
                Ev::Released(pod.to_string(), generation),
            );
        }
        Ok(true)
    }

    /// A pod stops holding its node and goes back to Pending; a gang with nothing left on a
    /// node is Inqueue again.
    fn release_pod(&mut self, pod: &str) -> Result<(), SimError> {
        let now = self.now;
        let Some(p) = self.pods.get_mut(pod) else {
            return Ok(());
        };
        let node = p.node.take().unwrap_or_default();
        let was_running = p.state == PodState::Running
            || (p.state == PodState::Releasing && p.releasing_from == PodState::Running);
        let (gpus, cpu, ran) = (p.gpus, p.cpu_milli, now - p.started_ms);
        p.state = PodState::Pending;
        p.generation += 1;
        let job_key = p.job.clone();
        let queue = self
            .jobs
            .get(&job_key)
            .map(|j| j.queue.clone())
            .unwrap_or_default();
        self.checker.released(&job_key, pod, false);
        self.stats.released(&node.0, &queue, gpus, cpu, now);
        if was_running {
            self.stats.gpu_time(&queue, gpus, ran);
            if let Some(j) = self.jobs.get_mut(&job_key) {
                j.started = j.started.saturating_sub(1);
            }
        }
        self.pod_event(pod, TaskStatus::Pending)?;
        let placed = self.jobs.get(&job_key).map_or(0, |j| {
            j.pods
                .iter()
                .filter(|p| {
                    self.pods.get(*p).is_some_and(|p| {
                        matches!(
                            p.state,
                            PodState::Bound | PodState::Running | PodState::Releasing
                        )
                    })
                })
                .count()
        });
        if placed == 0 {
            self.requeue_group(&job_key)?;
        }
        self.mark_dirty();
        Ok(())
    }

    /// Puts a job's PodGroup back to Inqueue, for the scheduler to place the gang again.
    fn requeue_group(&mut self, job_key: &str) -> Result<(), SimError> {
        if let Some(j) = self.jobs.get_mut(job_key)
            && j.group.phase != GroupPhase::Inqueue
        {
            j.started = 0;
            j.group.phase = GroupPhase::Inqueue;
            let spec = j.group.clone();
            self.apply(Event::PodGroupUpsert(spec))?;
        }
        Ok(())
    }

    fn requeue_on(
        &mut self,
        lost: &dyn Fn(&NodeKey) -> bool,
        reason: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let mut hit: Vec<String> = self
            .pods
            .values()
            .filter(|p| matches!(p.state, PodState::Bound | PodState::Running))
            .filter(|p| p.node.as_ref().is_some_and(lost))
            .map(|p| p.job.clone())
            .collect();
        hit.sort();
        hit.dedup();
        for job_key in hit {
            let Some(j) = self.jobs.get(&job_key) else {
                continue;
            };
            let pods = j.pods.clone();
            for pod in pods {
                self.evict_pod(
                    &pod,
                    &format!("{reason}; gang re-queued ({REQUEUE_RULE})"),
                    "fault",
                    out,
                )?;
            }
            self.requeue_group(&job_key)?;
        }
        self.mark_dirty();
        Ok(())
    }

    fn set_cluster_ready(&mut self, name: &str, ready: bool) -> Result<(), SimError> {
        let Some(c) = self.clusters.get_mut(name) else {
            return Ok(());
        };
        c.ready = ready;
        let c = c.clone();
        self.checker.cluster_ready(name, ready);
        self.apply(Event::ClusterUpsert(c))
    }

    fn set_node_ready(&mut self, cluster: &str, node: &str, ready: bool) -> Result<(), SimError> {
        let Some(cap) = self
            .nodes
            .get(cluster)
            .and_then(|ns| ns.iter().find(|(n, _)| n == node))
            .map(|(_, c)| c.clone())
        else {
            return Ok(());
        };
        let Some(id) = self.cache.world().node_id(cluster, node) else {
            return Ok(());
        };
        let Some(spec) = self.cache.world().nodes.get(id).map(|n| n.spec.clone()) else {
            return Ok(());
        };
        let _ = cap;
        self.checker.node_ready(cluster, node, ready);
        self.apply(Event::NodeUpsert(NodeSpec { ready, ..spec }))
    }

    fn fault_nodes(&self, i: usize) -> Vec<String> {
        let f = &self.scenario.faults[i];
        let all: Vec<String> = self
            .nodes
            .get(&f.cluster)
            .map(|ns| ns.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        match (&f.node, f.count) {
            (Some(n), _) => all.into_iter().filter(|x| x == n).collect(),
            (None, Some(c)) => all.into_iter().take(c).collect(),
            (None, None) => Vec::new(),
        }
    }

    fn fault(
        &mut self,
        i: usize,
        begin: bool,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let f = self.scenario.faults[i].clone();
        let kind = match f.kind {
            FaultKind::Unreachable => "unreachable",
            FaultKind::Notready => "notready",
            FaultKind::NodeDown => "node-down",
            FaultKind::Recover => "recover",
        };
        if !begin || f.kind == FaultKind::Recover {
            // Recover: the fault's scope comes back (a `recover` fault restores the cluster).
            out(&Record::fault("recover", self.now, &f.cluster, None, kind));
            match f.kind {
                FaultKind::NodeDown => {
                    for n in self.fault_nodes(i) {
                        let key = (f.cluster.clone(), n.clone());
                        let left = self
                            .down_nodes
                            .get(&key)
                            .copied()
                            .unwrap_or(1)
                            .saturating_sub(1);
                        if left == 0 {
                            self.down_nodes.remove(&key);
                            self.set_node_ready(&f.cluster, &n, true)?;
                        } else {
                            self.down_nodes.insert(key, left);
                        }
                    }
                }
                _ => {
                    self.set_cluster_ready(&f.cluster, true)?;
                    let downs: Vec<String> = self
                        .down_nodes
                        .keys()
                        .filter(|(c, _)| *c == f.cluster)
                        .map(|(_, n)| n.clone())
                        .collect();
                    if f.kind == FaultKind::Recover {
                        for n in downs {
                            self.down_nodes.remove(&(f.cluster.clone(), n.clone()));
                            self.set_node_ready(&f.cluster, &n, true)?;
                        }
                    }
                }
            }
            self.mark_dirty();
            return Ok(());
        }
        match f.kind {
            FaultKind::Unreachable | FaultKind::Notready => {
                out(&Record::fault("fault", self.now, &f.cluster, None, kind));
                self.set_cluster_ready(&f.cluster, false)?;
                let cluster = f.cluster.clone();
                self.requeue_on(
                    &|n: &(String, String)| n.0 == cluster,
                    &format!("cluster {} {kind}", f.cluster),
                    out,
                )?;
            }
            FaultKind::NodeDown => {
                let nodes = self.fault_nodes(i);
                for n in &nodes {
                    out(&Record::fault("fault", self.now, &f.cluster, Some(n), kind));
                    *self
                        .down_nodes
                        .entry((f.cluster.clone(), n.clone()))
                        .or_insert(0) += 1;
                    self.set_node_ready(&f.cluster, n, false)?;
                }
                let cluster = f.cluster.clone();
                self.requeue_on(
                    &|x: &(String, String)| x.0 == cluster && nodes.contains(&x.1),
                    &format!("node(s) down in cluster {}", f.cluster),
                    out,
                )?;
            }
            FaultKind::Recover => {}
        }
        if let Some(d) = f.duration {
            self.push(self.now + d.0, Ev::FaultEnd(i));
        }
        Ok(())
    }

    /// Runs to the end: `until`, or when nothing is left to happen.
    pub fn run(
        mut self,
        out: &mut dyn FnMut(&Record),
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Report, SimError> {
        let mut last_progress = Instant::now();
        while let Some(Reverse((t, _, ev))) = self.queue.pop() {
            if self.until_ms.is_some_and(|u| t > u) {
                self.now = self.until_ms.unwrap_or(t);
                break;
            }
            self.now = t;
            match ev {
                Ev::Arrival => {
                    while self.sources.peek().is_some_and(|a| a <= self.now) {
                        if let Some(job) = self.sources.next_job() {
                            self.submit(job, out)?;
                        }
                    }
                    if let Some(next) = self.sources.peek() {
                        self.push(next, Ev::Arrival);
                    }
                }
                Ev::Tick => self.tick(out)?,
                Ev::Start(pod, generation) => self.start(&pod, generation, out)?,
                Ev::Finish(pod, generation) => self.finish(&pod, generation, out)?,
                Ev::Released(pod, generation) => {
                    if self.pods.get(&pod).is_some_and(|p| {
                        p.generation == generation && p.state == PodState::Releasing
                    }) {
                        self.release_pod(&pod)?;
                    }
                }
                Ev::Fault(i) => self.fault(i, true, out)?,
                Ev::FaultEnd(i) => self.fault(i, false, out)?,
            }
            if last_progress.elapsed().as_millis() >= 200 {
                last_progress = Instant::now();
                progress(&self.progress());
            }
        }
        if let Some(u) = self.until_ms
            && self.now < u
            && self.queue.is_empty()
        {
            // Nothing more happens; the clock still reaches `until` for utilization.
            self.now = u;
        }
        progress(&self.progress());
        // Pods still running at the end have used GPU time too.
        let still: Vec<(String, i64, i64)> = self
            .pods
            .values()
            .filter(|p| {
                matches!(p.state, PodState::Running)
                    || (p.state == PodState::Releasing && p.releasing_from == PodState::Running)
            })
            .filter_map(|p| {
                self.jobs
                    .get(&p.job)
                    .map(|j| (j.queue.clone(), p.gpus, self.now - p.started_ms))
            })
            .collect();
        for (queue, gpus, ran) in still {
            self.stats.gpu_time(&queue, gpus, ran);
        }
        let running = self
            .jobs
            .values()
            .filter(|j| {
                j.pods.iter().any(|p| {
                    self.pods.get(p).is_some_and(|p| {
                        matches!(
                            p.state,
                            PodState::Bound | PodState::Running | PodState::Done
                        )
                    })
                })
            })
            .count() as u64;
        let pending = self.jobs.len() as u64 - running;
        let mut report = self.stats.finish(
            &self.scenario.source,
            self.scenario.run.seed,
            self.now,
            self.wall.elapsed().as_secs_f64(),
            pending,
            running,
            self.checker.invariants.clone(),
        );
        report.trace_skipped = self.sources.skipped();
        report.notes = self.sources.notes();
        report.notes.push(format!(
            "faults use the stand-in rule {REQUEUE_RULE}: gangs that lose a pod to a fault are re-queued whole"
        ));
        report.violations = self.checker.details.clone();
        Ok(report)
    }

    fn progress(&self) -> Progress {
        Progress {
            simulated_s: self.now as f64 / 1000.0,
            until_s: self.until_ms.map(|u| u as f64 / 1000.0),
            submitted: self.stats.total_submitted(),
            completed: self.stats.total_completed(),
            bound: self.stats.total_bound(),
            wall_s: self.wall.elapsed().as_secs_f64(),
        }
    }
}

/// Policy of a job as the checker needs it (re-exported for tests).
pub fn default_policy() -> JobPolicy {
    JobPolicy::default()
}
