//! The job controller's passes, driven against a small in-memory world: the writes of each pass
//! are applied, and the test plays the scheduler (admitting the PodGroup) and the kubelets
//! (pods run, succeed, fail, go away). Each test follows one Volcano behaviour through.

#![allow(clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use tephra_api::batch::{Action, JobPhase};
use tephra_api::scheduling::PodGroupPhase;
use tephra_api::well_known::OUT_OF_SYNC;
use tephra_api::{Job, PodGroup, PodGroupStatus};
use tephra_controllers::job::plugins::SshKey;
use tephra_controllers::job::plugins::ssh::needs_key as needs_ssh_key;
use tephra_controllers::job::{Observed, Write, reconcile};

struct World {
    job: Job,
    pg: Option<PodGroup>,
    pods: BTreeMap<String, Pod>,
    now_ms: i64,
    deleted: bool,
    created: Vec<String>,
    events: Vec<String>,
    wake_ms: Option<i64>,
    services: Vec<Service>,
    configs: Vec<ConfigMap>,
    secrets: Vec<Secret>,
    /// The key pair the caller would make when a pass needs one.
    key: SshKey,
}

fn time(ms: i64) -> Time {
    Time(Timestamp::from_second(ms / 1000).unwrap_or(Timestamp::UNIX_EPOCH))
}

impl World {
    fn new(job: serde_json::Value) -> World {
        let mut job: Job = serde_json::from_value(job).expect("valid job");
        job.metadata.uid = Some("uid".into());
        job.metadata.creation_timestamp = Some(time(0));
        World {
            job,
            pg: None,
            pods: BTreeMap::new(),
            now_ms: 1000,
            deleted: false,
            created: Vec::new(),
            events: Vec::new(),
            wake_ms: None,
            services: Vec::new(),
            configs: Vec::new(),
            secrets: Vec::new(),
            key: SshKey::ed25519(&[1; 32], &[2; 32], 7, "test"),
        }
    }

    fn pass_with(&mut self, command: Option<Action>) -> Vec<Write> {
        let pods: Vec<&Pod> = self.pods.values().collect();
        let out = reconcile(&Observed {
            job: &self.job,
            podgroup: self.pg.as_ref(),
            pods: &pods,
            command,
            now_ms: self.now_ms,
            ssh_key: needs_ssh_key(&self.job).then_some(&self.key),
        });
        self.wake_ms = out.wake_ms;
        for w in &out.writes {
            match w {
                Write::CreatePodGroup(pg) => self.pg = Some((**pg).clone()),
                Write::UpdatePodGroup(pg) => self.pg = Some((**pg).clone()),
                Write::DeletePodGroup(_) => self.pg = None,
                Write::CreatePod(p) => {
                    let mut p = (**p).clone();
                    p.metadata.creation_timestamp = Some(time(self.now_ms));
                    let name = p.metadata.name.clone().expect("named pod");
                    assert!(!self.pods.contains_key(&name), "{name} created twice");
                    self.created.push(name.clone());
                    self.pods.insert(name, p);
                }
                Write::DeletePod(name) => {
                    let p = self.pods.get_mut(name).expect("deleting a pod that exists");
                    p.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(OUT_OF_SYNC.into(), "true".into());
                    p.metadata.deletion_timestamp = Some(time(self.now_ms));
                }
                Write::Status(s) => self.job.status = Some((**s).clone()),
                Write::Event {
                    reason, message, ..
                } => self.events.push(format!("{reason}: {message}")),
                Write::DeleteJob => self.deleted = true,
                Write::CreateService(x) => self.services.push((**x).clone()),
                Write::CreateConfigMap(x) => self.configs.push((**x).clone()),
                Write::CreateSecret(x) => self.secrets.push((**x).clone()),
            }
        }
        out.writes
    }

    /// A world where the Job's PodGroup was admitted and every pod runs.
    fn running(job: serde_json::Value) -> World {
        let mut w = World::new(job);
        w.settle();
        w.admit();
        w.settle();
        w.all("Running");
        w.settle();
        w
    }

    fn pass(&mut self) -> Vec<Write> {
        self.pass_with(None)
    }

