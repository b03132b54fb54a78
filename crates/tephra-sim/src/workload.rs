//! Job sources: explicit jobs, synthetic arrivals and trace replays, merged in arrival order and
//! read lazily, so memory grows with jobs in flight rather than with jobs seen.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use tephra_scheduler::model::{JobPolicy, Requirement, SelectorOp, TaintEffect, Toleration};
use tephra_scheduler::quantity::parse_scaled;

use crate::rng::Rng;
use crate::scenario::{
    Arrival, Count, CountDist, Dur, Effect, GenerateDef, JobDef, PolicyDef, Scenario,
    ScenarioError, Span, SpanDist, TraceDef, TraceFormat,
};

/// One task (role) of a job to submit.
#[derive(Clone, Debug, PartialEq)]
pub struct SimTask {
    /// Role name.
    pub role: String,
    /// Replicas.
    pub replicas: u32,
    /// The role's gang minimum.
    pub min: Option<u32>,
    /// Per-pod request, as (resource, quantity) pairs.
    pub request: Vec<(String, String)>,
    /// Run time of each pod, in ms.
    pub duration_ms: i64,
    /// Node selector.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms ORed, requirements within a term ANDed.
    pub affinity: Vec<Vec<Requirement>>,
    /// Node tolerations.
    pub tolerations: Vec<Toleration>,
}

/// A job to submit.
#[derive(Clone, Debug, PartialEq)]
pub struct SimJob {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Queue.
    pub queue: String,
    /// Submission time, ms.
    pub submit_ms: i64,
    /// Priority value.
    pub priority: i32,
    /// Gang size (None: all replicas).
    pub min_member: Option<u32>,
    /// Tasks.
    pub tasks: Vec<SimTask>,
    /// Placement policy.
    pub policy: JobPolicy,
}

impl SimJob {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Total replicas.
    pub fn replicas(&self) -> u32 {
        self.tasks.iter().map(|t| t.replicas).sum()
    }
}

/// Converts a scenario policy into the scheduler's.
pub fn policy(def: Option<&PolicyDef>) -> JobPolicy {
    let Some(def) = def else {
        return JobPolicy::default();
    };
    let mut p = JobPolicy {
        splittable: def.splittable,
        ..JobPolicy::default()
    };
    if let Some(a) = &def.cluster_affinity {
        p.cluster_names = a.cluster_names.clone();
        p.exclude = a.exclude.clone();
        for (key, values) in [
            ("region", &a.regions),
            ("zone", &a.zones),
            ("provider", &a.providers),
        ] {
            if !values.is_empty() {
                p.field_requirements.push(Requirement {
                    key: key.into(),
                    op: SelectorOp::In,
                    values: values.clone(),
                });
            }
        }
        for (k, v) in &a.labels {
            p.cluster_labels.push(Requirement {
                key: k.clone(),
                op: SelectorOp::In,
                values: vec![v.clone()],
            });
        }
    }
    p.tolerations = def
        .cluster_tolerations
        .iter()
        .map(|t| Toleration {
            key: t.key.clone(),
            exists: t.operator.as_deref() == Some("Exists"),
            value: t.value.clone(),
            effect: t.effect.map(effect),
        })
        .collect();
    p
}

/// Converts a scenario taint effect.
pub fn effect(e: Effect) -> TaintEffect {
    match e {
        Effect::NoSchedule => TaintEffect::NoSchedule,
        Effect::PreferNoSchedule => TaintEffect::PreferNoSchedule,
        Effect::NoExecute => TaintEffect::NoExecute,
    }
}

fn request(res: &crate::scenario::Resources) -> Vec<(String, String)> {
    res.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
}

/// What a trace reader skipped, by reason.
pub type Skipped = BTreeMap<String, u64>;

