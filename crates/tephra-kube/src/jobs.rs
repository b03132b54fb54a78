//! The job controller's adapter: watches Volcano Jobs, the pods and PodGroups they own, and
//! runs [`tephra_controllers::job::reconcile()`] for a Job whenever any of them changes (or a
//! policy's timeout or the Job's TTL falls due, and every resync period), then applies the
//! writes it returns. Only the leader writes.
//!
//! It runs on kube-runtime's `Controller` (one pass at a time, so that two passes over one Job
//! never overlap), started anew each time this replica gains the lead
//! ([`reconciler::while_leading`]): a failed pass is counted by reason and retried after the
//! backoff its failures in a row earn ([`reconciler::Failures`]); a pass that succeeds asks
//! for the next one when a policy's timeout or the TTL falls due, else after the resync
//! period. The watch caches lag behind the controller's own writes; a pass reads the Job as
//! the controller last wrote it when the cache is older, so that one pod failure cannot
//! restart a Job twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use tephra_api::batch::Action;
use tephra_api::well_known::{JOB_NAME, OUT_OF_SYNC};
use tephra_api::{Command, Job, PodGroup};
use tephra_controllers::job::names::{names_a_job, podgroup_name};
use tephra_controllers::job::plugins::SshKey;
use tephra_controllers::job::plugins::ssh::needs_key as needs_ssh_key;
use tephra_controllers::job::{Observed, Write, reconcile};
use tokio::task::JoinHandle;

use crate::commands;
use crate::events::{EventFor, record};
use crate::gone::{done_if_exists, done_if_gone};
use crate::leader::Leadership;
use crate::reconciler;

/// How the job controller runs.
#[derive(Clone, Debug)]
pub struct JobControllerOptions {
    /// This replica's name, on the Events it records.
    pub identity: String,
    /// How often every Job is looked at even if nothing changed.
    pub resync: Duration,
    /// Failed passes, by reason (`tephra_controller_errors_total`).
    pub errors: reconciler::ErrorCounter,
}

impl Default for JobControllerOptions {
    fn default() -> Self {
        Self {
            identity: "tephra-controller-manager".into(),
            resync: Duration::from_secs(30),
            errors: reconciler::ErrorCounter::default(),
        }
    }
}

type Key = (String, String);

/// The Job that owns an object, by its owner reference (else the `volcano.sh/job-name` label).
fn owner_key<K: Resource>(o: &K) -> Option<Key> {
    let meta = o.meta();
    let ns = meta.namespace.clone()?;
    let by_owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| names_a_job(r) && r.controller == Some(true));
    let name = match by_owner {
        Some(r) => r.name.clone(),
        None => meta.labels.as_ref()?.get(JOB_NAME)?.clone(),
    };
    Some((ns, name))
}

/// Whether the object's controller is the object with `uid`.
fn controlled_by<K: Resource>(o: &K, uid: Option<&String>) -> bool {
    o.owner_references()
        .iter()
        .any(|r| Some(&r.uid) == uid && r.controller == Some(true))
}

/// The Job a Command is for (`target` a `batch.volcano.sh` Job).
fn command_target(c: &Command) -> Option<Key> {
    let t = c.fields.target.as_ref()?;
    if !names_a_job(t) {
        return None;
    }
    Some((c.metadata.namespace.clone()?, t.name.clone()))
}

/// A Job's own key.
fn job_key(j: &Job) -> Option<Key> {
    Some((j.namespace()?, j.name_any()))
}

/// Starts the job controller. It reconciles only while `leadership` leads.
pub fn start(
    client: Client,
    options: JobControllerOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    vec![tokio::spawn(reconciler::while_leading(
        leadership,
        move |lost| run(client.clone(), options.clone(), lost),
    ))]
}

