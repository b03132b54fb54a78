//! A seeded, model-based test of the fleet's lifecycle on the devcluster: a control plane and
//! three members, the scheduler and the job, PodGroup and queue controllers, over HTTP. A
//! generator issues random sequences of what users and the world do (create Volcano Jobs of
//! random shapes, some with the `svc` plugin's ConfigMap and Service, delete them, suspend and
//! resume them, close and open their queue, cordon and uncordon a member's node, delete a pod
//! in a member, a member's outage and return, a member's credentials rotated, the scheduler's
//! two replicas or the controllers restarted, the leading replica stopped so that its standby
//! takes the Lease), and after each step and at quiescence the invariants are checked:
//! - at most one scheduler replica leads (always);
//! - no node is over-committed (always);
//! - no declared pod has more than one copy in the members (always);
//! - no Job is lost (always);
//! - no pod is placed on a node after it was cordoned (always);
//! - no Job created while its queue is closed runs before it opens again (always);
//! - no request of the scheduler or the controllers is refused by RBAC (always): they run as
//!   the chart's ServiceAccounts under its rendered roles, on the control plane and in each
//!   member (needs Helm, as the chart tests do; without it they run as the administrator);
//! - at quiescence: no member copy whose declared pod is gone or was made anew; every live Job
//!   runs whole (all its pods have a copy on a node) or not at all; a suspended Job has no copy
//!   and is Aborted; a deleted Job has left nothing behind, its ConfigMap and Service copies
//!   included; every dependency copy in a member is owned by pod copies that exist there;
//! - at quiescence the fleet's API servers see at most [`QUIET_RATE`] requests a second (no
//!   retry loop, no watch restarting over and over).
//!
//! A failing seed prints its steps. `cargo test -p tephra-kube --test lifecycle_random` runs a
//! few seeds; `TEPHRA_LIFECYCLE_SEEDS=500 cargo test -p tephra-kube --test lifecycle_random --
//! --ignored` runs many.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../tephra/tests/chart_support/helm.rs"]
mod helm;
#[path = "lifecycle_random/invariants.rs"]
mod invariants;
#[path = "lifecycle_random/roles.rs"]
mod roles;

use roles::{Identities, set_member_token, under_chart_roles};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use base64::Engine;
use common::*;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_api::batch::JobPhase;
use tephra_api::well_known::{DECLARED_UID, PLANNED_CLUSTER};
use tephra_api::{Job, ResourceBinding};

const MEMBERS: [&str; 3] = ["east", "west", "north"];

/// Requests a second that the two scheduler replicas and the controllers may make of the fleet's
/// API servers once nothing changes: each replica probes each member every second, and the
/// Lease is renewed and watched for every second.
const QUIET_RATE: f64 = 10.0;

/// How long after a cordon a pod may still land on the node (a placement already decided).
const CORDON_GRACE_S: i64 = 2;

/// What the model expects of one Job.
#[derive(Clone, Debug)]
struct Expected {
    replicas: u32,
    suspended: bool,
    /// A copy of it was deleted in a member: its pod is placed again if there is room, but
    /// the room may have gone to an older or fairer claim meanwhile (as in Volcano, whose gang
    /// order ranks two gangs below their minimum alike).
    disturbed: bool,
}

/// One step of the world.
#[derive(Clone, Debug)]
enum Step {
    Create {
        name: String,
        replicas: u32,
        gpus: u32,
        svc: bool,
    },
    Delete(String),
    Suspend(String),
    Resume(String),
    DeleteCopy(String, String),
    Outage(String),
    Return(String),
    Rotate(String),
    RestartScheduler,
    LeaderChange,
    RestartControllers,
    Cordon(String, String),
    Uncordon(String, String),
    CloseQueue,
    OpenQueue,
}

struct World {
    dev: tephra_devcluster::Handle,
    /// The administrator of the control plane: the users' and the world's steps.
    cp: kube::Client,
    /// Who the components run as.
    ids: Identities,
    /// Two scheduler replicas sharing a Lease: one leads, one stands by.
    scheds: Vec<tephra_kube::Running>,
    /// Replicas started so far (their identities are `s<n>`).
    replicas: usize,
    ctl: Vec<tokio::task::JoinHandle<()>>,
    jobs: BTreeMap<String, Expected>,
    deleted: BTreeSet<String>,
    down: BTreeSet<String>,
    /// Cordoned nodes (member, node) and when (Unix seconds).
    cordoned: BTreeMap<(String, String), i64>,
    /// Whether the `default` queue is closed, and the Jobs created since it was.
    closed: Option<BTreeSet<String>>,
    steps: Vec<String>,
}