    /// Passes until nothing more is written (at most 10).
    fn settle(&mut self) {
        for _ in 0..10 {
            if self.pass().is_empty() {
                return;
            }
        }
        panic!("the controller did not settle: {:?}", self.pass());
    }

    fn phase(&self) -> Option<JobPhase> {
        self.job.status.as_ref().and_then(|s| s.state.phase)
    }

    fn admit(&mut self) {
        let pg = self.pg.as_mut().expect("a PodGroup to admit");
        pg.status = Some(PodGroupStatus {
            phase: Some(PodGroupPhase::Inqueue),
            ..PodGroupStatus::default()
        });
    }

    fn set(&mut self, name: &str, phase: &str, exit: Option<i32>) {
        let p = self.pods.get_mut(name).expect("pod exists");
        let mut status = serde_json::json!({"phase": phase});
        if phase == "Running" {
            status["containerStatuses"] = serde_json::json!([
                {"name": "c", "image": "i", "ready": true, "restartCount": 0,
                 "state": {"running": {}}}]);
        }
        if let Some(code) = exit {
            status["containerStatuses"] = serde_json::json!([
                {"name": "c", "image": "i", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": code}}}]);
        }
        p.status = Some(serde_json::from_value(status).expect("valid status"));
    }

    fn all(&mut self, phase: &str) {
        let names: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| p.metadata.deletion_timestamp.is_none())
            .map(|(n, _)| n.clone())
            .collect();
        for n in names {
            self.set(&n, phase, if phase == "Succeeded" { Some(0) } else { None });
        }
    }

    /// Pods being deleted finish going away.
    fn gone(&mut self) {
        self.pods
            .retain(|_, p| p.metadata.deletion_timestamp.is_none());
    }

    fn live(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|(_, p)| p.metadata.deletion_timestamp.is_none())
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn status(&self) -> tephra_api::JobStatus {
        self.job.status.clone().unwrap_or_default()
    }
}

fn job(extra: serde_json::Value) -> serde_json::Value {
    let mut j = serde_json::json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "tf", "namespace": "ml"},
        "spec": {"queue": "default", "tasks": [
            {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}},
            {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}}]}
    });
    if let (Some(spec), Some(extra)) = (j["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    j
}

#[test]
fn a_job_waits_for_its_podgroup_to_be_admitted_then_runs_to_completed() {
    let mut w = World::new(job(serde_json::json!({})));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Pending));
    assert!(w.pods.is_empty(), "no pod before the PodGroup is admitted");
    let pg = w.pg.clone().expect("PodGroup created");
    assert_eq!(pg.metadata.name.as_deref(), Some("tf-uid"));
    assert_eq!(pg.spec.min_member, Some(3));
    w.admit();
    w.settle();
    assert_eq!(w.live(), ["tf-ps-0", "tf-worker-0", "tf-worker-1"]);
    assert_eq!(w.status().pending, 3);
    w.all("Running");
    w.now_ms = 5000;
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Running));
    assert_eq!(w.status().running, 3);
    w.all("Succeeded");
    w.now_ms = 65_000;
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Completed));
    let s = w.status();
    assert_eq!(s.succeeded, 3);
    assert_eq!(s.task_status_count["worker"].phase["Succeeded"], 2);
    assert_eq!(s.running_duration.as_deref(), Some("1m5s"));
    let phases: Vec<JobPhase> = s.conditions.iter().map(|c| c.status).collect();
    assert_eq!(
        phases,
        [JobPhase::Pending, JobPhase::Running, JobPhase::Completed]
    );
}

/// Whoever sees the Job finished finds its PodGroup gone: the pass that finishes it deletes the
/// PodGroup before it writes the status (a pass later would leave a window where both show).
#[test]
fn the_pass_that_completes_a_job_deletes_its_podgroup_before_saying_so() {
    let mut w = World::running(job(serde_json::json!({})));
    w.all("Succeeded");
    let writes = w.pass();
    let delete = writes
        .iter()
        .position(|x| matches!(x, Write::DeletePodGroup(_)))
        .expect("the PodGroup deleted in the pass that completes the job");
    let status = writes
        .iter()
        .position(|x| matches!(x, Write::Status(s) if s.state.phase == Some(JobPhase::Completed)))
        .expect("the job completed in this pass");
    assert!(delete < status, "{writes:?}");
    assert!(w.pg.is_none());
}