/// A lazy source of jobs in arrival order.
pub trait JobSource {
    /// Arrival time of the next job, if any.
    fn peek(&mut self) -> Option<i64>;
    /// The next job.
    fn next_job(&mut self) -> Option<SimJob>;
    /// Rows skipped so far, by reason (traces only).
    fn skipped(&self) -> Skipped {
        Skipped::new()
    }
    /// Notes for the report (e.g. how fractional GPUs were treated).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

struct Explicit {
    jobs: std::vec::IntoIter<SimJob>,
    head: Option<SimJob>,
}

impl JobSource for Explicit {
    fn peek(&mut self) -> Option<i64> {
        if self.head.is_none() {
            self.head = self.jobs.next();
        }
        self.head.as_ref().map(|j| j.submit_ms)
    }
    fn next_job(&mut self) -> Option<SimJob> {
        self.peek();
        self.head.take()
    }
}

fn explicit(defs: &[JobDef], classes: &BTreeMap<String, i32>) -> Explicit {
    let mut jobs: Vec<SimJob> = defs
        .iter()
        .map(|d| SimJob {
            namespace: d.namespace.clone().unwrap_or_else(|| "default".into()),
            name: d.name.clone(),
            queue: d.queue.clone().unwrap_or_else(|| "default".into()),
            submit_ms: d.submit_at.0,
            priority: d
                .priority
                .or_else(|| {
                    d.priority_class
                        .as_ref()
                        .and_then(|c| classes.get(c).copied())
                })
                .unwrap_or(0),
            min_member: d.min_available,
            tasks: d
                .tasks
                .iter()
                .map(|t| SimTask {
                    role: t.name.clone(),
                    replicas: t.replicas,
                    min: t.min_available,
                    request: request(&t.resources),
                    duration_ms: t.duration.0,
                    node_selector: t.node_selector.clone(),
                    affinity: Vec::new(),
                    tolerations: Vec::new(),
                })
                .collect(),
            policy: policy(d.policy.as_ref()),
        })
        .collect();
    jobs.sort_by_key(|j| j.submit_ms);
    Explicit {
        jobs: jobs.into_iter(),
        head: None,
    }
}

fn weighted(weights: &BTreeMap<String, u32>, pick: u64) -> &str {
    let total: u64 = weights.values().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return "default";
    }
    let mut x = pick % total;
    for (q, w) in weights {
        if x < u64::from(*w) {
            return q;
        }
        x -= u64::from(*w);
    }
    "default"
}

struct Generator {
    def: GenerateDef,
    rng: Rng,
    index: usize,
    next_ms: i64,
    classes: BTreeMap<String, i32>,
    source: usize,
}

impl Generator {
    fn count(&mut self, c: &Count) -> u32 {
        match c {
            Count::Fixed(n) => *n,
            Count::Dist(CountDist::Uniform([a, b])) => {
                let (lo, hi) = ((*a).min(*b), (*a).max(*b));
                lo + self.rng.below(u64::from(hi - lo) + 1) as u32
            }
            Count::Dist(CountDist::Choice(v)) if !v.is_empty() => {
                v[self.rng.below(v.len() as u64) as usize]
            }
            Count::Dist(CountDist::Choice(_)) => 1,
        }
    }

    fn span(&mut self, s: &Span) -> i64 {
        match s {
            Span::Fixed(d) => d.0,
            Span::Dist(SpanDist::Uniform([a, b])) => {
                let (lo, hi) = (a.0.min(b.0), a.0.max(b.0));
                lo + self.rng.below((hi - lo) as u64 + 1) as i64
            }
            Span::Dist(SpanDist::Exponential { mean }) => {
                let u = self.rng.unit().max(1e-12);
                (-(mean.0 as f64) * u.ln()).round() as i64
            }
            Span::Dist(SpanDist::Choice(v)) if !v.is_empty() => {
                v[self.rng.below(v.len() as u64) as usize].0
            }
            Span::Dist(SpanDist::Choice(_)) => 0,
        }
    }