fn job(name: &str, replicas: u32, gpus: u32, svc: bool) -> Job {
    let mut requests = json!({"cpu": "1"});
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    let mut j = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": replicas,
            "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": requests, "limits": requests}}]}}}]}
    });
    if svc {
        j["spec"]["plugins"] = json!({"svc": []});
    }
    serde_json::from_value(j).unwrap()
}

/// A Command as `vcctl queue operate` makes it.
fn queue_command(q: &tephra_api::Queue, action: &str) -> tephra_api::Command {
    let mut c = tephra_api::Command::default();
    c.metadata.generate_name = Some(format!("default-{}-", action.to_lowercase()));
    c.metadata.namespace = Some("default".into());
    c.fields.action = Some(action.into());
    c.fields.target = Some(
        serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "name": q.metadata.name, "uid": q.metadata.uid, "controller": true}))
        .unwrap(),
    );
    c
}

/// A scheduler replica `s<n>` on the control plane, electing its leader through a Lease (3 s,
/// renewed every second) in the release's namespace.
async fn replica(cp: &kube::Client, n: usize) -> tephra_kube::Running {
    let identity = format!("s{n}");
    let mut lease =
        tephra_kube::leader::LeaderOptions::new(helm::NS, "tephra-scheduler", &identity);
    lease.lease_duration = Duration::from_secs(3);
    lease.renew_deadline = Duration::from_secs(2);
    lease.retry_period = Duration::from_secs(1);
    let options = tephra_kube::Options {
        members: tephra_kube::MemberSource::Clusters,
        leader: Some(lease),
        identity,
        ..scheduler_options()
    };
    tephra_kube::start(cp.clone(), options).await.unwrap()
}

/// The job, PodGroup and queue controllers on the control plane.
fn controllers(cp: &kube::Client) -> Vec<tokio::task::JoinHandle<()>> {
    use tephra_kube::leader::Leadership;
    let mut ctl = tephra_kube::jobs::start(cp.clone(), Default::default(), Leadership::always());
    ctl.extend(tephra_kube::bare_pods::start(
        cp.clone(),
        Default::default(),
        Leadership::always(),
    ));
    ctl.extend(tephra_kube::queues::start(
        cp.clone(),
        Default::default(),
        Leadership::always(),
    ));
    ctl
}

