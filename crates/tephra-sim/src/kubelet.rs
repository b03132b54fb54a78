//! The simulated kubelets: a bound pod starts `run.podStartDelay` later and runs for its
//! duration; a finished job leaves the cache (memory follows jobs in flight); a pod that stops
//! holding its node goes back to Pending, and a gang with nothing left placed is re-queued.
//! A Volcano Job's pods report to the job controller instead ([`crate::jobs`]): it decides
//! when the Job is done, and an evicted pod is deleted, as on a cluster.

use tephra_scheduler::cache::Event;
use tephra_scheduler::model::TaskStatus;

use crate::agenda::Ev;
use crate::error::SimError;
use crate::jobs::vcjob::PodChange;
use crate::record::Record;
use crate::state::{PodState, Sim};

impl Sim {
    pub(crate) fn start(
        &mut self,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let now = self.ctx.now;
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
        self.ctx
            .push(finish, Ev::Finish(pod.to_string(), generation));
        if let Some(j) = self.flight.jobs.get_mut(&job_key) {
            j.started += 1;
            if !j.waited && j.started >= j.min {
                j.waited = true;
                self.ctx
                    .stats
                    .waited(&j.queue, (self.ctx.now - j.submit_ms) as f64 / 1000.0);
            }
            out(&Record::pod(
                "start",
                self.ctx.now,
                &job_key,
                &j.queue,
                pod,
                &node,
                &request,
                None,
            ));
        }
        if self.is_volcano(&job_key) {
            self.pod_changed(pod, PodChange::Started, out)?;
        }
        self.failover_job_changed(&job_key, out)
    }

    pub(crate) fn finish(
        &mut self,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let now = self.ctx.now;
        let Some(p) = self.current_pod(pod, generation, PodState::Running) else {
            return Ok(());
        };
        p.state = PodState::Done;
        let job_key = p.job.clone();
        let node = p.node.clone().unwrap_or_default();
        let (gpus, cpu, ran) = (p.gpus, p.cpu_milli, now - p.started_ms);
        let request = p.request.clone();
        let code = p.exit_code;
        self.pod_event(
            pod,
            if code == 0 {
                TaskStatus::Succeeded
            } else {
                TaskStatus::Failed
            },
        )?;
        self.ctx.checker.released(&job_key, pod, true);
        let Some(j) = self.flight.jobs.get_mut(&job_key) else {
            return Ok(());
        };
        let queue = j.queue.clone();
        self.ctx
            .stats
            .released(&node.0, &queue, gpus, cpu, self.ctx.now);
        self.ctx.stats.gpu_time(&queue, gpus, ran);
        out(&Record::pod(
            if code == 0 { "finish" } else { "fail" },
            self.ctx.now,
            &job_key,
            &queue,
            pod,
            &node,
            &request,
            (code != 0).then(|| format!("exit code {code}")),
        ));
        self.failover_job_changed(&job_key, out)?;
        if self.is_volcano(&job_key) {
            self.ctx.mark_dirty();
            return self.pod_changed(pod, PodChange::Finished(code), out);
        }
        let Some(j) = self.flight.jobs.get_mut(&job_key) else {
            return Ok(());
        };
        j.done += 1;
        if j.done as usize == j.pods.len() {
            self.complete(&job_key)?;
        }
        self.ctx.mark_dirty();
        Ok(())
    }

    /// A finished job leaves the cache and the engine: memory follows jobs in flight.
    pub(crate) fn complete(&mut self, key: &str) -> Result<(), SimError> {
        self.ctx.explain(key, || "completed".to_string());
        self.retire(key, true)
    }

    /// A job leaves the cache and the engine, counted as completed or failed; a pod still
    /// holding a node releases it.
    pub(crate) fn retire(&mut self, key: &str, completed: bool) -> Result<(), SimError> {
        let Some(j) = self.flight.jobs.remove(key) else {
            return Ok(());
        };
        for pod in &j.pods {
            if let Some(p) = self.flight.pods.remove(pod)
                && matches!(
                    p.state,
                    PodState::Bound | PodState::Running | PodState::Releasing
                )
            {
                let node = p.node.clone().unwrap_or_default();
                self.ctx.checker.released(key, pod, false);
                self.ctx
                    .stats
                    .released(&node.0, &j.queue, p.gpus, p.cpu_milli, self.ctx.now);
            }
            let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
            self.ctx.apply(Event::PodDelete {
                namespace: ns.into(),
                name: name.into(),
            })?;
        }
        self.ctx.apply(Event::PodGroupDelete {
            namespace: j.group.namespace.clone(),
            name: j.group.name.clone(),
        })?;
        self.ctx.checker.job_done(key);
        if completed {
            self.ctx.stats.completed(&j.queue);
        } else {
            self.ctx.stats.failed(&j.queue);
        }
        Ok(())
    }

    /// A pod stops holding its node and goes back to Pending; a gang with nothing left on a
    /// node is Inqueue again.
    pub(crate) fn release_pod(
        &mut self,
        pod: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if self
            .flight
            .pods
            .get(pod)
            .is_some_and(|p| self.is_volcano(&p.job))
        {
            return self.pod_gone(pod, out);
        }
        let now = self.ctx.now;
        let Some(p) = self.flight.pods.get_mut(pod) else {
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
            .flight
            .jobs
            .get(&job_key)
            .map(|j| j.queue.clone())
            .unwrap_or_default();
        self.ctx.checker.released(&job_key, pod, false);
        self.ctx.stats.released(&node.0, &queue, gpus, cpu, now);
        if was_running {
            self.ctx.stats.gpu_time(&queue, gpus, ran);
            if let Some(j) = self.flight.jobs.get_mut(&job_key) {
                j.started = j.started.saturating_sub(1);
            }
        }
        self.pod_event(pod, TaskStatus::Pending)?;
        let placed = self.flight.jobs.get(&job_key).map_or(0, |j| {
            j.pods
                .iter()
                .filter(|p| {
                    self.flight.pods.get(*p).is_some_and(|p| {
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
        self.ctx.mark_dirty();
        self.failover_job_changed(&job_key, out)
    }
}