#[test]
fn a_pending_job_says_why_it_waits_in_the_words_of_its_podgroup_with_one_event_per_reason() {
    let mut w = World::new(job(serde_json::json!({})));
    w.settle();
    let unschedulable = |reason: &str, message: &str| {
        serde_json::from_value(serde_json::json!({"phase": "Pending", "conditions": [
            {"type": "Unschedulable", "status": "True", "reason": reason, "message": message}]}))
        .expect("status")
    };
    let why = "queue default cannot admit the job yet: nvidia.com/gpu";
    w.pg.as_mut().expect("PodGroup").status = Some(unschedulable("NotInqueueable", why));
    w.settle();
    let s = w.status();
    assert_eq!(s.state.phase, Some(JobPhase::Pending));
    assert_eq!(s.state.reason.as_deref(), Some("NotInqueueable"));
    assert_eq!(s.state.message.as_deref(), Some(why));
    assert_eq!(w.events, [format!("NotInqueueable: {why}")]);
    // The same reason in other words: the message follows, no new Event.
    let later = "queue default cannot admit the job yet: nvidia.com/gpu (2 free)";
    w.pg.as_mut().expect("PodGroup").status = Some(unschedulable("NotInqueueable", later));
    w.settle();
    assert_eq!(w.status().state.message.as_deref(), Some(later));
    assert_eq!(w.events.len(), 1, "{:?}", w.events);
    // Once admitted and running, the reason goes.
    w.admit();
    w.settle();
    w.all("Running");
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Running));
    assert_eq!(w.status().state.reason, None);
}

#[test]
fn restart_job_on_pod_failed_restarts_with_a_new_version_until_max_retry_then_fails() {
    let mut w = World::running(job(serde_json::json!({
        "maxRetry": 2,
        "policies": [{"event": "PodFailed", "action": "RestartJob"}]})));
    w.set("tf-worker-1", "Failed", Some(1));
    w.pass();
    assert_eq!(w.phase(), Some(JobPhase::Restarting));
    let s = w.status();
    assert_eq!((s.retry_count, s.version), (1, 1));
    assert!(w.live().is_empty(), "every pod is killed: {:?}", w.live());
    assert!(w.pg.is_none(), "the PodGroup goes with them");
    assert!(
        w.events.iter().any(|e| e.contains("RestartJob")
            && e.contains("PodFailed on pod tf-worker-1 (exit code 1)"))
    );
    w.settle();
    assert_eq!(
        w.phase(),
        Some(JobPhase::Restarting),
        "old pods still going"
    );
    w.gone();
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Pending));
    w.admit();
    w.settle();
    assert_eq!(w.live().len(), 3);
    let version = w.pods["tf-ps-0"]
        .metadata
        .annotations
        .as_ref()
        .expect("ann")["volcano.sh/job-version"]
        .clone();
    assert_eq!(version, "1");
    w.all("Running");
    w.settle();
    w.set("tf-ps-0", "Failed", Some(2));
    w.pass();
    w.gone();
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Failed));
    assert_eq!(w.status().retry_count, 2);
}

