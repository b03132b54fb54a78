//! The CronJob controller's adapter: watches Volcano's CronJobs and the Jobs they own, and runs
//! [`tephra_controllers::cronjob::sync`] on the controller manager's [`Clock`] whenever a
//! CronJob or one of its Jobs changes, at the next scheduled time, and whenever a driven clock
//! moves; then carries the plan out: the Jobs beyond the history limits (or replaced) deleted,
//! the scheduled Job created, the status written, the Events recorded. It runs on
//! kube-runtime's `Controller`, one pass at a time, while this replica leads.
//!
//! The watch may lag the writes: a Job this replica made stands in for the cache's until the
//! cache holds it, and the CronJob as last written for an older cached one, so a Job the
//! CronJob lists is not called gone and a time is never run twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tephra_api::Job;
use tephra_api::cronjob::{CronJob, CronJobStatus};
use tephra_controllers::cronjob::{Plan, sync};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::events::{EventFor, record};
use crate::gone::{is_conflict, is_gone};
use crate::leader::Leadership;
use crate::owned_jobs::{Made, Told, controlled_by};
use crate::reconciler;

/// How the CronJob controller runs.
#[derive(Clone, Debug)]
pub struct CronJobControllerOptions {
    /// This replica's name, on the Events it records.
    pub identity: String,
    /// How often every CronJob is looked at even if nothing changed.
    pub resync: Duration,
    /// Failed passes, by reason (`tephra_controller_errors_total`).
    pub errors: reconciler::ErrorCounter,
    /// The time the schedules are read against.
    pub clock: Clock,
}

impl Default for CronJobControllerOptions {
    fn default() -> Self {
        Self {
            identity: "tephra-controller-manager".into(),
            resync: Duration::from_secs(30),
            errors: reconciler::ErrorCounter::default(),
            clock: Clock::system(),
        }
    }
}

/// The controller's name, in logs and `tephra_controller_errors_total`.
const NAME: &str = "cronjob";

const API_VERSION: &str = "batch.volcano.sh/v1alpha1";

type Key = (String, String);

/// Starts the CronJob controller. It writes only while `leadership` leads.
pub fn start(
    client: Client,
    options: CronJobControllerOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    vec![tokio::spawn(reconciler::while_leading(
        leadership,
        move |lost| run(client.clone(), options.clone(), lost),
    ))]
}

/// One term as leader: a kube-runtime `Controller` over CronJobs, triggered by them, the Jobs
/// they own and the moves of a driven clock, one pass at a time, until `lost`.
async fn run(client: Client, options: CronJobControllerOptions, lost: reconciler::Lost) {
    let (jobs, jobs_w) = reflector::store();
    let all = watcher::Config::default;
    let jobs_s = reconciler::watched(&client, jobs_w, all());
    let controller = Controller::new(Api::<CronJob>::all(client.clone()), all())
        .trigger_backoff(reconciler::TriggerBackoff)
        .with_config(controller::Config::default().concurrency(1));
    let moves = options.clock.moves();
    let ctx = Arc::new(CronPasses {
        crons: controller.store(),
        client,
        options,
        jobs,
        written: Mutex::new(HashMap::new()),
        made: Made::default(),
        told: Told::default(),
        failures: reconciler::Failures::default(),
    });
    let controller = controller.owns_stream(jobs_s);
    let controller = match moves {
        Some(rx) => controller.reconcile_all_on(moves_of(rx).map(|_| ())),
        None => controller,
    };
    controller
        .graceful_shutdown_on(lost)
        .run(pass, failed, ctx)
        .for_each(|_| async {})
        .await;
}

/// The moves of a driven clock, as a stream.
fn moves_of(
    rx: tokio::sync::watch::Receiver<k8s_openapi::jiff::Timestamp>,
) -> impl futures::Stream<Item = k8s_openapi::jiff::Timestamp> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        let now = *rx.borrow_and_update();
        Some((now, rx))
    })
}

fn key(c: &CronJob) -> Option<Key> {
    Some((c.namespace()?, c.name_any()))
}

