//! Job sources: explicit jobs, synthetic arrivals, trace replays and Volcano Job manifests,
//! merged in arrival order and read lazily, so memory grows with jobs in flight rather than
//! with jobs seen.

pub mod explicit;
pub mod generate;
pub mod job;
pub mod manifests;
pub mod trace;

use std::collections::BTreeMap;

pub use job::{JobSource, Request, SimJob, SimTask, Skipped, effect, policy};

use crate::scenario::{Dur, Scenario, ScenarioError};
use explicit::explicit;
use generate::Generator;
use manifests::manifests;
use trace::Trace;

/// All sources of a scenario, merged in arrival order (ties: source order).
pub struct Merged {
    sources: Vec<Box<dyn JobSource>>,
    labels: Vec<String>,
    /// Queue documents among the manifests, to create before anything runs.
    pub queues: Vec<tephra_api::Queue>,
    /// PriorityClass documents among the manifests.
    pub classes: BTreeMap<String, i32>,
    /// CronJobs, JobFlows and JobTemplates among the manifests.
    pub scheduled: manifests::Scheduled,
}

impl Merged {
    /// Opens every source of the scenario.
    pub fn open(s: &Scenario) -> Result<Self, ScenarioError> {
        let classes = &s.scheduler.priority_classes;
        let mut sources: Vec<Box<dyn JobSource>> =
            vec![Box::new(explicit(&s.workload.jobs, classes))];
        let mut labels = vec!["jobs".to_string()];
        let (mut queues, mut manifest_classes) = (Vec::new(), BTreeMap::new());
        let mut scheduled = manifests::Scheduled::default();
        if !s.workload.manifests.is_empty() {
            let m = manifests(s)?;
            sources.push(Box::new(m.jobs));
            labels.push("manifests".to_string());
            queues = m.queues;
            manifest_classes = m.classes;
            scheduled = m.scheduled;
        }
        for (i, g) in s.workload.generate.iter().enumerate() {
            let seed = s.run.seed.wrapping_add(i as u64 * 7919);
            sources.push(Box::new(Generator::new(g, seed, classes, i)));
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
        Ok(Self {
            sources,
            labels,
            queues,
            classes: manifest_classes,
            scheduled,
        })
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
