//! CronJobs and JobFlows in the simulator, run by their controllers' own steps
//! ([`tephra_controllers::cronjob::sync`], [`tephra_controllers::jobflow::sync`]) on the virtual
//! clock (its zero is the Unix epoch, so `0 2 * * *` fires at 02:00 of each simulated day): a
//! CronJob is looked at at each of its scheduled times, a JobFlow when it is submitted
//! (`tephra.io/sim-submit-at`) and whenever one of its Jobs ends. The Jobs they make are
//! submitted as the manifests' own Volcano Jobs are, timed by the template's
//! `tephra.io/sim-duration`; a Job they delete (replaced, past a history limit, a succeeded
//! flow's under `jobRetainPolicy: delete`) leaves the simulation. The report's notes say how
//! many Jobs each made and where each flow ended. What the controllers keep is
//! `controllers.rs`; their steps, which act on the simulation, are here.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra_api::Job;
use tephra_api::cronjob::CronJob;
use tephra_api::flow::JobFlow;

use crate::agenda::Ev;
use crate::error::SimError;
use crate::record::Record;
use crate::state::Sim;
use crate::workload::manifests::template_annotations;

pub(crate) mod controllers;

use controllers::at;

fn key_of(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or("default"),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}

fn owned_by(made: &BTreeMap<String, Job>, uid: &str) -> Vec<Job> {
    made.values()
        .filter(|j| {
            j.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true))
        })
        .cloned()
        .collect()
}