#[test]
fn restart_task_restarts_only_that_tasks_pods() {
    let mut w = World::running(job(serde_json::json!({"tasks": [
        {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        {"name": "worker", "replicas": 2,
         "policies": [{"event": "PodFailed", "action": "RestartTask"}],
         "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]})));
    w.set("tf-worker-0", "Failed", Some(1));
    w.pass();
    assert_eq!(w.live(), ["tf-ps-0"]);
    assert_eq!(w.phase(), Some(JobPhase::Restarting));
    assert!(w.pg.is_some(), "a task restart keeps the PodGroup");
    w.gone();
    w.settle();
    assert_eq!(w.live(), ["tf-ps-0", "tf-worker-0", "tf-worker-1"]);
    assert_eq!(w.phase(), Some(JobPhase::Pending));
}

#[test]
fn abort_by_command_drains_to_aborted_and_resume_brings_it_back() {
    let mut w = World::running(job(serde_json::json!({})));
    w.pass_with(Some(Action::AbortJob));
    assert_eq!(w.phase(), Some(JobPhase::Aborting));
    assert!(w.live().is_empty());
    w.gone();
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Aborted));
    w.pass_with(Some(Action::ResumeJob));
    assert_eq!(w.phase(), Some(JobPhase::Restarting));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Pending));
    w.admit();
    w.settle();
    assert_eq!(w.live().len(), 3);
}

#[test]
fn task_completed_completes_the_job_and_stops_the_rest() {
    let mut w = World::running(job(serde_json::json!({"tasks": [
        {"name": "master", "replicas": 1,
         "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
         "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        {"name": "worker", "replicas": 2,
         "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]})));
    w.set("tf-master-0", "Succeeded", Some(0));
    w.pass();
    assert_eq!(w.phase(), Some(JobPhase::Completing));
    assert_eq!(w.live(), ["tf-master-0"], "the finished pod stays");
    w.gone();
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Completed));
}

#[test]
fn min_success_completes_the_job_and_missing_it_fails() {
    let mut w = World::running(job(serde_json::json!({"minSuccess": 2})));
    w.set("tf-worker-0", "Succeeded", Some(0));
    w.set("tf-worker-1", "Succeeded", Some(0));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Completed));

    let mut w = World::running(job(serde_json::json!({"minSuccess": 2})));
    w.set("tf-ps-0", "Succeeded", Some(0));
    w.set("tf-worker-0", "Failed", Some(1));
    w.set("tf-worker-1", "Failed", Some(1));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Failed));
}

#[test]
fn an_exit_code_policy_aborts_only_on_that_code() {
    let mut w = World::running(job(serde_json::json!({
        "policies": [{"exitCode": 7, "action": "AbortJob"}]})));
    w.set("tf-worker-0", "Failed", Some(1));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Running));
    w.set("tf-worker-1", "Failed", Some(7));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Aborting));
}

#[test]
fn pod_pending_past_its_timeout_restarts_the_job_and_asks_to_be_woken() {
    let mut w = World::new(job(serde_json::json!({
        "policies": [{"event": "PodPending", "action": "RestartJob", "timeout": "30s"}]})));
    w.settle();
    w.admit();
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Pending));
    assert_eq!(
        w.wake_ms,
        Some(31_000),
        "woken when the first pod's timeout falls due"
    );
    w.now_ms = 31_000;
    w.pass();
    assert_eq!(w.phase(), Some(JobPhase::Restarting));
}