    fn advance(&mut self) {
        let gap = match self.def.arrival {
            Arrival::Poisson { per_hour } => {
                let u = self.rng.unit().max(1e-12);
                (-(3_600_000.0 / per_hour) * u.ln()).round() as i64
            }
            Arrival::Every(d) => d.0,
        };
        self.next_ms += gap.max(0);
    }
}

impl JobSource for Generator {
    fn peek(&mut self) -> Option<i64> {
        (self.index < self.def.count).then_some(self.next_ms)
    }

    fn next_job(&mut self) -> Option<SimJob> {
        if self.index >= self.def.count {
            return None;
        }
        let t = self.def.template.clone();
        let mut tasks = Vec::new();
        for task in &t.tasks {
            let replicas = self.count(&task.replicas).max(1);
            let duration_ms = self.span(&task.duration);
            tasks.push(SimTask {
                role: task.name.clone(),
                replicas,
                min: None,
                request: request(&task.resources),
                duration_ms,
                node_selector: task.node_selector.clone(),
                affinity: Vec::new(),
                tolerations: Vec::new(),
            });
        }
        let total: u32 = tasks.iter().map(|t| t.replicas).sum();
        let pick = self.rng.next_u64();
        let queue = if self.def.queue.is_empty() {
            "default".to_string()
        } else {
            weighted(&self.def.queue, pick).to_string()
        };
        let job = SimJob {
            namespace: "default".into(),
            name: format!(
                "{}-{}-{}",
                t.name.as_deref().unwrap_or("gen"),
                self.source,
                self.index
            ),
            queue,
            submit_ms: self.next_ms,
            priority: t
                .priority
                .or_else(|| {
                    t.priority_class
                        .as_ref()
                        .and_then(|c| self.classes.get(c).copied())
                })
                .unwrap_or(0),
            min_member: t.min_available.map(|m| m.min(total)),
            tasks,
            policy: policy(t.policy.as_ref()),
        };
        self.index += 1;
        self.advance();
        Some(job)
    }
}

/// A CSV trace read line by line.
struct Trace {
    def: TraceDef,
    lines: std::io::Lines<BufReader<File>>,
    header: Vec<String>,
    head: Option<SimJob>,
    emitted: usize,
    skipped: Skipped,
    seed: u64,
    done: bool,
    fractional: u64,
}

fn skip(skipped: &mut Skipped, why: &str) {
    *skipped.entry(why.to_string()).or_insert(0) += 1;
}