/// One term as leader: a kube-runtime `Controller` over Jobs, triggered by the Jobs, the pods
/// and PodGroups they own and the Commands for them, one pass at a time, until `lost`.
async fn run(client: Client, options: JobControllerOptions, lost: reconciler::Lost) {
    let (pods, pods_w) = reflector::store();
    let (pgs, pgs_w) = reflector::store();
    let (commands, commands_w) = reflector::store();
    let all = watcher::Config::default;
    let pods_s = reconciler::watched(&client, pods_w, all().labels(JOB_NAME));
    let pgs_s = reconciler::watched(&client, pgs_w, all());
    let commands_s = reconciler::watched(&client, commands_w, all());
    let controller = Controller::new(Api::<Job>::all(client.clone()), all())
        .trigger_backoff(reconciler::TriggerBackoff)
        .with_config(controller::Config::default().concurrency(1));
    let ctx = Arc::new(JobPasses {
        jobs: controller.store(),
        client,
        options,
        pods,
        pgs,
        commands,
        written: Mutex::new(HashMap::new()),
        failures: reconciler::Failures::default(),
    });
    let to_job = |k: Key| Some(ObjectRef::new(&k.1).within(&k.0));
    controller
        .watches_stream(pods_s, move |p: Pod| owner_key(&p).and_then(to_job))
        .watches_stream(pgs_s, move |g: PodGroup| owner_key(&g).and_then(to_job))
        .watches_stream(commands_s, move |c: Command| {
            command_target(&c).and_then(to_job)
        })
        .graceful_shutdown_on(lost)
        .run(pass, failed, ctx)
        .for_each(|_| async {})
        .await;
}

/// One pass over a Job; when its writes are done it is looked at again when a policy's
/// timeout or its TTL falls due, or after the resync period.
async fn pass(job: Arc<Job>, w: Arc<JobPasses>) -> Result<ControllerAction, ApplyError> {
    let Some(key) = job_key(&job) else {
        return Ok(ControllerAction::await_change());
    };
    let next = w.pass(&key).await?;
    w.failures.succeeded(&key);
    let resync = w.options.resync;
    Ok(ControllerAction::requeue(
        next.map_or(resync, |d| d.min(resync)),
    ))
}

/// A pass failed: counted by reason, and tried again after the backoff its failures earn.
fn failed(job: Arc<Job>, e: &ApplyError, w: Arc<JobPasses>) -> ControllerAction {
    let key = job_key(&job).unwrap_or_default();
    w.options.errors.inc(NAME, reason(e));
    let wait = w.failures.failed(key.clone());
    tracing::warn!(controller = NAME, namespace = %key.0, job = %key.1, error = %e,
        retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        "pass failed; retrying");
    ControllerAction::requeue(wait)
}

/// The controller's name, in logs and `tephra_controller_errors_total`.
const NAME: &str = "job";

/// What the Jobs, their pods, PodGroups and Commands look like to the passes.
struct JobPasses {
    client: Client,
    options: JobControllerOptions,
    jobs: Store<Job>,
    pods: Store<Pod>,
    pgs: Store<PodGroup>,
    commands: Store<Command>,
    /// The Job as the controller last wrote it, for when the cache has not caught up.
    written: Mutex<HashMap<Key, Arc<Job>>>,
    /// Each Job's failed passes in a row.
    failures: reconciler::Failures<Key>,
}

/// Why applying a pass's writes stopped.
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    #[error("{what}: {}", crate::brief::kube(.source))]
    Api { what: String, source: kube::Error },
    #[error("making the ssh plugin's key pair: {what}")]
    Key { what: String },
}

/// Why a pass failed, in one word.
fn reason(e: &ApplyError) -> &str {
    match e {
        ApplyError::Api { source, .. } => reconciler::api_reason(source),
        ApplyError::Key { .. } => "SshKey",
    }
}

fn rv(j: &Job) -> Option<u64> {
    j.metadata.resource_version.as_deref()?.parse().ok()
}

fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

impl JobPasses {
    fn job(&self, key: &Key) -> Option<Arc<Job>> {
        let cached = self.jobs.get(&ObjectRef::new(&key.1).within(&key.0))?;
        let written = self.written.lock().ok()?.get(key).cloned();
        match written {
            Some(w) if w.metadata.uid == cached.metadata.uid && rv(&w) > rv(&cached) => Some(w),
            _ => Some(cached),
        }
    }