/// Whether pod `p` is one of the job whose pods' names start with `prefix` (`<job>-`).
fn of_job(p: &Pod, prefix: &str) -> bool {
    p.metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with(prefix))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn command(job: &Job, action: &str) -> tephra_api::Command {
    common::command(job, action)
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i64 {
    let Some(q) = q else { return 0 };
    let s = q.0.as_str();
    match s.strip_suffix('m') {
        Some(milli) => milli.parse().unwrap_or(0),
        None => s.parse::<i64>().map(|v| v * 1000).unwrap_or(0),
    }
}

impl World {
    async fn start() -> Self {
        // Racks in every member: HyperNodes watched, and their status written, under the
        // chart's roles.
        let dev = fleet_with_racks(&[("east", 2), ("west", 8), ("north", 4)]).await;
        let cp = dev.client("control-plane").await.unwrap();
        let ids = under_chart_roles(&dev, &cp).await;
        let scheds = vec![
            replica(&ids.scheduler, 0).await,
            replica(&ids.scheduler, 1).await,
        ];
        let ctl = controllers(&ids.controllers);
        for s in &scheds {
            until_ready(s).await;
        }
        Self {
            dev,
            cp,
            ids,
            scheds,
            replicas: 2,
            ctl,
            jobs: BTreeMap::new(),
            deleted: BTreeSet::new(),
            down: BTreeSet::new(),
            cordoned: BTreeMap::new(),
            closed: None,
            steps: Vec::new(),
        }
    }

    fn jobs_api(&self) -> Api<Job> {
        Api::namespaced(self.cp.clone(), "default")
    }

    /// A step the model allows now.
    fn propose(&self, rng: &mut Rng, n: usize) -> Step {
        let live: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, e)| !e.suspended)
            .map(|(k, _)| k.clone())
            .collect();
        let suspended: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, e)| e.suspended)
            .map(|(k, _)| k.clone())
            .collect();
        let up: Vec<&str> = MEMBERS
            .iter()
            .copied()
            .filter(|m| !self.down.contains(*m))
            .collect();
        loop {
            let step = match rng.below(14) {
                0..=2 | 13 => Step::Create {
                    name: format!("j{n}"),
                    replicas: 1 + rng.below(3) as u32,
                    gpus: [0, 1, 2, 4][rng.below(4)],
                    svc: rng.below(2) == 0,
                },
                3 => match rng.pick(&self.jobs.keys().cloned().collect::<Vec<_>>()) {
                    Some(j) => Step::Delete(j.clone()),
                    None => continue,
                },
                4 => match rng.pick(&live) {
                    Some(j) => Step::Suspend(j.clone()),
                    None => continue,
                },
                5 => match rng.pick(&suspended) {
                    Some(j) => Step::Resume(j.clone()),
                    None => continue,
                },
                6 => match (rng.pick(&up), rng.pick(&live)) {
                    (Some(m), Some(j)) => Step::DeleteCopy((*m).to_string(), j.clone()),
                    _ => continue,
                },
                7 => match self.down.iter().next() {
                    Some(m) => Step::Return(m.clone()),
                    None => Step::Outage(MEMBERS[rng.below(3)].to_string()),
                },
                8 => match rng.pick(&up) {
                    Some(m) => Step::Rotate((*m).to_string()),
                    None => continue,
                },
                9 => match rng.below(2) {
                    0 => Step::RestartScheduler,
                    _ => Step::LeaderChange,
                },
                10 => Step::RestartControllers,
                11 => match self.cordoned.keys().next() {
                    Some((m, node)) if !self.down.contains(m) => {
                        Step::Uncordon(m.clone(), node.clone())
                    }
                    Some(_) => continue,
                    None => match rng.pick(&up) {
                        Some(m) => Step::Cordon((*m).to_string(), format!("{m}-{}", rng.below(2))),
                        None => continue,
                    },
                },
                _ => match self.closed {
                    Some(_) => Step::OpenQueue,
                    None => Step::CloseQueue,
                },
            };
            return step;
        }
    }

    async fn apply(&mut self, step: &Step) {
        self.steps.push(format!("{step:?}"));
        let pp = PostParams::default();
        match step {
            Step::Create {
                name,
                replicas,
                gpus,
                svc,
            } => {
                self.jobs_api()
                    .create(&pp, &job(name, *replicas, *gpus, *svc))
                    .await
                    .unwrap();
                if let Some(created) = self.closed.as_mut() {
                    created.insert(name.clone());
                }
                self.jobs.insert(
                    name.clone(),
                    Expected {
                        replicas: *replicas,
                        suspended: false,
                        disturbed: false,
                    },
                );
            }
            Step::Delete(name) => {
                self.jobs_api()
                    .delete(name, &DeleteParams::default())
                    .await
                    .unwrap();
                self.jobs.remove(name);
                self.deleted.insert(name.clone());
            }
            Step::Suspend(name) | Step::Resume(name) => {
                let j = self.jobs_api().get(name).await.unwrap();
                let (action, suspended) = match step {
                    Step::Suspend(_) => ("AbortJob", true),
                    _ => ("ResumeJob", false),
                };
                let commands: Api<tephra_api::Command> =
                    Api::namespaced(self.cp.clone(), "default");
                commands.create(&pp, &command(&j, action)).await.unwrap();
                if let Some(e) = self.jobs.get_mut(name) {
                    e.suspended = suspended;
                }
            }
            Step::DeleteCopy(member, name) => {
                let pods: Api<Pod> =
                    Api::namespaced(self.dev.client(member).await.unwrap(), "default");
                let prefix = format!("{name}-");
                let list = pods.list(&ListParams::default()).await.unwrap();
                if let Some(p) = list.items.iter().find(|p| of_job(p, &prefix)) {
                    let _ = pods
                        .delete(
                            p.metadata.name.as_deref().unwrap(),
                            &DeleteParams::default(),
                        )
                        .await;
                    if let Some(e) = self.jobs.get_mut(name) {
                        e.disturbed = true;
                    }
                }
            }
            Step::Outage(m) => {
                self.dev.stop_member(m).await.unwrap();
                self.down.insert(m.clone());
            }
            Step::Return(m) => {
                self.dev.restore_member(m).await.unwrap();
                self.down.remove(m);
            }
            Step::Rotate(m) => {
                // A rebuilt member: every token it issued is void; the new one is written
                // into the same Secret.
                let mut token = self.dev.rotate_member_token(m).unwrap();
                if let Some(account) = &self.ids.member_account {
                    let server = self.dev.server(m).unwrap();
                    token = server.service_account_entry(helm::NS, account).token;
                }
                set_member_token(&self.cp, m, &token).await;
            }
            Step::RestartScheduler => {
                for s in self.scheds.drain(..) {
                    s.stop().await;
                }
                for _ in 0..2 {
                    let s = replica(&self.ids.scheduler, self.replicas).await;
                    self.replicas += 1;
                    self.scheds.push(s);
                }
            }
            Step::LeaderChange => {
                // The leader goes (the first replica if none leads yet); a new one stands by.
                let i = self
                    .scheds
                    .iter()
                    .position(|s| s.leadership.is_leader())
                    .unwrap_or(0);
                if i < self.scheds.len() {
                    self.scheds.remove(i).stop().await;
                }
                let s = replica(&self.ids.scheduler, self.replicas).await;
                self.replicas += 1;
                self.scheds.push(s);
            }
            Step::RestartControllers => {
                for t in self.ctl.drain(..) {
                    t.abort();
                }
                self.ctl = controllers(&self.ids.controllers);
            }
            Step::Cordon(m, node) | Step::Uncordon(m, node) => {
                let cordon = matches!(step, Step::Cordon(..));
                let nodes: Api<k8s_openapi::api::core::v1::Node> =
                    Api::all(self.dev.client(m).await.unwrap());
                nodes
                    .patch(
                        node,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"unschedulable": cordon}})),
                    )
                    .await
                    .unwrap();
                if cordon {
                    self.cordoned.insert((m.clone(), node.clone()), unix_now());
                } else {
                    self.cordoned.remove(&(m.clone(), node.clone()));
                }
            }
            Step::CloseQueue | Step::OpenQueue => {
                let close = matches!(step, Step::CloseQueue);
                let queues: Api<tephra_api::Queue> = Api::all(self.cp.clone());
                let q = queues.get("default").await.unwrap();
                let action = if close { "CloseQueue" } else { "OpenQueue" };
                let commands: Api<tephra_api::Command> =
                    Api::namespaced(self.cp.clone(), "default");
                commands
                    .create(&pp, &queue_command(&q, action))
                    .await
                    .unwrap();
                self.closed = close.then(BTreeSet::new);
            }
        }
    }

    fn fail(&self, seed: u64, what: &str) -> ! {
        panic!(
            "seed {seed}: {what}\nsteps to replay it:\n  {}",
            self.steps.join("\n  ")
        );
    }

    async fn stop(mut self) {
        for s in self.scheds.drain(..) {
            s.stop().await;
        }
        for t in self.ctl.drain(..) {
            t.abort();
        }
    }
}