impl Trace {
    fn open(def: &TraceDef, path: &Path, seed: u64) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = BufReader::new(file).lines();
        let header = match lines.next() {
            Some(Ok(h)) => h
                .trim_start_matches('#')
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
            _ => return Err(format!("{}: empty trace", path.display())),
        };
        Ok(Self {
            def: def.clone(),
            lines,
            header,
            head: None,
            emitted: 0,
            skipped: Skipped::new(),
            seed,
            done: false,
            fractional: 0,
        })
    }

    fn queue_for(&self, id: u64) -> String {
        if self.def.queues.is_empty() {
            return "default".into();
        }
        let pick = Rng::new(self.seed ^ id.wrapping_mul(0x9E37_79B9)).next_u64();
        weighted(&self.def.queues, pick).to_string()
    }

    fn col(&self, row: &[&str], name: &str) -> Option<String> {
        let i = self.header.iter().position(|h| h == name)?;
        row.get(i).map(|s| s.trim().to_string())
    }

    fn in_window(&self, t_ms: i64) -> Result<(), &'static str> {
        if self.def.from.is_some_and(|f| t_ms < f.0) {
            return Err("before the window (from)");
        }
        if self.def.until.is_some_and(|u| t_ms >= u.0) {
            return Err("after the window (until)");
        }
        Ok(())
    }

    /// Parses one RFold row: job id, arrival, topology, shape, size, duration.
    fn rfold(&mut self, row: &[&str]) -> Result<SimJob, &'static str> {
        if row.len() < 6 {
            return Err("malformed row (fewer than six columns)");
        }
        let id: u64 = row[0].trim().parse().map_err(|_| "malformed job id")?;
        let arrival: f64 = row[1]
            .trim()
            .parse()
            .map_err(|_| "malformed arrival time")?;
        let duration: f64 = row[5].trim().parse().map_err(|_| "malformed duration")?;
        let arrival_ms = (arrival * 1000.0).round() as i64;
        let from = self.def.from.map_or(0, |f| f.0);
        self.in_window(arrival_ms)?;
        let max_per_task = self.def.max_gpus_per_task.unwrap_or(8).max(1);
        let mut shapes: Vec<u32> = Vec::new();
        for part in row[3].trim().split('+') {
            let g: u32 = part.trim().parse().map_err(|_| "malformed shape")?;
            let mut left = g;
            while left > max_per_task {
                shapes.push(max_per_task);
                left -= max_per_task;
            }
            if left > 0 {
                shapes.push(left);
            }
        }
        if shapes.is_empty() {
            return Err("zero GPUs");
        }
        // Per-GPU cpu and memory: cpu in millicores, everything else in whole units.
        let per_gpu: Vec<(String, i64)> = match &self.def.per_gpu {
            Some(r) => r
                .iter()
                .map(|(k, v)| {
                    let scale = if k == "cpu" { 1000 } else { 1 };
                    (k.clone(), parse_scaled(&v.0, scale).unwrap_or(0))
                })
                .collect(),
            None => vec![("cpu".into(), 8000), ("memory".into(), 64 << 30)],
        };
        let mut by_size: BTreeMap<u32, u32> = BTreeMap::new();
        for s in shapes {
            *by_size.entry(s).or_insert(0) += 1;
        }
        let duration_ms = (duration.round() as i64) * 1000;
        let tasks = by_size
            .into_iter()
            .map(|(gpus, replicas)| {
                let mut req: Vec<(String, String)> = per_gpu
                    .iter()
                    .map(|(k, v)| {
                        let total = v * i64::from(gpus);
                        let q = if k == "cpu" {
                            format!("{total}m")
                        } else {
                            total.to_string()
                        };
                        (k.clone(), q)
                    })
                    .collect();
                req.push(("nvidia.com/gpu".into(), gpus.to_string()));
                SimTask {
                    role: format!("gpu{gpus}"),
                    replicas,
                    min: None,
                    request: req,
                    duration_ms,
                    node_selector: BTreeMap::new(),
                    affinity: Vec::new(),
                    tolerations: Vec::new(),
                }
            })
            .collect();
        let prefix = if self.def.format == TraceFormat::Philly {
            "philly"
        } else {
            "crux"
        };
        Ok(SimJob {
            namespace: "trace".into(),
            name: format!("{prefix}-{id}"),
            queue: self.queue_for(id),
            submit_ms: arrival_ms - from,
            priority: 0,
            min_member: None,
            tasks,
            policy: JobPolicy::default(),
        })
    }

    /// Parses one openb pod row into a single-pod job.
    fn openb(&mut self, row: &[&str]) -> Result<SimJob, &'static str> {
        let get = |name: &str| self.col(row, name);
        let name = get("name").ok_or("malformed row (no name)")?;
        let cpu: i64 = get("cpu_milli")
            .and_then(|s| s.parse().ok())
            .ok_or("malformed cpu_milli")?;
        let mem: i64 = get("memory_mib")
            .and_then(|s| s.parse().ok())
            .ok_or("malformed memory_mib")?;
        let gpus: u32 = get("num_gpu")
            .and_then(|s| s.parse().ok())
            .ok_or("malformed num_gpu")?;
        let gpu_milli: u32 = get("gpu_milli").and_then(|s| s.parse().ok()).unwrap_or(0);
        let created: f64 = get("creation_time")
            .and_then(|s| s.parse().ok())
            .ok_or("malformed creation_time")?;
        let deleted: f64 = get("deletion_time")
            .and_then(|s| s.parse().ok())
            .ok_or("malformed deletion_time")?;
        let scheduled: f64 = match get("scheduled_time").filter(|s| !s.is_empty()) {
            Some(s) => s.parse().map_err(|_| "malformed scheduled_time")?,
            None => return Err("never scheduled in the trace (no scheduled_time)"),
        };
        let arrival_ms = (created * 1000.0).round() as i64;
        self.in_window(arrival_ms)?;
        let spec = get("gpu_spec").filter(|s| !s.is_empty());
        let fractional = gpus > 0 && gpu_milli > 0 && gpu_milli < 1000;
        if fractional && self.def.skip_fractional_gpus {
            return Err("fractional GPU (gpu_milli < 1000), skipped as asked");
        }
        let mut req = vec![
            ("cpu".to_string(), format!("{cpu}m")),
            ("memory".to_string(), format!("{mem}Mi")),
        ];
        if gpus > 0 {
            req.push(("nvidia.com/gpu".into(), gpus.to_string()));
        }
        let mut affinity = Vec::new();
        if let Some(spec) = spec {
            affinity.push(Requirement {
                key: tephra_api::well_known::resources::GPU_PRODUCT_LABEL.into(),
                op: SelectorOp::In,
                values: spec.split('|').map(str::to_string).collect(),
            });
        }
        if fractional {
            // A GPU-sharing pod takes one whole GPU (gpus is already 1 for these rows).
            self.fractional += 1;
        }
        let from = self.def.from.map_or(0, |f| f.0);
        let id: u64 = name
            .rsplit('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(self.emitted as u64);
        Ok(SimJob {
            namespace: "trace".into(),
            name,
            queue: self.queue_for(id),
            submit_ms: arrival_ms - from,
            priority: 0,
            min_member: None,
            tasks: vec![SimTask {
                role: "pod".into(),
                replicas: 1,
                min: None,
                request: req,
                duration_ms: (((deleted - scheduled).max(0.0)) * 1000.0).round() as i64,
                node_selector: BTreeMap::new(),
                affinity: if affinity.is_empty() {
                    Vec::new()
                } else {
                    vec![affinity]
                },
                tolerations: Vec::new(),
            }],
            policy: JobPolicy::default(),
        })
    }

    fn fill(&mut self) {
        while self.head.is_none() && !self.done {
            if self.def.limit.is_some_and(|l| self.emitted >= l) {
                self.done = true;
                break;
            }
            let Some(line) = self.lines.next() else {
                self.done = true;
                break;
            };
            let Ok(line) = line else {
                skip(&mut self.skipped, "unreadable line");
                continue;
            };
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let row: Vec<&str> = line.split(',').collect();
            let parsed = match self.def.format {
                TraceFormat::Philly | TraceFormat::Crux => self.rfold(&row),
                TraceFormat::AlibabaGpu2023 => self.openb(&row),
            };
            match parsed {
                Ok(job) => {
                    self.emitted += 1;
                    self.head = Some(job);
                }
                Err("after the window (until)") => {
                    // Traces are sorted by arrival: nothing later can be in the window.
                    skip(&mut self.skipped, "after the window (until)");
                    self.done = true;
                }
                Err(why) => skip(&mut self.skipped, why),
            }
        }
    }
}

