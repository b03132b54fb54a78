//! The JobFlow controller's adapter: watches Volcano's JobFlows, the JobTemplates they make
//! Jobs from and the Jobs they own, and runs [`tephra_controllers::jobflow::sync`] whenever a
//! JobFlow, one of its Jobs or a template of its namespace changes; then carries the plan out:
//! the Jobs created (each once: one made here stands in for the cache until the cache holds
//! it), those of a succeeded flow deleted under `jobRetainPolicy: delete`, the status written,
//! the Events recorded (a lasting problem once). As Volcano's JobTemplate controller does, it
//! also keeps each template's `status.jobDependsOnList`: the Jobs made from it. It runs on
//! kube-runtime's `Controller`, one pass at a time, while this replica leads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tephra_api::Job;
use tephra_api::flow::{JobFlow, JobTemplate};
use tephra_controllers::jobflow::{CREATED_BY_TEMPLATE, FlowPlan, object_string, sync};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::events::{EventFor, record};
use crate::gone::{is_conflict, is_gone};
use crate::leader::Leadership;
use crate::owned_jobs::{Made, Told, controlled_by};
use crate::reconciler;

/// How the JobFlow controller runs.
#[derive(Clone, Debug)]
pub struct JobFlowControllerOptions {
    /// This replica's name, on the Events it records.
    pub identity: String,
    /// How often every JobFlow is looked at even if nothing changed.
    pub resync: Duration,
    /// Failed passes, by reason (`tephra_controller_errors_total`).
    pub errors: reconciler::ErrorCounter,
    /// The time a Job's history entries are stamped with.
    pub clock: Clock,
    /// Whether the templates' `status.jobDependsOnList` is kept (Volcano's
    /// `jobtemplate-controller`).
    pub template_status: bool,
}

impl Default for JobFlowControllerOptions {
    fn default() -> Self {
        Self {
            identity: "tephra-controller-manager".into(),
            resync: Duration::from_secs(30),
            errors: reconciler::ErrorCounter::default(),
            clock: Clock::system(),
            template_status: true,
        }
    }
}

/// The controller's name, in logs and `tephra_controller_errors_total`.
const NAME: &str = "jobflow";

type Key = (String, String);

/// Problems told once while they last.
const TOLD_ONCE: [&str; 4] = [
    "TemplateNotFound",
    "ProbeNotEvaluated",
    "DependencyCycle",
    "InvalidPatch",
];

/// Starts the JobFlow controller. It writes only while `leadership` leads.
pub fn start(
    client: Client,
    options: JobFlowControllerOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    vec![tokio::spawn(reconciler::while_leading(
        leadership,
        move |lost| run(client.clone(), options.clone(), lost),
    ))]
}

/// One term as leader: a kube-runtime `Controller` over JobFlows, triggered by them, the Jobs
/// they own and the JobTemplates of their namespaces, one pass at a time, until `lost`.
async fn run(client: Client, options: JobFlowControllerOptions, lost: reconciler::Lost) {
    let (jobs, jobs_w) = reflector::store();
    let (templates, templates_w) = reflector::store();
    let all = watcher::Config::default;
    let jobs_s = reconciler::watched(&client, jobs_w, all());
    let templates_s = reconciler::watched(&client, templates_w, all());
    let controller = Controller::new(Api::<JobFlow>::all(client.clone()), all())
        .trigger_backoff(reconciler::TriggerBackoff)
        .with_config(controller::Config::default().concurrency(1));
    let flows = controller.store();
    let ctx = Arc::new(FlowPasses {
        flows: flows.clone(),
        client,
        options,
        jobs,
        templates,
        written: Mutex::new(HashMap::new()),
        made: Made::default(),
        told: Told::default(),
        failures: reconciler::Failures::default(),
    });
    // A template names the flows of its namespace that make a Job from it.
    let users = move |t: JobTemplate| {
        let ns = t.namespace();
        let name = t.name_any();
        flows
            .state()
            .into_iter()
            .filter(|f| f.namespace() == ns && f.spec.flows.iter().any(|s| s.name == name))
            .map(|f| ObjectRef::from_obj(&*f))
            .collect::<Vec<_>>()
    };
    controller
        .owns_stream(jobs_s)
        .watches_stream(templates_s, users)
        .graceful_shutdown_on(lost)
        .run(pass, failed, ctx)
        .for_each(|_| async {})
        .await;
}

fn key(f: &JobFlow) -> Option<Key> {
    Some((f.namespace()?, f.name_any()))
}