/// One pass over a CronJob; looked at again at its next scheduled time, or after the resync
/// period when that is sooner.
async fn pass(cron: Arc<CronJob>, w: Arc<CronPasses>) -> Result<ControllerAction, PassError> {
    let Some(key) = key(&cron) else {
        return Ok(ControllerAction::await_change());
    };
    // Nothing is decided before the Jobs are listed: a CronJob whose running Job is not known
    // yet would start another under Forbid.
    if w.jobs.wait_until_ready().now_or_never().is_none() {
        return Ok(ControllerAction::requeue(Duration::from_millis(100)));
    }
    let next = w.pass(&key).await?;
    w.failures.succeeded(&key);
    let resync = w.options.resync;
    Ok(ControllerAction::requeue(
        next.map_or(resync, |d| d.min(resync)),
    ))
}

/// A pass failed: counted by reason, and tried again after the backoff its failures earn.
fn failed(cron: Arc<CronJob>, e: &PassError, w: Arc<CronPasses>) -> ControllerAction {
    let key = key(&cron).unwrap_or_default();
    w.options
        .errors
        .inc(NAME, reconciler::api_reason(&e.source));
    let wait = w.failures.failed(key.clone());
    tracing::warn!(controller = NAME, namespace = %key.0, cronjob = %key.1, error = %e,
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

/// What the CronJobs and their Jobs look like to the passes.
struct CronPasses {
    client: Client,
    options: CronJobControllerOptions,
    crons: Store<CronJob>,
    jobs: Store<Job>,
    /// The CronJob as the controller last wrote it, for when the cache has not caught up.
    written: Mutex<HashMap<Key, Arc<CronJob>>>,
    /// The Jobs this replica made, until the cache holds them.
    made: Made<Key>,
    /// The lasting warnings told of each CronJob (one Event per problem, not per pass).
    told: Told<Key>,
    /// Each CronJob's failed passes in a row.
    failures: reconciler::Failures<Key>,
}

fn rv(c: &CronJob) -> Option<u64> {
    c.metadata.resource_version.as_deref()?.parse().ok()
}

/// Problems that are told once while they last; the rest are told each time they happen.
const TOLD_ONCE: [&str; 4] = [
    "UnknownTimeZone",
    "UnparseableSchedule",
    "OrphanedJob",
    "TooManyMissedTimes",
];

impl CronPasses {
    /// The CronJob from the cache, or as last written when the cache is older.
    fn get(&self, key: &Key) -> Option<Arc<CronJob>> {
        let cached = self.crons.get(&ObjectRef::new(&key.1).within(&key.0));
        let written = self.written.lock().ok().and_then(|w| w.get(key).cloned());
        match (cached, written) {
            (Some(c), Some(w)) if w.metadata.uid == c.metadata.uid && rv(&w) > rv(&c) => Some(w),
            (c, _) => c,
        }
    }

    /// One pass over the CronJob `key`: when it should be looked at again.
    async fn pass(&self, key: &Key) -> Result<Option<Duration>, PassError> {
        self.forget_deleted();
        let Some(cron) = self.get(key) else {
            return Ok(None);
        };
        if cron.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let uid = cron.metadata.uid.clone().unwrap_or_default();
        let jobs = self.made.jobs(&self.jobs, key, &key.0, &uid);
        let plan = sync(&cron, &jobs, self.options.clock.now());
        let next = plan
            .requeue_after
            .and_then(|d| Duration::try_from(d).ok())
            .map(|d| d.max(Duration::from_millis(10)));
        self.carry_out(&cron, plan).await?;
        Ok(next)
    }

    /// Writes what `plan` says: deletions, the new Job, the status, the Events.
    async fn carry_out(&self, cron: &CronJob, plan: Plan) -> Result<(), PassError> {
        let key = key(cron).unwrap_or_default();
        let (ns, name) = (&key.0, &key.1);
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
        for job in &plan.delete {
            match jobs.delete(job, &DeleteParams::background()).await {
                Ok(_) => {
                    tracing::info!(namespace = %ns, cronjob = %name, job = %job, "deleted job")
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
        let mut status = plan.status.clone();
        let mut events = plan.events.clone();
        if let Some(job) = &plan.create {
            let job_name = job.name_any();
            let made = match jobs.create(&PostParams::default(), job).await {
                Ok(made) => Some(made),
                Err(source) if is_conflict(&source) => {
                    // Made before (a pass whose status write was lost): this CronJob's own Job
                    // counts as made; anyone else's is not run over. One the cache does not
                    // hold yet is looked at again after a backoff.
                    let uid = cron.metadata.uid.as_deref().unwrap_or_default();
                    match self.jobs.get(&ObjectRef::new(&job_name).within(ns)) {
                        Some(j) if controlled_by(&j, uid) => Some((*j).clone()),
                        Some(_) => None,
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
            };
            match made {
                Some(made) => {
                    tracing::info!(namespace = %ns, cronjob = %name, job = %job_name,
                        "created scheduled job");
                    if let Some(s) = status.as_mut() {
                        fill_uid(s, &made);
                    }
                    self.made.add(&key, made);
                }
                None => {
                    // Not ours: the time is not marked run, and the user is told.
                    status = cron.status.clone();
                    events.retain(|e| e.reason != "SuccessfulCreate");
                    events.push(tephra_controllers::cronjob::CronEvent {
                        type_: "Warning",
                        reason: "FailedCreate",
                        message: format!(
                            "Error creating job: a job named {job_name} exists and is not this CronJob's"
                        ),
                    });
                }
            }
        }
        if let Some(s) = status
            && Some(&s) != cron.status.as_ref()
        {
            self.write_status(cron, &s).await?;
        }
        self.tell(cron, &key, &events).await;
        Ok(())
    }

    /// Writes `status` to the CronJob's status subresource.
    async fn write_status(&self, cron: &CronJob, s: &CronJobStatus) -> Result<(), PassError> {
        let key = key(cron).unwrap_or_default();
        let api: Api<CronJob> = Api::namespaced(self.client.clone(), &key.0);
        let active: Option<&Vec<ObjectReference>> = (!s.active.is_empty()).then_some(&s.active);
        let patch = serde_json::json!({"status": {
            "active": active,
            "lastScheduleTime": s.last_schedule_time,
            "lastSuccessfulTime": s.last_successful_time,
        }});
        let updated = api
            .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| PassError {
                what: format!("writing status of cronjob {}/{}", key.0, key.1),
                source,
            })?;
        if let Ok(mut w) = self.written.lock() {
            w.insert(key, Arc::new(updated));
        }
        Ok(())
    }

    /// Records the plan's Events; a problem that lasts is told once.
    async fn tell(
        &self,
        cron: &CronJob,
        key: &Key,
        events: &[tephra_controllers::cronjob::CronEvent],
    ) {
        let lasting = events
            .iter()
            .filter(|e| TOLD_ONCE.contains(&e.reason))
            .map(|e| (e.reason, e.message.clone()))
            .collect();
        let news = self.told.news(key, lasting);
        for e in events {
            if TOLD_ONCE.contains(&e.reason) && !news.contains(&(e.reason, e.message.clone())) {
                continue;
            }
            let warning = e.type_ == "Warning";
            if warning {
                tracing::warn!(namespace = %key.0, cronjob = %key.1, reason = e.reason,
                    message = %e.message, "cronjob");
            }
            let on = EventFor {
                namespace: &key.0,
                api_version: API_VERSION,
                kind: "CronJob",
                name: &key.1,
                uid: cron.metadata.uid.clone(),
            };
            record(
                &self.client,
                &on,
                e.reason,
                &e.message,
                warning,
                &self.options.identity,
            )
            .await;
        }
    }

    /// Forgets what was written and said of CronJobs that are gone.
    fn forget_deleted(&self) {
        let here = |k: &Key| self.crons.get(&ObjectRef::new(&k.1).within(&k.0)).is_some();
        if let Ok(mut w) = self.written.lock() {
            w.retain(|k, _| here(k));
        }
        self.told.retain(here);
        self.made.retain(here);
    }
}

/// The active reference to `made` (the plan's has only its name) gets its UID and version.
fn fill_uid(s: &mut CronJobStatus, made: &Job) {
    for r in &mut s.active {
        if r.name == made.metadata.name && r.uid.is_none() {
            r.uid = made.metadata.uid.clone();
            r.resource_version = made.metadata.resource_version.clone();
        }
    }
}