/// Waits until `settled` holds (up to `secs`), checking `always` on the way.
async fn settle(w: &World, seed: u64, secs: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Err(e) = w.always().await {
            w.fail(seed, &e);
        }
        match w.settled().await {
            Ok(()) => return,
            Err(e) if tokio::time::Instant::now() > deadline => w.fail(seed, &e),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

async fn run_seed(seed: u64, steps: usize) {
    let mut w = World::start().await;
    let mut rng = Rng::new(seed);
    for n in 0..steps {
        let step = w.propose(&mut rng, n);
        w.apply(&step).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Err(e) = w.always().await {
            w.fail(seed, &e);
        }
    }
    // Every member answers again and the queue is open, then the world must settle.
    for m in w.down.clone() {
        let step = Step::Return(m);
        w.apply(&step).await;
    }
    if w.closed.is_some() {
        w.apply(&Step::OpenQueue).await;
    }
    settle(&w, seed, 45).await;
    // What settling set in motion (a gang admitted once its queue opened) ends; then the
    // requests must die down to probes and resyncs, and the world still be settled.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let rate = w.quiet_rate().await;
        if rate <= QUIET_RATE {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            w.fail(
                seed,
                &format!("{rate:.1} requests a second at quiescence (at most {QUIET_RATE})"),
            );
        }
    }
    settle(&w, seed, 45).await;
    // Each member's rack shows its two nodes: the status write passed the chart's roles.
    for m in ["east", "west", "north"] {
        let hns: Api<tephra_api::HyperNode> = Api::all(w.dev.client(m).await.unwrap());
        let count = hns
            .get(&format!("{m}-rack"))
            .await
            .ok()
            .and_then(|h| h.status?.node_count);
        if count != Some(2) {
            w.fail(
                seed,
                &format!("HyperNode {m}-rack shows nodeCount {count:?}, not 2"),
            );
        }
    }
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_lifecycles_leave_nothing_behind_and_keep_gangs_whole() {
    logs();
    for seed in [1, 2] {
        run_seed(seed, 12).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "many seeds: TEPHRA_LIFECYCLE_SEEDS=500 cargo test -p tephra-kube --test lifecycle_random -- --ignored"]
async fn many_random_lifecycles() {
    logs();
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    // TEPHRA_LIFECYCLE_SEED=N replays one seed; TEPHRA_LIFECYCLE_SEEDS=N runs 1..=N (from
    // TEPHRA_LIFECYCLE_FROM, if given).
    let seeds = match var("TEPHRA_LIFECYCLE_SEED") {
        Some(one) => one..=one,
        None => {
            var("TEPHRA_LIFECYCLE_FROM").unwrap_or(1)..=var("TEPHRA_LIFECYCLE_SEEDS").unwrap_or(500)
        }
    };
    let started = std::time::Instant::now();
    for seed in seeds {
        run_seed(seed, 16).await;
        eprintln!(
            "lifecycle_random: seed {seed} passed ({} s so far)",
            started.elapsed().as_secs()
        );
    }
}
