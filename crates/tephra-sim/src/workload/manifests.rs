//! Volcano manifests (`workload.manifests`), in one file or many: Jobs, Queues, PodGroups with
//! the pods that name them (what an integration such as KubeRay or the Spark operator creates),
//! bare pods, PriorityClasses and Namespaces; CronJobs, JobFlows and JobTemplates, whose Jobs
//! the simulator makes as their controllers would, as time passes (`scheduled.rs`).
//!
//! Each CRD document is admitted as the API server would (schema and CEL rules), then checked
//! as the job controller would ([`tephra_api::checks`]). A Job becomes a gang through the job
//! controller's own planning function, a PodGroup and its pods through
//! [`tephra_controllers::members`]. A gang is submitted at its `tephra.io/sim-submit-at`
//! annotation and its pods run for `tephra.io/sim-duration` (on the pod, else on the Job or
//! PodGroup, else `workload.manifestDuration`).
//!
//! Refused, naming the file and document: two Jobs or PodGroups with the same namespace and
//! name (naming both places), a gang whose queue is neither under `queues` nor a Queue document
//! (it would wait forever), a PodGroup no pod names, and a pod naming a PodGroup that is not
//! there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tephra_api::well_known::{GROUP_NAME_ANNOTATION, SIM_DURATION, SIM_SUBMIT_AT};
use tephra_api::{PodGroup, Queue};
use tephra_controllers::job::GangPlan;
use tephra_scheduler::model::JobPolicy;

use super::explicit::Explicit;
use super::job::{SimJob, SimTask, VolcanoJob};
use crate::scenario::{Dur, Scenario, ScenarioError};

/// What the manifests hold: gangs to submit, and queues to create before anything runs.
pub struct Manifests {
    /// The gangs, by submission time.
    pub jobs: Explicit,
    /// Queue documents.
    pub queues: Vec<Queue>,
    /// PriorityClass documents: name and value.
    pub classes: BTreeMap<String, i32>,
    /// CronJobs, JobFlows and JobTemplates, and how their Jobs become gangs.
    pub scheduled: Scheduled,
}

/// CronJob, JobFlow and JobTemplate documents, and what turns the Jobs their controllers make
/// into gangs as the manifests' own Jobs are.
#[derive(Clone, Debug, Default)]
pub struct Scheduled {
    /// CronJobs, each with the document it came from.
    pub crons: Vec<(Origin, tephra_api::cronjob::CronJob)>,
    /// JobFlows, each with the document it came from and its submission time (ms).
    pub flows: Vec<(Origin, tephra_api::flow::JobFlow, i64)>,
    /// JobTemplates.
    pub templates: Vec<tephra_api::flow::JobTemplate>,
    /// The queues known (name → where declared) and PriorityClasses.
    queues: BTreeMap<String, String>,
    classes: BTreeMap<String, i32>,
}

impl Scheduled {
    /// The gang of a Job a CronJob or JobFlow made at `now_ms`, checked as the job controller
    /// checks it; `template_annotations` stand in for the Job's own when it has none (a
    /// JobTemplate's `tephra.io/sim-duration`).
    pub fn sim_job(
        &self,
        s: &Scenario,
        job: tephra_api::Job,
        now_ms: i64,
        origin: &str,
        template_annotations: &BTreeMap<String, String>,
    ) -> Result<SimJob, String> {
        let at = format!(
            "{origin}: job {}",
            job.metadata.name.as_deref().unwrap_or_default()
        );
        let problems = tephra_api::checks::job(&job);
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Err(format!("{at}: {}", list.join("; ")));
        }
        let plan = tephra_controllers::job::plan(&job).map_err(|e| format!("{at}: {e}"))?;
        let mut annotations = template_annotations.clone();
        annotations.extend(job.metadata.annotations.clone().unwrap_or_default());
        annotations.remove(SIM_SUBMIT_AT);
        let queues: BTreeMap<&str, String> = self
            .queues
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let mut sj = sim_job(
            s,
            Gang {
                origin: at,
                kind: "Job",
                plan,
                annotations,
                pod_durations: task_durations(&job),
                job: Some(VolcanoJob(Box::new(job))),
            },
            &queues,
            &self.classes,
        )?;
        sj.submit_ms = now_ms;
        Ok(sj)
    }
}