impl Sim {
    /// The Jobs made and still in flight, as the job controller last wrote them; those that
    /// ended, as they ended. Returns the JobFlows to look at now (a Job of theirs ended).
    fn refresh_made(&mut self) -> Vec<usize> {
        let ended = std::mem::take(&mut self.flight.ended);
        let mut flows = Vec::new();
        for job in ended {
            let uid = job
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true) && r.kind == "JobFlow")
                .map(|r| r.uid.clone());
            if let Some(uid) = uid
                && let Some(i) = self
                    .scheduled
                    .docs
                    .flows
                    .iter()
                    .position(|(_, f, _)| f.metadata.uid.as_deref() == Some(uid.as_str()))
                && !flows.contains(&i)
            {
                flows.push(i);
            }
            let key = key_of(&job);
            if self.scheduled.made.contains_key(&key) {
                self.scheduled.made.insert(key, job);
            }
        }
        for (key, job) in self.scheduled.made.iter_mut() {
            if let Some(vc) = self.flight.vcjobs.get(key) {
                *job = vc.job.clone();
            }
        }
        flows
    }

    /// After any event: the flows whose Jobs ended are looked at now.
    pub(crate) fn wake_flows(&mut self) {
        if self.flight.ended.is_empty() {
            return;
        }
        for i in self.refresh_made() {
            self.ctx.push(self.ctx.now, Ev::Flow(i));
        }
    }

    /// Deletes a Job made by a CronJob or JobFlow: one still in flight leaves the simulation.
    fn delete_made(&mut self, ns: &str, name: &str) -> Result<(), SimError> {
        let key = format!("{ns}/{name}");
        self.scheduled.made.remove(&key);
        if self.flight.jobs.contains_key(&key) {
            self.flight.retire(&mut self.ctx, &key, false)?;
            self.flight.vcjobs.remove(&key);
            self.ctx
                .explain(&key, || "deleted by its CronJob".to_string());
            self.ctx.mark_dirty();
        }
        Ok(())
    }

    /// Submits a Job a CronJob or JobFlow made.
    fn submit_made(
        &mut self,
        job: Job,
        origin: &str,
        template: &BTreeMap<String, String>,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let mut job = job;
        let key = key_of(&job);
        job.metadata.uid = Some(format!("sim-{key}"));
        job.metadata.creation_timestamp = Some(Time(at(self.ctx.now)));
        let sj = self
            .scheduled
            .docs
            .sim_job(&self.scenario, job.clone(), self.ctx.now, origin, template)
            .map_err(|message| SimError::Build {
                source_name: self.scenario.source.clone(),
                message,
            })?;
        self.scheduled.made.insert(key, job);
        self.submit(sj, out)
    }

    /// The CronJob controller's step for CronJob `i`, and its next look on the agenda.
    pub(crate) fn cron(&mut self, i: usize, out: &mut dyn FnMut(&Record)) -> Result<(), SimError> {
        self.refresh_made();
        let Some((origin, cron)) = self.scheduled.docs.crons.get(i).cloned() else {
            return Ok(());
        };
        let uid = cron.metadata.uid.clone().unwrap_or_default();
        let ns = cron.metadata.namespace.clone().unwrap_or_default();
        let jobs = owned_by(&self.scheduled.made, &uid);
        let plan = tephra_controllers::cronjob::sync(&cron, &jobs, at(self.ctx.now));
        for name in &plan.delete {
            self.delete_made(&ns, name)?;
        }
        let mut status = plan.status.clone();
        if let Some(job) = plan.create {
            let template = cron
                .spec
                .job_template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone())
                .unwrap_or_default();
            let made_uid = format!("sim-{}", key_of(&job));
            let name = job.metadata.name.clone();
            self.submit_made(job, &origin, &template, out)?;
            self.scheduled.cron_runs[i] += 1;
            if let Some(s) = status.as_mut() {
                for r in &mut s.active {
                    if r.name == name && r.uid.is_none() {
                        r.uid = Some(made_uid.clone());
                    }
                }
            }
        }
        if let Some(s) = status {
            set_cron_status(&mut self.scheduled.docs.crons[i].1, s);
        }
        if let Some(next) = plan.requeue_after {
            let ms = i64::try_from(next.as_millis()).unwrap_or(i64::MAX).max(1);
            self.ctx.push(self.ctx.now.saturating_add(ms), Ev::Cron(i));
        }
        Ok(())
    }

    /// The JobFlow controller's step for JobFlow `i`.
    pub(crate) fn flow(&mut self, i: usize, out: &mut dyn FnMut(&Record)) -> Result<(), SimError> {
        self.refresh_made();
        let Some((origin, flow, _)) = self.scheduled.docs.flows.get(i).cloned() else {
            return Ok(());
        };
        let uid = flow.metadata.uid.clone().unwrap_or_default();
        let ns = flow.metadata.namespace.clone().unwrap_or_default();
        let jobs = owned_by(&self.scheduled.made, &uid);
        let templates: Vec<_> = self
            .scheduled
            .docs
            .templates
            .iter()
            .filter(|t| t.metadata.namespace.as_deref().unwrap_or("default") == ns)
            .cloned()
            .collect();
        let plan = tephra_controllers::jobflow::sync(&flow, &templates, &jobs, at(self.ctx.now));
        for name in &plan.delete {
            self.delete_made(&ns, name)?;
        }
        for job in plan.create {
            let step = job
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(tephra_api::flow::CREATED_BY_TEMPLATE))
                .and_then(|v| v.split_once('.').map(|(_, n)| n.to_string()))
                .unwrap_or_default();
            let template = templates
                .iter()
                .find(|t| t.metadata.name.as_deref() == Some(step.as_str()))
                .map(template_annotations)
                .unwrap_or_default();
            self.submit_made(job, &origin, &template, out)?;
            self.scheduled.flow_runs[i] += 1;
        }
        let status_changed = plan.status.is_some();
        if let Some(s) = plan.status {
            set_flow_status(&mut self.scheduled.docs.flows[i].1, s);
        }
        // A succeeded flow deletes its Jobs on the pass after (as on a cluster, where the
        // status write brings it back).
        if status_changed {
            self.ctx.push(self.ctx.now, Ev::Flow(i));
        }
        Ok(())
    }
}

fn set_cron_status(c: &mut CronJob, s: tephra_api::cronjob::CronJobStatus) {
    c.status = Some(s);
}

fn set_flow_status(f: &mut JobFlow, s: tephra_api::flow::JobFlowStatus) {
    f.status = Some(s);
}