impl JobSource for Trace {
    fn peek(&mut self) -> Option<i64> {
        self.fill();
        self.head.as_ref().map(|j| j.submit_ms)
    }

    fn next_job(&mut self) -> Option<SimJob> {
        self.fill();
        self.head.take()
    }

    fn skipped(&self) -> Skipped {
        self.skipped.clone()
    }

    fn notes(&self) -> Vec<String> {
        if self.def.format == TraceFormat::AlibabaGpu2023 && self.fractional > 0 {
            vec![format!(
                "{}: {} GPU-sharing pod(s) (gpu_milli < 1000) rounded up to one whole GPU",
                self.def.path, self.fractional
            )]
        } else if self.def.format != TraceFormat::AlibabaGpu2023 {
            vec![format!(
                "{}: shapes above {} GPUs per task split into tasks of at most {} GPUs",
                self.def.path,
                self.def.max_gpus_per_task.unwrap_or(8),
                self.def.max_gpus_per_task.unwrap_or(8)
            )]
        } else {
            Vec::new()
        }
    }
}

/// Reads Volcano Job manifests: each is admitted as the API server would (schema and CEL
/// rules), turned into a gang by the job controller's own planning function, and submitted at
/// its `tephra.io/sim-submit-at` annotation, its pods running for `tephra.io/sim-duration`.
fn manifests(s: &Scenario) -> Result<Explicit, ScenarioError> {
    use tephra_api::well_known::{SIM_DURATION, SIM_SUBMIT_AT};
    let err = |message: String| ScenarioError::Invalid {
        path: s.source.clone(),
        message,
    };
    let admission =
        tephra_api::admission::Admission::new().map_err(|e| err(format!("CRDs: {e}")))?;
    let mut jobs = Vec::new();
    for (i, rel) in s.workload.manifests.iter().enumerate() {
        let path = s.resolve(rel);
        let at = |d: usize| format!("workload.manifests[{i}] ({rel}) document {d}");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| err(format!("workload.manifests[{i}]: {}: {e}", path.display())))?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(&text)
            .map_err(|e| err(format!("workload.manifests[{i}] ({rel}): {e}")))?;
        for (d, doc) in docs.iter().enumerate().filter(|(_, d)| !d.is_null()) {
            admission
                .admit(doc)
                .map_err(|e| err(format!("{}: {e}", at(d))))?;
            let job: tephra_api::Job =
                serde_json::from_value(doc.clone()).map_err(|e| err(format!("{}: {e}", at(d))))?;
            let plan =
                tephra_controllers::job::plan(&job).map_err(|e| err(format!("{}: {e}", at(d))))?;
            let notes = job.metadata.annotations.clone().unwrap_or_default();
            let submit = match notes.get(SIM_SUBMIT_AT) {
                Some(v) => Dur::parse(v).map_err(|e| {
                    err(format!(
                        "{}: metadata.annotations[{SIM_SUBMIT_AT}]: {e}",
                        at(d)
                    ))
                })?,
                None => Dur(0),
            };
            let duration = notes
                .get(SIM_DURATION)
                .ok_or_else(|| {
                    err(format!(
                        "{}: metadata.annotations[{SIM_DURATION}]: required, e.g. \"2h\"",
                        at(d)
                    ))
                })
                .and_then(|v| {
                    Dur::parse(v).map_err(|e| {
                        err(format!(
                            "{}: metadata.annotations[{SIM_DURATION}]: {e}",
                            at(d)
                        ))
                    })
                })?;
            let priority = match &plan.priority_class {
                None => 0,
                Some(c) => *s.scheduler.priority_classes.get(c).ok_or_else(|| {
                    err(format!(
                        "{}: spec.priorityClassName: unknown class {c:?} (declare it under scheduler.priorityClasses)",
                        at(d)
                    ))
                })?,
            };
            let tasks = plan
                .tasks
                .iter()
                .map(|t| SimTask {
                    role: t.name.clone(),
                    replicas: t.replicas,
                    min: Some(t.min_available),
                    request: t
                        .requests
                        .iter()
                        .map(|(k, v)| (k.clone(), v.0.clone()))
                        .collect(),
                    duration_ms: duration.0,
                    node_selector: t.node_selector.clone(),
                    affinity: t
                        .affinity
                        .iter()
                        .map(|term| {
                            term.iter()
                                .filter_map(|(key, op, values)| {
                                    SelectorOp::parse(op).map(|op| Requirement {
                                        key: key.clone(),
                                        op,
                                        values: values.clone(),
                                    })
                                })
                                .collect()
                        })
                        .collect(),
                    tolerations: t
                        .tolerations
                        .iter()
                        .map(|tol| Toleration {
                            key: tol.key.clone().unwrap_or_default(),
                            exists: tol.operator.as_deref() == Some("Exists"),
                            value: tol.value.clone().unwrap_or_default(),
                            effect: tol.effect.as_deref().and_then(TaintEffect::parse),
                        })
                        .collect(),
                })
                .collect();
            jobs.push(SimJob {
                namespace: plan.namespace,
                name: plan.name,
                queue: plan.queue,
                submit_ms: submit.0,
                priority,
                min_member: Some(plan.min_member),
                tasks,
                policy: JobPolicy::default(),
            });
        }
    }
    jobs.sort_by_key(|j| j.submit_ms);
    Ok(Explicit {
        jobs: jobs.into_iter(),
        head: None,
    })
}