/// Where a document came from, for messages: `workload.manifests[i] (path) document d`.
type Origin = String;

/// A gang read from a Job or a PodGroup, before its timing is known.
struct Gang {
    origin: Origin,
    kind: &'static str,
    plan: GangPlan,
    annotations: BTreeMap<String, String>,
    /// Run time of a role's pods, when the pods carry it (PodGroups and bare pods).
    pod_durations: BTreeMap<String, String>,
    /// The Job, for a Volcano Job.
    job: Option<VolcanoJob>,
}

#[derive(Default)]
struct Docs {
    gangs: Vec<Gang>,
    queues: Vec<(Origin, Queue)>,
    groups: Vec<(Origin, PodGroup)>,
    pods: Vec<(Origin, Pod)>,
    classes: BTreeMap<String, (Origin, i32)>,
    scheduled: Scheduled,
}

fn str_of<'a>(doc: &'a Value, key: &str) -> &'a str {
    doc.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Reads every manifest of the scenario.
pub fn manifests(s: &Scenario) -> Result<Manifests, ScenarioError> {
    let err = |message: String| ScenarioError::Invalid {
        path: s.source.clone(),
        message,
    };
    let admission =
        tephra_api::admission::Admission::new().map_err(|e| err(format!("CRDs: {e}")))?;
    let mut docs = Docs::default();
    for (i, rel) in s.workload.manifests.iter().enumerate() {
        let path = s.resolve(rel);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| err(format!("workload.manifests[{i}]: {}: {e}", path.display())))?;
        let values: Vec<Value> = serde_saphyr::from_str_multiple(&text)
            .map_err(|e| err(format!("workload.manifests[{i}] ({rel}): {e}")))?;
        for (d, doc) in values.into_iter().enumerate().filter(|(_, d)| !d.is_null()) {
            let at = format!("workload.manifests[{i}] ({rel}) document {d}");
            read_doc(&admission, doc, at, &mut docs).map_err(err)?;
        }
    }
    build(s, docs).map_err(err)
}