    /// One pass over the Job `key`: its writes applied, and how soon it wants another pass
    /// (a policy's timeout or its TTL, or more Commands waiting), if it does.
    async fn pass(&self, key: &Key) -> Result<Option<Duration>, ApplyError> {
        self.forget_deleted();
        let Some(job) = self.job(key) else {
            return Ok(None);
        };
        let uid = job.metadata.uid.as_ref();
        let pods: Vec<Arc<Pod>> = self
            .pods
            .state()
            .into_iter()
            .filter(|p| {
                p.namespace().as_deref() == Some(key.0.as_str()) && controlled_by(&**p, uid)
            })
            .collect();
        let pods: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
        let pg = self
            .pgs
            .get(&ObjectRef::new(&podgroup_name(&job)).within(&key.0))
            .filter(|pg| controlled_by(&**pg, uid));
        let (command, more) = self.take_command(&job, key).await?;
        let now = now_ms();
        let key_pair = if needs_ssh_key(&job) {
            Some(ssh_key(&job.name_any()).map_err(|what| ApplyError::Key { what })?)
        } else {
            None
        };
        let out = reconcile(&Observed {
            job: &job,
            podgroup: pg.as_deref(),
            pods: &pods,
            command,
            now_ms: now,
            ssh_key: key_pair.as_ref(),
        });
        if out.action != tephra_api::batch::Action::SyncJob {
            tracing::info!(namespace = %key.0, job = %key.1, action = ?out.action,
                trigger = ?out.trigger.as_ref().map(|t| t.describe()), "job action");
        }
        for w in &out.writes {
            self.apply(&job, w).await?;
        }
        if more {
            return Ok(Some(Duration::ZERO));
        }
        // A moment past the due time, so that the pass sees it passed.
        Ok(out
            .wake_ms
            .map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0) + 50)))
    }

    /// Forgets what was written for Jobs that are gone (a pass runs only for Jobs that
    /// exist), once there are more of them than Jobs.
    fn forget_deleted(&self) {
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        if written.len() <= 64 + self.jobs.state().len() {
            return;
        }
        written.retain(|(ns, name), _| self.jobs.get(&ObjectRef::new(name).within(ns)).is_some());
    }

    /// The oldest Command for this Job, deleted before it is carried out (as Volcano does:
    /// a command runs at most once), and whether more wait. An action a Job cannot take is
    /// refused with an Event.
    async fn take_command(
        &self,
        job: &Job,
        key: &Key,
    ) -> Result<(Option<Action>, bool), ApplyError> {
        let uid = job.metadata.uid.as_deref();
        let mine = commands::oldest_first(&self.commands, |c| {
            command_target(c).as_ref() == Some(key)
                && c.fields
                    .target
                    .as_ref()
                    .is_some_and(|t| Some(t.uid.as_str()) == uid)
        });
        let Some(cmd) = mine.first() else {
            return Ok((None, false));
        };
        let taken = commands::take(&self.client, cmd)
            .await
            .map_err(|source| ApplyError::Api {
                what: format!("deleting Command {}/{}", key.0, cmd.name_any()),
                source,
            })?;
        let more = mine.len() > 1;
        if !taken {
            return Ok((None, more));
        }
        let text = cmd.fields.action.clone().unwrap_or_default();
        let action: Option<Action> =
            serde_json::from_value(serde_json::Value::String(text.clone())).ok();
        match action {
            Some(a) if Action::POLICY_ACTIONS.contains(&a) => {
                tracing::info!(namespace = %key.0, job = %key.1, action = ?a, command = %cmd.name_any(), "command");
                Ok((Some(a), more))
            }
            _ => {
                let message = format!(
                    "Command {}: action {text:?} is not one a Job takes (AbortJob, ResumeJob, RestartJob, TerminateJob, CompleteJob, ...)",
                    cmd.name_any()
                );
                self.record(job, true, "InvalidCommand", &message).await;
                Ok((None, more))
            }
        }
    }

    async fn apply(&self, job: &Job, w: &Write) -> Result<(), ApplyError> {
        let ns = job.namespace().unwrap_or_default();
        let name = job.name_any();
        let c = self.client.clone();
        let api_err = |what: String| move |source| ApplyError::Api { what, source };
        match w {
            Write::CreatePodGroup(pg) => {
                let api: Api<PodGroup> = Api::namespaced(c, &ns);
                done_if_exists(api.create(&PostParams::default(), pg).await)
                    .map_err(api_err(format!("creating PodGroup for {ns}/{name}")))?;
            }
            Write::UpdatePodGroup(pg) => {
                let api: Api<PodGroup> = Api::namespaced(c, &ns);
                let patch = serde_json::json!({"spec": {
                    "minMember": pg.spec.min_member,
                    "minTaskMember": pg.spec.min_task_member,
                    "minResources": pg.spec.min_resources,
                    "priorityClassName": pg.spec.priority_class_name,
                }});
                api.patch(
                    &pg.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(api_err(format!("updating PodGroup {ns}/{}", pg.name_any())))?;
            }
            Write::DeletePodGroup(pg) => {
                let api: Api<PodGroup> = Api::namespaced(c, &ns);
                done_if_gone(api.delete(pg, &DeleteParams::default()).await)
                    .map_err(api_err(format!("deleting PodGroup {ns}/{pg}")))?;
            }
            Write::CreateService(x) => {
                let api: Api<Service> = Api::namespaced(c, &ns);
                done_if_exists(api.create(&PostParams::default(), x).await)
                    .map_err(api_err(format!("creating Service {ns}/{}", x.name_any())))?;
            }
            Write::CreateConfigMap(x) => {
                let api: Api<ConfigMap> = Api::namespaced(c, &ns);
                done_if_exists(api.create(&PostParams::default(), x).await)
                    .map_err(api_err(format!("creating ConfigMap {ns}/{}", x.name_any())))?;
            }
            Write::CreateSecret(x) => {
                let api: Api<Secret> = Api::namespaced(c, &ns);
                done_if_exists(api.create(&PostParams::default(), x).await)
                    .map_err(api_err(format!("creating Secret {ns}/{}", x.name_any())))?;
            }
            Write::CreatePod(p) => {
                let api: Api<Pod> = Api::namespaced(c, &ns);
                match api.create(&PostParams::default(), p).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(kube::Error::Api(s)) if (400..500).contains(&s.code) && s.code != 429 => {
                        // The API server refused the pod (validation, an admission plugin such
                        // as Priority or a quota, a webhook, RBAC): say so on the Job and retry
                        // later (the user may fix it; nothing else is created meanwhile).
                        let message = format!("Error creating pods: {}", s.message);
                        let said = job
                            .status
                            .as_ref()
                            .and_then(|st| st.state.message.as_deref())
                            == Some(message.as_str());
                        if !said {
                            // Once per refusal, not on every retry: an Event, and the Job's
                            // state says why it waits until its phase moves on.
                            self.record(job, true, "FailedCreatePod", &message).await;
                            let patch = serde_json::json!({"status": {"state": {
                                "reason": "FailedCreatePod", "message": message}}});
                            let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
                            if let Ok(updated) = api
                                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                                .await
                            {
                                self.wrote((ns.clone(), name.clone()), updated);
                            }
                        }
                        return Err(ApplyError::Api {
                            what: format!("creating pod {}", p.name_any()),
                            source: kube::Error::Api(s),
                        });
                    }
                    Err(e) => {
                        return Err(ApplyError::Api {
                            what: format!("creating pod {}", p.name_any()),
                            source: e,
                        });
                    }
                }
            }
            Write::DeletePod(pod) => {
                let api: Api<Pod> = Api::namespaced(c, &ns);
                let mark = serde_json::json!({"metadata": {"annotations": {OUT_OF_SYNC: "true"}}});
                done_if_gone(
                    api.patch(pod, &PatchParams::default(), &Patch::Merge(&mark))
                        .await,
                )
                .map_err(api_err(format!("marking pod {ns}/{pod}")))?;
                done_if_gone(api.delete(pod, &DeleteParams::default()).await)
                    .map_err(api_err(format!("deleting pod {ns}/{pod}")))?;
            }
            Write::Status(status) => {
                let api: Api<Job> = Api::namespaced(c, &ns);
                let old = serde_json::to_value(job.status.clone().unwrap_or_default())
                    .unwrap_or_default();
                let new = serde_json::to_value(&**status).unwrap_or_default();
                let patch = serde_json::json!({"status": merge_patch(&old, &new)});
                let updated = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_err(format!("writing status of {ns}/{name}")))?;
                self.wrote((ns, name), updated);
            }
            Write::Event {
                warning,
                reason,
                message,
            } => self.record(job, *warning, reason, message).await,
            Write::DeleteJob => {
                let api: Api<Job> = Api::namespaced(c, &ns);
                let dp = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..DeleteParams::default()
                };
                done_if_gone(api.delete(&name, &dp).await)
                    .map_err(api_err(format!("deleting finished job {ns}/{name}")))?;
                tracing::info!(namespace = %ns, job = %name, "deleted: ttlSecondsAfterFinished passed");
            }
        }
        Ok(())
    }

    /// The controller wrote `job`: passes read it until the watch catches up.
    fn wrote(&self, key: Key, job: Job) {
        if let Ok(mut w) = self.written.lock() {
            w.insert(key, Arc::new(job));
        }
    }

    async fn record(&self, job: &Job, warning: bool, reason: &str, message: &str) {
        let ns = job.namespace().unwrap_or_default();
        let on = EventFor {
            namespace: &ns,
            api_version: "batch.volcano.sh/v1alpha1",
            kind: "Job",
            name: &job.name_any(),
            uid: job.metadata.uid.clone(),
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
}

/// A merge patch that takes `old` to `new`: all of `new` is set, what went away is null
/// (a plain merge patch of `new` would keep a task's count that is gone).
fn merge_patch(old: &serde_json::Value, new: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in n {
                match o.get(k) {
                    Some(ov) => {
                        out.insert(k.clone(), merge_patch(ov, v));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

/// A fresh Ed25519 key pair for a Job's `ssh` plugin, from the system's randomness.
fn ssh_key(job: &str) -> Result<SshKey, String> {
    use ring::rand::{SecureRandom, SystemRandom};
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let rng = SystemRandom::new();
    let mut seed = [0u8; 32];
    let mut check = [0u8; 4];
    rng.fill(&mut seed)
        .map_err(|_| "no randomness".to_string())?;
    rng.fill(&mut check)
        .map_err(|_| "no randomness".to_string())?;
    let pair = Ed25519KeyPair::from_seed_unchecked(&seed).map_err(|e| e.to_string())?;
    let public: [u8; 32] = pair
        .public_key()
        .as_ref()
        .try_into()
        .map_err(|_| "an Ed25519 public key is 32 bytes".to_string())?;
    Ok(SshKey::ed25519(
        &seed,
        &public,
        u32::from_be_bytes(check),
        &format!("{job}@tephra"),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// OpenSSH itself reads the key pair: `ssh-keygen -y` derives the same public key from the
    /// private one (skipped where ssh-keygen is not installed).
    #[test]
    fn openssh_reads_the_ssh_plugins_key_pair() {
        let key = ssh_key("mpi").unwrap();
        let dir = std::env::temp_dir().join(format!("tephra-ssh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id_rsa");
        std::fs::write(&path, &key.private).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let out = std::process::Command::new("ssh-keygen")
            .arg("-y")
            .arg("-f")
            .arg(&path)
            .output();
        let _ = std::fs::remove_dir_all(&dir);
        let Ok(out) = out else {
            tephra_envtest::skip("ssh-keygen is not installed");
            return;
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let derived = String::from_utf8(out.stdout).unwrap();
        let blob = |s: &str| s.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        assert_eq!(blob(&derived), blob(&key.public));
    }
}