/// All sources of a scenario, merged in arrival order (ties: source order).
pub struct Merged {
    sources: Vec<Box<dyn JobSource>>,
    labels: Vec<String>,
}

impl Merged {
    /// Opens every source of the scenario.
    pub fn open(s: &Scenario) -> Result<Self, ScenarioError> {
        let classes = &s.scheduler.priority_classes;
        let mut sources: Vec<Box<dyn JobSource>> =
            vec![Box::new(explicit(&s.workload.jobs, classes))];
        let mut labels = vec!["jobs".to_string()];
        if !s.workload.manifests.is_empty() {
            sources.push(Box::new(manifests(s)?));
            labels.push("manifests".to_string());
        }
        for (i, g) in s.workload.generate.iter().enumerate() {
            let mut gen_src = Generator {
                def: g.clone(),
                rng: Rng::new(s.run.seed.wrapping_add(i as u64 * 7919)),
                index: 0,
                next_ms: g.start.0,
                classes: classes.clone(),
                source: i,
            };
            if matches!(g.arrival, Arrival::Poisson { .. }) {
                // The first Poisson arrival comes after one random gap, not at `start`.
                gen_src.advance();
            }
            sources.push(Box::new(gen_src));
            labels.push(format!("generate[{i}]"));
        }
        for (i, t) in s.workload.traces.iter().enumerate() {
            let path = s.resolve(&t.path);
            let trace =
                Trace::open(t, &path, s.run.seed).map_err(|message| ScenarioError::Invalid {
                    path: s.source.clone(),
                    message: format!("workload.traces[{i}].path: {message}"),
                })?;
            sources.push(Box::new(trace));
            labels.push(t.path.clone());
        }
        Ok(Self { sources, labels })
    }

    /// Arrival time of the next job.
    pub fn peek(&mut self) -> Option<i64> {
        self.sources.iter_mut().filter_map(|s| s.peek()).min()
    }

    /// The next job in arrival order.
    pub fn next_job(&mut self) -> Option<SimJob> {
        let mut best: Option<(i64, usize)> = None;
        for (i, s) in self.sources.iter_mut().enumerate() {
            if let Some(t) = s.peek()
                && best.is_none_or(|(bt, _)| t < bt)
            {
                best = Some((t, i));
            }
        }
        let (_, i) = best?;
        self.sources[i].next_job()
    }

    /// Rows skipped by trace readers, by source and reason.
    pub fn skipped(&self) -> BTreeMap<String, Skipped> {
        self.sources
            .iter()
            .zip(&self.labels)
            .map(|(s, l)| (l.clone(), s.skipped()))
            .filter(|(_, s)| !s.is_empty())
            .collect()
    }

    /// Notes from the sources.
    pub fn notes(&self) -> Vec<String> {
        self.sources.iter().flat_map(|s| s.notes()).collect()
    }
}

/// Durations in milliseconds from a [`Dur`].
pub fn ms(d: Dur) -> i64 {
    d.0
}