fn read_doc(
    admission: &tephra_api::admission::Admission,
    doc: Value,
    at: Origin,
    docs: &mut Docs,
) -> Result<(), String> {
    let group = str_of(&doc, "apiVersion")
        .rsplit_once('/')
        .map_or("", |(g, _)| g);
    match (group, str_of(&doc, "kind")) {
        // A Namespace shipped with a manifest has nothing to simulate.
        ("", "Namespace") => {}
        ("scheduling.k8s.io", "PriorityClass") => {
            let name = doc
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{at}: metadata.name: required"))?;
            let value = doc
                .get("value")
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| format!("{at}: value: required, a 32-bit integer"))?;
            docs.classes.insert(name.to_string(), (at, value));
        }
        ("", "Pod") => {
            let pod: Pod = serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            docs.pods.push((at, pod));
        }
        ("batch.volcano.sh", "Job") => {
            admission.admit(&doc).map_err(|e| format!("{at}: {e}"))?;
            let job: tephra_api::Job =
                serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            let problems = tephra_api::checks::job(&job);
            if !problems.is_empty() {
                let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
                return Err(format!("{at}: {}", list.join("; ")));
            }
            let plan = tephra_controllers::job::plan(&job).map_err(|e| format!("{at}: {e}"))?;
            docs.gangs.push(Gang {
                origin: at,
                kind: "Job",
                plan,
                annotations: job.metadata.annotations.clone().unwrap_or_default(),
                pod_durations: task_durations(&job),
                job: Some(VolcanoJob(Box::new(job))),
            });
        }
        ("scheduling.volcano.sh", "Queue") => {
            admission.admit(&doc).map_err(|e| format!("{at}: {e}"))?;
            let queue: Queue = serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            docs.queues.push((at, queue));
        }
        ("batch.volcano.sh", "CronJob") => {
            admission.admit(&doc).map_err(|e| format!("{at}: {e}"))?;
            let c = serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            docs.scheduled.crons.push((at, c));
        }
        ("flow.volcano.sh", "JobFlow") => {
            admission.admit(&doc).map_err(|e| format!("{at}: {e}"))?;
            let f: tephra_api::flow::JobFlow =
                serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            let submit = match f
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIM_SUBMIT_AT))
            {
                Some(v) => {
                    Dur::parse(v)
                        .map_err(|e| format!("{at}: metadata.annotations[{SIM_SUBMIT_AT}]: {e}"))?
                        .0
                }
                None => 0,
            };
            docs.scheduled.flows.push((at, f, submit));
        }
        ("flow.volcano.sh", "JobTemplate") => {
            admission.admit(&doc).map_err(|e| format!("{at}: {e}"))?;
            let t = serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            docs.scheduled.templates.push(t);
        }
        ("scheduling.volcano.sh", "PodGroup") => {
            admission.admit(&doc).map_err(|e| format!("{at}: {e}"))?;
            let pg: PodGroup = serde_json::from_value(doc).map_err(|e| format!("{at}: {e}"))?;
            docs.groups.push((at, pg));
        }
        (_, kind) => {
            return Err(format!(
                "{at}: kind {kind:?} ({}) is not simulated: give Job, CronJob, JobFlow, \
                 JobTemplate, Queue, PodGroup, Pod, PriorityClass or Namespace documents",
                str_of(&doc, "apiVersion")
            ));
        }
    }
    Ok(())
}

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The run time each task's pod template of a Job carries, by task.
fn task_durations(job: &tephra_api::Job) -> BTreeMap<String, String> {
    job.spec
        .tasks
        .iter()
        .filter_map(|t| {
            let v = t
                .template
                .metadata
                .as_ref()?
                .annotations
                .as_ref()?
                .get(SIM_DURATION)?;
            Some((t.name.clone().unwrap_or_default(), v.clone()))
        })
        .collect()
}

/// The run time each role's pods carry (the first pod of a role that gives one).
fn pod_durations(pods: &[&Pod]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in pods {
        if let Some(v) = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIM_DURATION))
        {
            out.entry(tephra_controllers::members::role(p))
                .or_insert_with(|| v.clone());
        }
    }
    out
}