/// One pass over a JobFlow; looked at again after the resync period.
async fn pass(flow: Arc<JobFlow>, w: Arc<FlowPasses>) -> Result<ControllerAction, PassError> {
    let Some(key) = key(&flow) else {
        return Ok(ControllerAction::await_change());
    };
    // Nothing is decided before the Jobs and templates are listed: a flow whose Jobs are not
    // known yet would make them again.
    if w.jobs.wait_until_ready().now_or_never().is_none()
        || w.templates.wait_until_ready().now_or_never().is_none()
    {
        return Ok(ControllerAction::requeue(Duration::from_millis(100)));
    }
    w.pass(&key).await?;
    w.failures.succeeded(&key);
    Ok(ControllerAction::requeue(w.options.resync))
}

/// A pass failed: counted by reason, and tried again after the backoff its failures earn.
fn failed(flow: Arc<JobFlow>, e: &PassError, w: Arc<FlowPasses>) -> ControllerAction {
    let key = key(&flow).unwrap_or_default();
    w.options
        .errors
        .inc(NAME, reconciler::api_reason(&e.source));
    let wait = w.failures.failed(key.clone());
    tracing::warn!(controller = NAME, namespace = %key.0, jobflow = %key.1, error = %e,
        retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        "pass failed; retrying");
    ControllerAction::requeue(wait)
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {}", crate::brief::kube(.source))]
pub struct PassError {
    what: String,
    source: kube::Error,
}

/// What the JobFlows, their templates and Jobs look like to the passes.
struct FlowPasses {
    client: Client,
    options: JobFlowControllerOptions,
    flows: Store<JobFlow>,
    jobs: Store<Job>,
    templates: Store<JobTemplate>,
    /// The JobFlow as the controller last wrote it, for when the cache has not caught up.
    written: Mutex<HashMap<Key, Arc<JobFlow>>>,
    /// The Jobs this replica made, until the cache holds them.
    made: Made<Key>,
    /// The lasting warnings told of each JobFlow.
    told: Told<Key>,
    /// Each JobFlow's failed passes in a row.
    failures: reconciler::Failures<Key>,
}

fn rv(f: &JobFlow) -> Option<u64> {
    f.metadata.resource_version.as_deref()?.parse().ok()
}

impl FlowPasses {
    /// The JobFlow from the cache, or as last written when the cache is older.
    fn get(&self, key: &Key) -> Option<Arc<JobFlow>> {
        let cached = self.flows.get(&ObjectRef::new(&key.1).within(&key.0));
        let written = self.written.lock().ok().and_then(|w| w.get(key).cloned());
        match (cached, written) {
            (Some(c), Some(w)) if w.metadata.uid == c.metadata.uid && rv(&w) > rv(&c) => Some(w),
            (c, _) => c,
        }
    }

    /// One pass over the JobFlow `key`.
    async fn pass(&self, key: &Key) -> Result<(), PassError> {
        self.forget_deleted();
        let Some(flow) = self.get(key) else {
            return Ok(());
        };
        if flow.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let uid = flow.metadata.uid.clone().unwrap_or_default();
        let jobs = self.made.jobs(&self.jobs, key, &key.0, &uid);
        let templates: Vec<JobTemplate> = self
            .templates
            .state()
            .into_iter()
            .filter(|t| t.namespace().as_deref() == Some(key.0.as_str()))
            .map(|t| (*t).clone())
            .collect();
        let plan = sync(&flow, &templates, &jobs, self.options.clock.now());
        self.carry_out(&flow, key, plan).await?;
        if self.options.template_status {
            self.template_status(&flow, key, &templates).await?;
        }
        Ok(())
    }

    /// Writes what `plan` says: deletions, new Jobs, the status, the Events.
    async fn carry_out(&self, flow: &JobFlow, key: &Key, plan: FlowPlan) -> Result<(), PassError> {
        let (ns, name) = (&key.0, &key.1);
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
        for job in &plan.delete {
            match jobs.delete(job, &DeleteParams::background()).await {
                Ok(_) => {
                    tracing::info!(namespace = %ns, jobflow = %name, job = %job, "deleted job of a succeeded flow");
                }
                Err(e) if is_gone(&e) => {}
                Err(source) => {
                    return Err(PassError {
                        what: format!("deleting job {ns}/{job}"),
                        source,
                    });
                }
            }
        }
        let uid = flow.metadata.uid.as_deref().unwrap_or_default();
        for job in &plan.create {
            let job_name = job.name_any();
            match jobs.create(&PostParams::default(), job).await {
                Ok(made) => {
                    tracing::info!(namespace = %ns, jobflow = %name, job = %job_name, "created flow job");
                    self.made.add(key, made);
                }
                Err(source) if is_conflict(&source) => {
                    // Someone else's Job by that name is not run over; this flow's own one
                    // the cache does not hold yet is looked at again after a backoff.
                    match self.jobs.get(&ObjectRef::new(&job_name).within(ns)) {
                        Some(j) if controlled_by(&j, uid) => {}
                        Some(_) => {
                            self.event(
                                flow,
                                key,
                                "FailedCreate",
                                &format!("a job named {job_name} exists and is not this flow's"),
                                true,
                            )
                            .await;
                        }
                        None => {
                            return Err(PassError {
                                what: format!("creating job {ns}/{job_name}"),
                                source,
                            });
                        }
                    }
                }
                Err(source) => {
                    return Err(PassError {
                        what: format!("creating job {ns}/{job_name}"),
                        source,
                    });
                }
            }
        }
        if let Some(status) = &plan.status {
            let api: Api<JobFlow> = Api::namespaced(self.client.clone(), ns);
            // The whole status replaced: its lists and maps shrink as well as grow.
            let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
                {"op": "add", "path": "/status", "value": status}]))
            .map_err(|e| PassError {
                what: format!("writing status of jobflow {ns}/{name}"),
                source: kube::Error::SerdeError(e),
            })?;
            let updated = api
                .patch_status(name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map_err(|source| PassError {
                    what: format!("writing status of jobflow {ns}/{name}"),
                    source,
                })?;
            if let Ok(mut w) = self.written.lock() {
                w.insert(key.clone(), Arc::new(updated));
            }
        }
        let lasting = plan
            .events
            .iter()
            .filter(|e| TOLD_ONCE.contains(&e.reason))
            .map(|e| (e.reason, e.message.clone()))
            .collect();
        let news = self.told.news(key, lasting);
        for e in &plan.events {
            if TOLD_ONCE.contains(&e.reason) && !news.contains(&(e.reason, e.message.clone())) {
                continue;
            }
            self.event(flow, key, e.reason, &e.message, e.type_ == "Warning")
                .await;
        }
        Ok(())
    }

    /// Records an Event on the JobFlow (a warning is logged too).
    async fn event(&self, flow: &JobFlow, key: &Key, reason: &str, message: &str, warning: bool) {
        if warning {
            tracing::warn!(namespace = %key.0, jobflow = %key.1, reason, message, "jobflow");
        }
        let on = EventFor {
            namespace: &key.0,
            api_version: "flow.volcano.sh/v1alpha1",
            kind: "JobFlow",
            name: &key.1,
            uid: flow.metadata.uid.clone(),
        };
        record(
            &self.client,
            &on,
            reason,
            message,
            warning,
            &self.options.identity,
        )
        .await;
    }

    /// Each template the flow uses lists the Jobs made from it (`status.jobDependsOnList`),
    /// as Volcano's JobTemplate controller keeps it.
    async fn template_status(
        &self,
        flow: &JobFlow,
        key: &Key,
        templates: &[JobTemplate],
    ) -> Result<(), PassError> {
        let ns = &key.0;
        let jobs: Vec<Job> = {
            let mut all: Vec<Job> = self
                .jobs
                .state()
                .into_iter()
                .filter(|j| j.namespace().as_deref() == Some(ns.as_str()))
                .map(|j| (*j).clone())
                .collect();
            let uid = flow.metadata.uid.clone().unwrap_or_default();
            for j in self.made.jobs(&self.jobs, key, ns, &uid) {
                if !all.iter().any(|a| a.metadata.uid == j.metadata.uid) {
                    all.push(j);
                }
            }
            all
        };
        let api: Api<JobTemplate> = Api::namespaced(self.client.clone(), ns);
        for t in templates {
            let name = t.name_any();
            if !flow.spec.flows.iter().any(|f| f.name == name) {
                continue;
            }
            let mark = object_string(ns, &name);
            let mut made: Vec<String> = jobs
                .iter()
                .filter(|j| {
                    j.metadata.deletion_timestamp.is_none()
                        && j.labels().get(CREATED_BY_TEMPLATE) == Some(&mark)
                })
                .map(|j| j.name_any())
                .collect();
            made.sort();
            let listed = t
                .status
                .as_ref()
                .map(|s| s.job_depends_on_list.clone())
                .unwrap_or_default();
            if made.is_empty() || made == listed {
                continue;
            }
            let patch = serde_json::json!({"status": {"jobDependsOnList": made}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| PassError {
                    what: format!("writing status of jobtemplate {ns}/{name}"),
                    source,
                })?;
        }
        Ok(())
    }

    /// Forgets what was written, made and told of JobFlows that are gone.
    fn forget_deleted(&self) {
        let here = |k: &Key| self.flows.get(&ObjectRef::new(&k.1).within(&k.0)).is_some();
        if let Ok(mut w) = self.written.lock() {
            w.retain(|k, _| here(k));
        }
        self.told.retain(here);
        self.made.retain(here);
    }
}
