//! The simulated kubelets: a bound pod starts `run.podStartDelay` later and runs for its
//! duration; a finished job leaves the cache (memory follows jobs in flight); a pod that stops
//! holding its node goes back to Pending, and a gang with nothing left placed is re-queued.
//! A Volcano Job's pods report to the job controller instead ([`crate::jobs`]): it decides
//! when the Job is done, and an evicted pod is deleted, as on a cluster.
//!
//! These are methods of the jobs and pods in flight ([`InFlight`]); each returns the job it
//! touched, for the coordinator to tell failover.

use tephra_scheduler::cache::Event;
use tephra_scheduler::model::TaskStatus;

use crate::agenda::Ev;
use crate::ctx::Ctx;
use crate::error::SimError;
use crate::jobs::vcjob::PodChange;
use crate::record::Record;
use crate::state::{InFlight, PodState};

impl InFlight {
    /// A bound pod starts, if the event is still current: returns its job.
    pub(crate) fn start(
        &mut self,
        ctx: &mut Ctx,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<Option<String>, SimError> {
        let now = ctx.now;
        let Some(p) = self.current_pod(pod, generation, PodState::Bound) else {
            return Ok(None);
        };
        p.state = PodState::Running;
        p.started_ms = now;
        let finish = now + p.duration_ms;
        let job_key = p.job.clone();
        let node = p.node.clone().unwrap_or_default();
        let request = p.request.clone();
        let shared_gpus = p.grants.is_some();
        self.pod_event(ctx, pod, TaskStatus::Running)?;
        // The vGPU device plugin allocated its GPUs as it started: the node's lock goes.
        if shared_gpus {
            ctx.cache
                .set_gpu_lock(&node.0, &node.1, None)
                .map_err(crate::error::build_err(&ctx.source))?;
        }
        ctx.push(finish, Ev::Finish(pod.to_string(), generation));
        if let Some(j) = self.jobs.get_mut(&job_key) {
            j.started += 1;
            if !j.waited && j.started >= j.min {
                j.waited = true;
                if let Some(p) = ctx.eta.as_mut() {
                    p.started(&job_key, ctx.now);
                }
                ctx.stats
                    .waited(&j.queue, (ctx.now - j.submit_ms) as f64 / 1000.0);
                let nodes: Vec<(String, String)> = j
                    .pods
                    .iter()
                    .filter_map(|p| self.pods.get(p))
                    .filter(|p| matches!(p.state, PodState::Running | PodState::Bound))
                    .filter_map(|p| p.node.clone())
                    .collect();
                let one = crate::report::stats::in_one_domain(ctx.cache.world(), &nodes);
                ctx.stats.gang_domain(one);
            }
            out(&Record::pod(
                "start", ctx.now, &job_key, &j.queue, pod, &node, &request, None,
            ));
        }
        if self.is_volcano(&job_key) {
            self.pod_changed(ctx, pod, PodChange::Started, out)?;
        }
        Ok(Some(job_key))
    }

    /// A running pod finishes, if the event is still current: returns its job and exit code.
    pub(crate) fn finish(
        &mut self,
        ctx: &mut Ctx,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<Option<(String, i32)>, SimError> {
        let now = ctx.now;
        let Some(p) = self.current_pod(pod, generation, PodState::Running) else {
            return Ok(None);
        };
        p.state = PodState::Done;
        let job_key = p.job.clone();
        let node = p.node.clone().unwrap_or_default();
        let (gpus, cpu, ran) = (p.gpus, p.cpu_milli, now - p.started_ms);
        let request = p.request.clone();
        let code = p.exit_code;
        self.pod_event(
            ctx,
            pod,
            if code == 0 {
                TaskStatus::Succeeded
            } else {
                TaskStatus::Failed
            },
        )?;
        ctx.checker.released(&job_key, pod, true);
        let Some(j) = self.jobs.get_mut(&job_key) else {
            return Ok(None);
        };
        let queue = j.queue.clone();
        ctx.stats.released(&node.0, &queue, gpus, cpu, ctx.now);
        ctx.stats.gpu_time(&queue, gpus, ran);
        out(&Record::pod(
            if code == 0 { "finish" } else { "fail" },
            ctx.now,
            &job_key,
            &queue,
            pod,
            &node,
            &request,
            (code != 0).then(|| format!("exit code {code}")),
        ));
        Ok(Some((job_key, code)))
    }

    /// After a pod of `job_key` finished with `code`: a Volcano Job's controller looks again;
    /// any other job completes once all its pods are done.
    pub(crate) fn finished(
        &mut self,
        ctx: &mut Ctx,
        pod: &str,
        job_key: &str,
        code: i32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if self.is_volcano(job_key) {
            ctx.mark_dirty();
            return self.pod_changed(ctx, pod, PodChange::Finished(code), out);
        }
        let Some(j) = self.jobs.get_mut(job_key) else {
            return Ok(());
        };
        j.done += 1;
        if j.done as usize == j.pods.len() {
            self.complete(ctx, job_key)?;
        }
        ctx.mark_dirty();
        Ok(())
    }

    /// A finished job leaves the cache and the engine: memory follows jobs in flight.
    pub(crate) fn complete(&mut self, ctx: &mut Ctx, key: &str) -> Result<(), SimError> {
        ctx.explain(key, || "completed".to_string());
        self.retire(ctx, key, true)
    }

    /// A job leaves the cache and the engine, counted as completed or failed; a pod still
    /// holding a node releases it.
    pub(crate) fn retire(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        completed: bool,
    ) -> Result<(), SimError> {
        let Some(j) = self.jobs.remove(key) else {
            return Ok(());
        };
        for pod in &j.pods {
            if let Some(p) = self.pods.remove(pod)
                && matches!(
                    p.state,
                    PodState::Bound | PodState::Running | PodState::Releasing
                )
            {
                let node = p.node.clone().unwrap_or_default();
                ctx.checker.released(key, pod, false);
                ctx.stats
                    .released(&node.0, &j.queue, p.gpus, p.cpu_milli, ctx.now);
            }
            let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
            ctx.apply(Event::PodDelete {
                namespace: ns.into(),
                name: name.into(),
            })?;
        }
        ctx.apply(Event::PodGroupDelete {
            namespace: j.group.namespace.clone(),
            name: j.group.name.clone(),
        })?;
        ctx.checker.job_done(key);
        if completed {
            ctx.stats.completed(&j.queue);
        } else {
            ctx.stats.failed(&j.queue);
        }
        Ok(())
    }

    /// A pod stops holding its node and goes back to Pending; a gang with nothing left on a
    /// node is Inqueue again. Returns its job. (A Volcano Job's pod is deleted instead: see
    /// [`crate::jobs`].)
    pub(crate) fn release_pod(
        &mut self,
        ctx: &mut Ctx,
        pod: &str,
    ) -> Result<Option<String>, SimError> {
        let now = ctx.now;
        let Some(p) = self.pods.get_mut(pod) else {
            return Ok(None);
        };
        let node = p.node.take().unwrap_or_default();
        p.grants = None;
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
        ctx.checker.released(&job_key, pod, false);
        ctx.stats.released(&node.0, &queue, gpus, cpu, now);
        if was_running {
            ctx.stats.gpu_time(&queue, gpus, ran);
            if let Some(j) = self.jobs.get_mut(&job_key) {
                j.started = j.started.saturating_sub(1);
            }
        }
        self.pod_event(ctx, pod, TaskStatus::Pending)?;
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
            self.requeue_group(ctx, &job_key)?;
        }
        ctx.mark_dirty();
        Ok(Some(job_key))
    }
}
