//! Trace replays (`workload.traces`): RFold rows (Philly, Crux), each one gang, and openb pod
//! rows, each a single-pod job, read line by line.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use tephra_scheduler::model::{JobPolicy, Requirement, SelectorOp};
use tephra_scheduler::quantity::parse_scaled;

use super::job::{JobSource, SimJob, SimTask, Skipped, weighted};
use crate::rng::Rng;
use crate::scenario::{TraceDef, TraceFormat};

/// A CSV trace read line by line.
pub struct Trace {
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
    /// Opens a trace; its header is read at once.
    pub fn open(def: &TraceDef, path: &Path, seed: u64) -> Result<Self, String> {
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
                    request: req.into(),
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
            topology: None,
            plan: None,
            volcano: None,
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
                request: req.into(),
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
            topology: None,
            plan: None,
            volcano: None,
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