/// Pairs PodGroups with their pods, checks names and queues, and times every gang.
fn build(s: &Scenario, mut docs: Docs) -> Result<Manifests, String> {
    // PodGroups and the pods that name them; pods naming none get a gang of their own.
    let mut members: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut alone = Vec::new();
    for (k, (at, p)) in docs.pods.iter().enumerate() {
        let group = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GROUP_NAME_ANNOTATION));
        match group {
            Some(g) => {
                let ns = p.metadata.namespace.as_deref().unwrap_or("default");
                let key = format!("{ns}/{g}");
                if !docs
                    .groups
                    .iter()
                    .any(|(_, pg)| ns_name(&pg.metadata) == key)
                {
                    return Err(format!(
                        "{at}: metadata.annotations[{GROUP_NAME_ANNOTATION}]: PodGroup {key} is \
                         not in the manifests"
                    ));
                }
                members.entry(key).or_default().push(k);
            }
            None => alone.push(k),
        }
    }
    for (at, pg) in &docs.groups {
        let key = ns_name(&pg.metadata);
        let pods: Vec<&Pod> = members
            .get(&key)
            .map(|list| list.iter().map(|&k| &docs.pods[k].1).collect())
            .unwrap_or_default();
        if pods.is_empty() {
            return Err(format!(
                "{at}: PodGroup {key}: no pod in the manifests names it (pods carry the \
                 annotation {GROUP_NAME_ANNOTATION}: {})",
                pg.metadata.name.as_deref().unwrap_or_default()
            ));
        }
        let plan =
            tephra_controllers::members::plan(pg, &pods).map_err(|e| format!("{at}: {e}"))?;
        let total: u32 = plan.tasks.iter().map(|t| t.replicas).sum();
        if plan.min_member > total {
            return Err(format!(
                "{at}: spec.minMember: {} but only {total} pod(s) in the manifests name \
                 PodGroup {key}; the gang would wait forever",
                plan.min_member
            ));
        }
        docs.gangs.push(Gang {
            origin: at.clone(),
            kind: "PodGroup",
            plan,
            annotations: pg.metadata.annotations.clone().unwrap_or_default(),
            pod_durations: pod_durations(&pods),
            job: None,
        });
    }
    for k in alone {
        let (at, p) = &docs.pods[k];
        let plan = tephra_controllers::members::standalone(p).map_err(|e| format!("{at}: {e}"))?;
        docs.gangs.push(Gang {
            origin: at.clone(),
            kind: "Pod",
            plan,
            annotations: p.metadata.annotations.clone().unwrap_or_default(),
            pod_durations: pod_durations(&[p]),
            job: None,
        });
    }

    // Names: one gang per namespace and name, one queue per name.
    let mut seen: BTreeMap<String, (&str, &str)> = BTreeMap::new();
    for g in &docs.gangs {
        let key = format!("{}/{}", g.plan.namespace, g.plan.name);
        if let Some((kind, first)) = seen.insert(key.clone(), (g.kind, &g.origin)) {
            return Err(format!(
                "{}: {} {key} is already defined as a {kind} in {first}",
                g.origin, g.kind
            ));
        }
    }
    let mut queues: BTreeMap<&str, String> = s
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| (q.name.as_str(), format!("queues[{i}]")))
        .collect();
    for (at, q) in &docs.queues {
        let name = q.metadata.name.as_deref().unwrap_or_default();
        if let Some(first) = queues.insert(name, at.clone()) {
            return Err(format!(
                "{at}: Queue {name:?} is already defined in {first}"
            ));
        }
        let problems = tephra_api::checks::queue(q);
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Err(format!("{at}: {}", list.join("; ")));
        }
    }
    // With manifests, the queues of the scenario's other jobs are checked here.
    for (field, q) in crate::scenario::check::named_queues(s) {
        if !queues.contains_key(q) && !["default", "root"].contains(&q) {
            return Err(format!(
                "{field}: unknown queue {q:?} (declare it under queues, or ship a Queue \
                 document in workload.manifests)"
            ));
        }
    }
    let mut classes = s.scheduler.priority_classes.clone();
    for (name, (at, value)) in &docs.classes {
        match classes.insert(name.clone(), *value) {
            Some(old) if old != *value => {
                return Err(format!(
                    "{at}: PriorityClass {name:?} has value {value}, but \
                     scheduler.priorityClasses gives it {old}"
                ));
            }
            _ => {}
        }
    }

    let mut jobs = Vec::new();
    for g in docs.gangs {
        jobs.push(sim_job(s, g, &queues, &classes)?);
    }
    let mut scheduled = docs.scheduled;
    scheduled.queues = queues
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    scheduled.classes = classes.clone();
    check_scheduled(s, &scheduled)?;
    Ok(Manifests {
        scheduled,
        jobs: Explicit::new(jobs),
        queues: docs.queues.into_iter().map(|(_, q)| q).collect(),
        classes: docs
            .classes
            .into_iter()
            .map(|(name, (_, value))| (name, value))
            .collect(),
    })
}