#[test]
fn a_task_that_depends_on_another_starts_once_that_one_runs() {
    let mut w = World::new(job(serde_json::json!({"tasks": [
        {"name": "driver", "replicas": 1,
         "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        {"name": "executor", "replicas": 2, "dependsOn": {"name": ["driver"]},
         "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]})));
    w.settle();
    w.admit();
    w.settle();
    assert_eq!(w.live(), ["tf-driver-0"]);
    w.set("tf-driver-0", "Running", None);
    w.settle();
    assert_eq!(w.live(), ["tf-driver-0", "tf-executor-0", "tf-executor-1"]);
}

#[test]
fn ttl_after_finished_deletes_the_job_when_it_falls_due() {
    let mut w = World::running(job(serde_json::json!({"ttlSecondsAfterFinished": 60})));
    w.all("Succeeded");
    w.now_ms = 10_000;
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Completed));
    assert!(!w.deleted);
    assert_eq!(w.wake_ms, Some(70_000));
    w.now_ms = 70_000;
    w.pass();
    assert!(w.deleted);
}

#[test]
fn a_pod_deleted_by_someone_else_is_an_eviction_and_is_recreated_without_a_policy() {
    let mut w = World::running(job(serde_json::json!({})));
    let p = w.pods.get_mut("tf-worker-0").expect("pod");
    p.metadata.deletion_timestamp = Some(time(0));
    w.settle();
    assert_eq!(
        w.phase(),
        Some(JobPhase::Running),
        "no policy: nothing happens"
    );
    w.gone();
    w.settle();
    assert_eq!(w.live().len(), 3, "the missing pod is created again");
    assert_eq!(w.created.iter().filter(|n| *n == "tf-worker-0").count(), 2);
}

#[test]
fn an_invalid_job_stays_pending_with_the_field_named_and_creates_nothing() {
    let mut w = World::new(job(serde_json::json!({"minAvailable": 9})));
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Pending));
    assert!(w.pg.is_none() && w.pods.is_empty());
    let s = w.status();
    assert!(
        s.state
            .message
            .unwrap_or_default()
            .contains("spec.minAvailable")
    );
    assert!(w.events.iter().any(|e| e.starts_with("InvalidJob")));
}

#[test]
fn a_depends_on_cycle_is_refused_naming_the_field_as_tephra_validate_does() {
    let task = |name: &str, on: &str| {
        serde_json::json!({"name": name, "replicas": 1, "dependsOn": {"name": [on]},
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})
    };
    let spec = job(serde_json::json!({"tasks": [task("a", "b"), task("b", "a")]}));
    let parsed: tephra_api::Job = serde_json::from_value(spec.clone()).expect("job");
    let validate = tephra_api::checks::job(&parsed);
    assert!(!validate.is_empty(), "tephra validate refuses it");
    let mut w = World::new(spec);
    w.settle();
    assert_eq!(w.phase(), Some(JobPhase::Pending));
    assert!(w.pg.is_none() && w.pods.is_empty(), "nothing is created");
    let message = w.status().state.message.unwrap_or_default();
    assert!(message.contains(&validate[0].to_string()), "{message}");
    assert!(message.contains("dependsOn"), "{message}");
    assert_eq!(
        w.events
            .iter()
            .filter(|e| e.starts_with("InvalidJob"))
            .count(),
        1,
        "one Event: {:?}",
        w.events
    );
}

fn env_of(w: &World, pod: &str) -> BTreeMap<String, String> {
    let spec = w.pods[pod].spec.clone().expect("spec");
    spec.containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let v = e.value.unwrap_or_else(|| {
                e.value_from
                    .and_then(|f| f.config_map_key_ref)
                    .map(|r| format!("configmap:{}/{}", r.name, r.key))
                    .unwrap_or_default()
            });
            (e.name, v)
        })
        .collect()
}

#[test]
fn svc_pytorch_and_env_plugins_give_the_service_hosts_and_variables_once() {
    let mut w = World::new(job(serde_json::json!({
        "plugins": {"svc": [], "env": [], "pytorch": ["--master=ps", "--port=29500"]}})));
    w.settle();
    assert_eq!(w.services.len(), 1, "the Service is made once");
    let svc = &w.services[0];
    assert_eq!(svc.metadata.name.as_deref(), Some("tf"));
    let spec = svc.spec.clone().expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector.expect("selector")["volcano.sh/job-name"],
        "tf"
    );
    let data = w.configs[0].data.clone().expect("data");
    assert_eq!(w.configs[0].metadata.name.as_deref(), Some("tf-svc"));
    assert_eq!(data["worker.host"], "tf-worker-0.tf\ntf-worker-1.tf");
    assert_eq!(data["VC_WORKER_HOSTS"], "tf-worker-0.tf,tf-worker-1.tf");
    assert_eq!(data["VC_PS_NUM"], "1");
    w.admit();
    w.settle();
    assert_eq!(w.configs.len(), 1);
    let env = env_of(&w, "tf-worker-1");
    assert_eq!(env["VC_TASK_INDEX"], "1");
    assert_eq!(env["MASTER_ADDR"], "tf-ps-0.tf");
    assert_eq!(env["MASTER_PORT"], "29500");
    assert_eq!(env["WORLD_SIZE"], "3");
    assert_eq!(env["RANK"], "2");
    assert_eq!(env["VC_WORKER_HOSTS"], "configmap:tf-svc/VC_WORKER_HOSTS");
    assert_eq!(env_of(&w, "tf-ps-0")["RANK"], "0");
    let pod = w.pods["tf-worker-1"].spec.clone().expect("spec");
    assert_eq!(pod.hostname.as_deref(), Some("tf-worker-1"));
    assert_eq!(pod.subdomain.as_deref(), Some("tf"));
    let mounts = pod.containers[0].volume_mounts.clone().expect("mounts");
    assert!(mounts.iter().any(|m| m.mount_path == "/etc/volcano"));
}

