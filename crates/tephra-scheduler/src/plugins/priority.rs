//! `priority`: higher PriorityClass value first, for jobs and for tasks within a job. A
//! Pending job is admitted whatever the fleet's fill when lower-priority work of its queue
//! holds enough to make room for it by preemption, less what jobs admitted earlier in the
//! session already count on.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{Entitlement, JobOrder, Plugin, SessionEvents, TaskOrder};
use crate::framework::view::View;
use crate::model::Id;
use crate::resources::Resources;

/// The `priority` plugin.
pub struct Priority {
    /// Per queue: (job priority, resources its placed tasks hold), lowest priority first.
    /// Built on first use: a session with nothing to admit never walks the running pods.
    held: std::cell::OnceCell<BTreeMap<String, Vec<(i32, Resources)>>>,
    /// Per queue: the minResources of the jobs admitted this session, which may claim the
    /// same lower-priority work.
    granted: BTreeMap<String, Resources>,
}

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Priority {
        held: std::cell::OnceCell::new(),
        granted: BTreeMap::new(),
    }))
}

/// What each queue's placed jobs hold, by job priority, lowest first.
fn held_by_queue(view: &View) -> BTreeMap<String, Vec<(i32, Resources)>> {
    let mut out: BTreeMap<String, Vec<(i32, Resources)>> = BTreeMap::new();
    for (id, job) in view.snap.jobs.iter() {
        let Some(g) = &job.group else { continue };
        // Nothing ready, nothing held that counts: a backlog costs no walk.
        if view.state.tally(job, id).ready <= 0 {
            continue;
        }
        let mut held = Resources::ZERO;
        for &t in &job.tasks {
            let s = view.status(t);
            if s.holds_node()
                && s != crate::model::TaskStatus::Releasing
                && let Some(task) = view.task(t)
            {
                held.add(&task.spec.shape.request);
            }
        }
        if !held.is_zero() {
            out.entry(g.queue.clone())
                .or_default()
                .push((view.job_priority(id), held));
        }
    }
    for list in out.values_mut() {
        list.sort_by_key(|(p, _)| *p);
    }
    out
}

impl Priority {
    /// What work of `queue` below `priority` holds, less what this session's admissions were
    /// granted of it: the room a job at `priority` could preempt its way into.
    fn lower(&self, view: &View, queue: &str, priority: i32) -> Resources {
        let mut lower = Resources::ZERO;
        let by_queue = self.held.get_or_init(|| held_by_queue(view));
        for (prio, held) in by_queue.get(queue).map(Vec::as_slice).unwrap_or_default() {
            if *prio >= priority {
                break;
            }
            lower.add(held);
        }
        if let Some(granted) = self.granted.get(queue) {
            lower = lower.minus(granted);
        }
        lower
    }
}

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn job_order(&self) -> Option<&dyn JobOrder> {
        Some(self)
    }

    fn task_order(&self) -> Option<&dyn TaskOrder> {
        Some(self)
    }

    fn entitlement(&self) -> Option<&dyn Entitlement> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Priority {
    fn job_enqueued(&mut self, view: &View, job: Id) {
        if let Some(j) = view.job(job)
            && let Some(min) = j.group.as_ref().and_then(|g| g.min_resources)
        {
            self.granted
                .entry(j.queue().to_string())
                .or_default()
                .add(&min);
        }
    }

    fn job_dequeued(&mut self, view: &View, job: Id) {
        if let Some(j) = view.job(job)
            && let Some(min) = j.group.as_ref().and_then(|g| g.min_resources)
            && let Some(g) = self.granted.get_mut(j.queue())
        {
            g.sub(&min);
        }
    }
}

impl Entitlement for Priority {
    fn job_entitled(&self, view: &View, job: Id) -> bool {
        // A job that could preempt its way in is admitted: lower-priority work of its queue
        // holds at least what it needs to start.
        let Some(j) = view.job(job) else { return false };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return false;
        };
        min.fits_in(&self.lower(view, j.queue(), view.job_priority(job)))
            .is_ok()
    }

    fn headroom(&self, view: &View, queue: &str, priority: i32) -> Option<Resources> {
        Some(self.lower(view, queue, priority))
    }
}

impl JobOrder for Priority {
    fn compare(&self, view: &View, a: Id, b: Id) -> Ordering {
        view.job_priority(b).cmp(&view.job_priority(a))
    }

    /// Jobs of one priority tie.
    fn ties_waiting(&self) -> bool {
        true
    }
}

impl TaskOrder for Priority {
    fn compare(&self, view: &View, a: Id, b: Id) -> Ordering {
        view.task_priority(b).cmp(&view.task_priority(a))
    }
}