fn sim_job(
    s: &Scenario,
    g: Gang,
    queues: &BTreeMap<&str, String>,
    classes: &BTreeMap<String, i32>,
) -> Result<SimJob, String> {
    let at = &g.origin;
    let plan = g.plan;
    if !queues.contains_key(plan.queue.as_str()) && !["default", "root"].contains(&&*plan.queue) {
        return Err(format!(
            "{at}: spec.queue: queue {:?} is not declared: add it under queues or ship a Queue \
             document (a gang in a missing queue would wait forever)",
            plan.queue
        ));
    }
    let dur = |field: &str, v: &str| Dur::parse(v).map_err(|e| format!("{at}: {field}: {e}"));
    let submit = match g.annotations.get(SIM_SUBMIT_AT) {
        Some(v) => dur(&format!("metadata.annotations[{SIM_SUBMIT_AT}]"), v)?,
        None => Dur(0),
    };
    let own = match g.annotations.get(SIM_DURATION) {
        Some(v) => Some(dur(&format!("metadata.annotations[{SIM_DURATION}]"), v)?),
        None => s.workload.manifest_duration,
    };
    let priority = match &plan.priority_class {
        None => 0,
        Some(c) => *classes.get(c).ok_or_else(|| {
            format!(
                "{at}: spec.priorityClassName: unknown class {c:?} (declare it under \
                 scheduler.priorityClasses or ship a PriorityClass document)"
            )
        })?,
    };
    let mut tasks = Vec::new();
    for t in &plan.tasks {
        // A task split off its role for another shape is named `<role>-<n>`.
        let by_role = g.pod_durations.get(&t.name).or_else(|| {
            t.name
                .rsplit_once('-')
                .and_then(|(role, _)| g.pod_durations.get(role))
        });
        let duration = match by_role {
            Some(v) => dur(&format!("pods of {}: annotation {SIM_DURATION}", t.name), v)?,
            None => own.ok_or_else(|| {
                format!(
                    "{at}: metadata.annotations[{SIM_DURATION}]: required, e.g. \"2h\" (or set \
                     workload.manifestDuration)"
                )
            })?,
        };
        tasks.push(SimTask {
            role: t.name.clone(),
            replicas: t.replicas,
            min: Some(t.min_available),
            request: t
                .requests
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
            duration_ms: duration.0,
            node_selector: t.node_selector.clone(),
            affinity: t.affinity.clone(),
            tolerations: t.tolerations.clone(),
        });
    }
    Ok(SimJob {
        namespace: plan.namespace.clone(),
        name: plan.name.clone(),
        queue: plan.queue.clone(),
        submit_ms: submit.0,
        priority,
        min_member: Some(plan.min_member),
        tasks,
        policy: JobPolicy::default(),
        topology: plan.topology.clone(),
        plan: Some(Box::new(plan)),
        volcano: g.job,
    })
}

/// What would only fail later, refused now naming the document: a CronJob in a run without an
/// end (it never stops), a CronJob's template or a JobFlow's JobTemplate that makes no gang.
fn check_scheduled(s: &Scenario, sc: &Scheduled) -> Result<(), String> {
    for (at, c) in &sc.crons {
        if s.run.until.is_none() {
            return Err(format!(
                "{at}: a CronJob makes Jobs for ever: set run.until to end the run"
            ));
        }
        let spec = c
            .spec
            .job_template
            .spec
            .clone()
            .ok_or_else(|| format!("{at}: spec.jobTemplate.spec: required"))?;
        let mut job = tephra_api::Job::new(c.metadata.name.as_deref().unwrap_or_default(), spec);
        job.metadata.namespace = c.metadata.namespace.clone();
        let meta = c.spec.job_template.metadata.clone().unwrap_or_default();
        job.metadata.annotations = meta.annotations;
        sc.sim_job(s, job, 0, at, &BTreeMap::new())
            .map_err(|e| format!("{e} (spec.jobTemplate)"))?;
    }
    for (at, f, _) in &sc.flows {
        for step in &f.spec.flows {
            let ns = f.metadata.namespace.as_deref().unwrap_or("default");
            let Some(t) = sc.templates.iter().find(|t| {
                t.metadata.name.as_deref() == Some(step.name.as_str())
                    && t.metadata.namespace.as_deref().unwrap_or("default") == ns
            }) else {
                return Err(format!(
                    "{at}: spec.flows[{}]: no JobTemplate {ns}/{} among the manifests",
                    step.name, step.name
                ));
            };
            let mut job = tephra_api::Job::new(&step.name, t.spec.0.clone());
            job.metadata.namespace = Some(ns.to_string());
            sc.sim_job(s, job, 0, at, &template_annotations(t))?;
        }
    }
    Ok(())
}

/// A JobTemplate's annotations (its `tephra.io/sim-duration` times the Jobs made from it).
pub fn template_annotations(t: &tephra_api::flow::JobTemplate) -> BTreeMap<String, String> {
    t.metadata.annotations.clone().unwrap_or_default()
}