#[test]
fn a_job_with_no_replicas_runs_with_nothing_to_wait_for() {
    let mut j = job(serde_json::json!({}));
    j["spec"]["tasks"][0]["replicas"] = serde_json::json!(0);
    j["spec"]["tasks"][1]["replicas"] = serde_json::json!(0);
    let mut w = World::new(j);
    w.settle();
    let status = w.job.status.clone().expect("status");
    assert_eq!(status.state.phase, Some(JobPhase::Running), "{status:?}");
    assert_eq!(status.min_available, 0);
    w.admit();
    w.settle();
    assert_eq!(
        w.job.status.expect("status").state.phase,
        Some(JobPhase::Running),
        "Volcano keeps it Running: no pod will ever finish"
    );
}

#[test]
fn the_ssh_plugin_makes_one_secret_and_mounts_it_in_every_pod() {
    let mut w = World::new(job(serde_json::json!({"plugins": {"ssh": [], "svc": []}})));
    w.settle();
    w.admit();
    w.settle();
    assert_eq!(w.secrets.len(), 1, "the key pair is made once");
    let secret = &w.secrets[0];
    assert_eq!(secret.metadata.name.as_deref(), Some("tf-ssh"));
    let data = secret.data.clone().expect("data");
    assert_eq!(data["id_rsa.pub"], data["authorized_keys"]);
    assert_eq!(data["id_rsa.pub"].0, w.key.public.as_bytes());
    let status = w.job.status.clone().expect("status");
    assert_eq!(status.controlled_resources["plugin-ssh"], "ssh");
    for name in ["tf-ps-0", "tf-worker-0", "tf-worker-1"] {
        let spec = w.pods[name].spec.clone().expect("spec");
        let mounts = spec.containers[0].volume_mounts.clone().expect("mounts");
        assert!(
            mounts
                .iter()
                .any(|m| m.mount_path == "/root/.ssh" && m.name == "tf-ssh"),
            "{name}: {mounts:?}"
        );
    }
}

#[test]
fn the_mpi_plugin_tells_the_master_its_workers() {
    let mut w = World::new(job(serde_json::json!({
        "plugins": {"mpi": ["--master=ps"]}})));
    w.settle();
    w.admit();
    w.settle();
    assert_eq!(
        env_of(&w, "tf-ps-0")["MPI_HOST"],
        "tf-worker-0.tf,tf-worker-1.tf"
    );
    assert!(!env_of(&w, "tf-worker-0").contains_key("MPI_HOST"));
    let ports = w.pods["tf-worker-0"].spec.clone().expect("spec").containers[0]
        .ports
        .clone()
        .expect("ports");
    assert!(ports.iter().any(|p| p.container_port == 22));
}

proptest! {
    /// Whatever the pods do, the controller settles: a pass right after a pass writes nothing
    /// (no status loop, no pod created twice), and no pod name is ever live twice.
    #[test]
    fn the_controller_settles_whatever_the_pods_do(
        moves in proptest::collection::vec((0usize..3, 0u8..5), 1..25),
        policy in 0usize..4,
    ) {
        let policies = [
            serde_json::json!([]),
            serde_json::json!([{"event": "PodFailed", "action": "RestartJob"}]),
            serde_json::json!([{"event": "PodEvicted", "action": "RestartTask"}]),
            serde_json::json!([{"event": "TaskCompleted", "action": "CompleteJob"}]),
        ];
        let mut w = World::new(job(serde_json::json!({"policies": policies[policy], "maxRetry": 3})));
        w.settle();
        for (i, (pod, what)) in moves.into_iter().enumerate() {
            w.now_ms += 1000;
            if w.pg.as_ref().is_some_and(|pg| pg.status.is_none()) {
                w.admit();
            }
            let live = w.live();
            if let Some(name) = live.get(pod % live.len().max(1)).cloned() {
                match what {
                    0 => w.set(&name, "Running", None),
                    1 => w.set(&name, "Succeeded", Some(0)),
                    2 => w.set(&name, "Failed", Some(i as i32 % 3 + 1)),
                    3 => {
                        if let Some(p) = w.pods.get_mut(&name) {
                            p.metadata.deletion_timestamp = Some(time(w.now_ms));
                        }
                    }
                    _ => w.gone(),
                }
            }
            w.settle();
            prop_assert!(w.pass().is_empty());
        }
    }
}
