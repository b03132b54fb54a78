//! Volcano's JobFlow controller, as one pure step: given a JobFlow, the JobTemplates of its
//! namespace, the Jobs it made and the controller manager's clock, what to write. The runtime
//! reads the objects, calls [`sync`] and carries the plan out.
//!
//! Each flow makes one Job, `<jobflow>-<flow>`, from the JobTemplate named like the flow (its
//! `patch.jobSpec` merged over the template's spec as a JSON merge patch), labelled and
//! annotated with the template and the flow that made it and owned by the JobFlow, once every
//! flow its `dependsOn.targets` names has a Completed Job. Volcano's controller evaluates no
//! probes, and neither does this one: a flow with a probe waits for its targets only, and a
//! Warning says so. A Job that fails or is terminated fails the flow: nothing more is started,
//! and what runs runs on. When every flow's Job completed the flow has succeeded, and under
//! `jobRetainPolicy: delete` its Jobs are deleted then. The status lists the Jobs by phase,
//! with each Job's history and condition, as Volcano's does.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use tephra_api::Job;
use tephra_api::batch::{JobPhase, JobSpec};
pub use tephra_api::flow::{CREATED_BY_FLOW, CREATED_BY_TEMPLATE, job_name};
use tephra_api::flow::{
    FlowCondition, FlowJobStatus, FlowPhase, FlowState, JobFlow, JobFlowStatus, JobRunningHistory,
    JobTemplate, RetainPolicy, TaskPhaseCount,
};

/// An Event for the JobFlow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// What one step writes.
#[derive(Clone, Debug, Default)]
pub struct FlowPlan {
    /// The status to write, when it changed.
    pub status: Option<JobFlowStatus>,
    /// Jobs to create.
    pub create: Vec<Job>,
    /// Jobs to delete (the flow succeeded under `jobRetainPolicy: delete`), by name.
    pub delete: Vec<String>,
    /// Events to record.
    pub events: Vec<FlowEvent>,
}

/// `<namespace>.<name>`, as the labels name a template or a flow.
pub fn object_string(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// A Job phase as Volcano spells it.
fn phase_text(p: JobPhase) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn phase_of(job: &Job) -> Option<JobPhase> {
    job.status.as_ref()?.state.phase
}

fn warning(reason: &'static str, message: String) -> FlowEvent {
    FlowEvent {
        type_: "Warning",
        reason,
        message,
    }
}

/// Whether `jobs` holds a Job of `jobflow`'s own (by name, made by it).
fn find<'a>(jobs: &'a [Job], name: &str) -> Option<&'a Job> {
    jobs.iter()
        .find(|j| j.metadata.name.as_deref() == Some(name))
}

/// One step of the JobFlow controller at `now`: `templates` are the JobTemplates of the
/// JobFlow's namespace, `jobs` the Jobs it made.
pub fn sync(flow: &JobFlow, templates: &[JobTemplate], jobs: &[Job], now: Timestamp) -> FlowPlan {
    let mut plan = FlowPlan::default();
    let name = flow.metadata.name.clone().unwrap_or_default();
    let ns = flow.metadata.namespace.clone().unwrap_or_default();
    let was = flow
        .status
        .as_ref()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.phase)
        .unwrap_or(FlowPhase::Pending);

    if was == FlowPhase::Succeed {
        if flow.spec.job_retain_policy == Some(RetainPolicy::Delete) {
            plan.delete = jobs
                .iter()
                .filter(|j| j.metadata.deletion_timestamp.is_none())
                .filter_map(|j| j.metadata.name.clone())
                .collect();
        }
        return plan;
    }

    let cycle = cycle(flow);
    if let Some(cycle) = &cycle {
        plan.events.push(warning(
            "DependencyCycle",
            format!(
                "spec.flows[].dependsOn.targets make a cycle ({}): those flows never start",
                cycle.join(" -> ")
            ),
        ));
    }
    // Start each flow whose targets completed; none once a Job of the flow failed or was
    // terminated (even before the status says Failed).
    let failing = jobs
        .iter()
        .any(|j| matches!(phase_of(j), Some(JobPhase::Failed | JobPhase::Terminated)));
    if !failing && !matches!(was, FlowPhase::Failed | FlowPhase::Terminating) {
        for step in &flow.spec.flows {
            let job = job_name(&name, &step.name);
            if find(jobs, &job).is_some() {
                continue;
            }
            let depends = step.depends_on.as_ref();
            if depends.is_some_and(|d| d.probe.is_some()) {
                plan.events.push(warning(
                    "ProbeNotEvaluated",
                    format!(
                        "flow {:?}: dependsOn.probe is not evaluated (as in Volcano's controller); it waits for its targets only",
                        step.name
                    ),
                ));
            }
            let ready = depends
                .map(|d| d.targets.as_slice())
                .unwrap_or_default()
                .iter()
                .all(|t| {
                    find(jobs, &job_name(&name, t)).and_then(phase_of) == Some(JobPhase::Completed)
                });
            if !ready {
                continue;
            }
            let Some(template) = templates
                .iter()
                .find(|t| t.metadata.name.as_deref() == Some(step.name.as_str()))
            else {
                plan.events.push(warning(
                    "TemplateNotFound",
                    format!(
                        "flow {:?}: no JobTemplate {ns}/{} to make its job from",
                        step.name, step.name
                    ),
                ));
                continue;
            };
            let spec = match patched(
                &template.spec.0,
                step.patch.as_ref().and_then(|p| p.job_spec.as_ref()),
            ) {
                Ok(spec) => spec,
                Err(e) => {
                    plan.events.push(warning(
                        "InvalidPatch",
                        format!("flow {:?}: spec.flows[].patch.jobSpec: {e}", step.name),
                    ));
                    continue;
                }
            };
            plan.events.push(FlowEvent {
                type_: "Normal",
                reason: "Created",
                message: format!("Created job {job} from JobTemplate {}", step.name),
            });
            plan.create
                .push(job_for(flow, &name, &ns, &step.name, spec));
        }
    }

    let status = status(flow, jobs, &plan.create, was, now);
    let to = status.state.as_ref().and_then(|s| s.phase);
    if to != Some(was) {
        let (reason, message) = match to {
            Some(FlowPhase::Failed) => (
                "Failed",
                format!(
                    "job(s) {} failed or were terminated: no further flow starts",
                    [status.failed_jobs.clone(), status.terminated_jobs.clone()]
                        .concat()
                        .join(", ")
                ),
            ),
            Some(FlowPhase::Succeed) => ("Succeed", "every flow's job completed".to_string()),
            Some(FlowPhase::Running) => ("Running", "a job of the flow runs".to_string()),
            _ => ("Pending", "no job of the flow runs yet".to_string()),
        };
        plan.events.push(FlowEvent {
            type_: if to == Some(FlowPhase::Failed) {
                "Warning"
            } else {
                "Normal"
            },
            reason,
            message,
        });
    }
    if flow.status.as_ref() != Some(&status) {
        plan.status = Some(status);
    }
    plan
}

/// A cycle of flows through their `dependsOn.targets`, if there is one (the CRD refuses a flow
/// that names itself; a longer cycle is found here).
fn cycle(flow: &JobFlow) -> Option<Vec<String>> {
    let targets = |n: &str| -> Vec<String> {
        flow.spec
            .flows
            .iter()
            .find(|f| f.name == n)
            .and_then(|f| f.depends_on.as_ref())
            .map(|d| d.targets.clone())
            .unwrap_or_default()
    };
    // Depth-first, each flow once: 0 unseen, 1 on the path, 2 done.
    let mut mark: BTreeMap<String, u8> = BTreeMap::new();
    fn visit(
        n: &str,
        targets: &dyn Fn(&str) -> Vec<String>,
        mark: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match mark.get(n) {
            Some(2) => return None,
            Some(1) => {
                let from = path.iter().position(|p| p == n).unwrap_or(0);
                let mut c = path[from..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        mark.insert(n.to_string(), 1);
        path.push(n.to_string());
        for t in targets(n) {
            if let Some(c) = visit(&t, targets, mark, path) {
                return Some(c);
            }
        }
        path.pop();
        mark.insert(n.to_string(), 2);
        None
    }
    flow.spec
        .flows
        .iter()
        .find_map(|f| visit(&f.name, &targets, &mut mark, &mut Vec::new()))
}

/// The template's spec with `patch` merged over it (RFC 7386).
fn patched(
    spec: &JobSpec,
    patch: Option<&serde_json::Value>,
) -> Result<JobSpec, serde_json::Error> {
    let Some(patch) = patch else {
        return Ok(spec.clone());
    };
    let mut doc = serde_json::to_value(spec)?;
    json_patch::merge(&mut doc, patch);
    serde_json::from_value(doc)
}

/// The Job for flow `step`, owned by the JobFlow and marked with what made it.
fn job_for(flow: &JobFlow, name: &str, ns: &str, step: &str, spec: JobSpec) -> Job {
    let marks = BTreeMap::from([
        (CREATED_BY_TEMPLATE.to_string(), object_string(ns, step)),
        (CREATED_BY_FLOW.to_string(), object_string(ns, name)),
    ]);
    let mut job = Job::new(&job_name(name, step), spec);
    job.metadata = ObjectMeta {
        name: Some(job_name(name, step)),
        namespace: Some(ns.to_string()),
        labels: Some(marks.clone()),
        annotations: Some(marks),
        owner_references: Some(vec![OwnerReference {
            api_version: "flow.volcano.sh/v1alpha1".into(),
            kind: "JobFlow".into(),
            name: name.into(),
            uid: flow.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    };
    job
}

/// The flow's status from its Jobs (those just planned count as Pending): the Jobs by phase,
/// each Job's history (a new entry when its phase changed, the last one closed at `now`) and
/// condition, and the phase.
fn status(
    flow: &JobFlow,
    jobs: &[Job],
    new: &[Job],
    was: FlowPhase,
    now: Timestamp,
) -> JobFlowStatus {
    let old = flow.status.clone().unwrap_or_default();
    let mut s = JobFlowStatus {
        job_status_list: old.job_status_list.clone(),
        ..JobFlowStatus::default()
    };
    let mut all: Vec<(&Job, Option<JobPhase>)> = jobs.iter().map(|j| (j, phase_of(j))).collect();
    all.extend(new.iter().map(|j| (j, Some(JobPhase::Pending))));
    all.sort_by(|a, b| a.0.metadata.name.cmp(&b.0.metadata.name));
    for (job, phase) in all {
        let job_name = job.metadata.name.clone().unwrap_or_default();
        match phase {
            Some(JobPhase::Pending) => s.pending_jobs.push(job_name.clone()),
            Some(JobPhase::Running) => s.running_jobs.push(job_name.clone()),
            Some(JobPhase::Completed) => s.completed_jobs.push(job_name.clone()),
            Some(JobPhase::Failed) => s.failed_jobs.push(job_name.clone()),
            Some(JobPhase::Terminated) => s.terminated_jobs.push(job_name.clone()),
            // Completing and Terminating are counted nowhere but in the conditions, as in
            // Volcano; the rest are unknown to a flow.
            Some(JobPhase::Completing | JobPhase::Terminating) => {}
            _ => s.unknown_jobs.push(job_name.clone()),
        }
        let js = job.status.as_ref();
        let created = job.metadata.creation_timestamp.clone();
        let state = phase.map(phase_text);
        s.conditions.insert(
            job_name.clone(),
            FlowCondition {
                phase: state.clone(),
                create_time: created.clone(),
                running_duration: js.and_then(|st| st.running_duration.clone()),
                task_status_count: js
                    .map(|st| {
                        st.task_status_count
                            .iter()
                            .map(|(k, v)| {
                                (
                                    k.clone(),
                                    TaskPhaseCount {
                                        phase: v.phase.clone(),
                                    },
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        );
        let end = created
            .as_ref()
            .zip(
                js.and_then(|st| st.running_duration.as_deref())
                    .and_then(go_duration),
            )
            .and_then(|(c, d)| c.0.checked_add(d).ok())
            .map(Time);
        let entry = FlowJobStatus {
            name: Some(job_name.clone()),
            state: state.clone(),
            start_timestamp: created,
            end_timestamp: end,
            restart_count: Some(js.map_or(0, |st| st.retry_count)),
            running_histories: Vec::new(),
        };
        let i = match s
            .job_status_list
            .iter()
            .position(|e| e.name.as_deref() == Some(&job_name))
        {
            Some(i) => i,
            None => {
                s.job_status_list.push(FlowJobStatus::default());
                s.job_status_list.len() - 1
            }
        };
        let mut histories = std::mem::take(&mut s.job_status_list[i].running_histories);
        if state.is_some() && histories.last().map(|h| &h.state) != Some(&state) {
            if let Some(last) = histories.last_mut() {
                last.end_timestamp = Some(Time(now));
            }
            histories.push(JobRunningHistory {
                start_timestamp: Some(Time(now)),
                end_timestamp: None,
                state: state.clone(),
            });
        }
        s.job_status_list[i] = FlowJobStatus {
            running_histories: histories,
            ..entry
        };
    }
    let flows = flow.spec.flows.len();
    let phase =
        if !s.failed_jobs.is_empty() || !s.terminated_jobs.is_empty() || was == FlowPhase::Failed {
            FlowPhase::Failed
        } else if flows > 0 && s.completed_jobs.len() == flows {
            FlowPhase::Succeed
        } else if !s.running_jobs.is_empty() || !s.completed_jobs.is_empty() {
            FlowPhase::Running
        } else {
            FlowPhase::Pending
        };
    s.state = Some(FlowState { phase: Some(phase) });
    s
}

/// A Go duration (`1h2m3.5s`), as a Job's `runningDuration` is written.
fn go_duration(text: &str) -> Option<jiff::SignedDuration> {
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (num, tail) = rest.split_at(end);
        let value: f64 = num.parse().ok()?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = next;
    }
    jiff::SignedDuration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tephra_api::flow::JobTemplateSpec;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn template(name: &str) -> JobTemplate {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "queue": "default", "minAvailable": 1,
            "tasks": [{"name": "w", "replicas": 1,
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}))
        .unwrap();
        let mut t = JobTemplate::new(name, JobTemplateSpec(spec));
        t.metadata.namespace = Some("ml".into());
        t
    }

    /// A JobFlow of `(flow, targets)`, with `extra` in its spec.
    fn jobflow(flows: &[(&str, &[&str])], extra: serde_json::Value) -> JobFlow {
        let flows: Vec<serde_json::Value> = flows
            .iter()
            .map(|(n, t)| {
                if t.is_empty() {
                    serde_json::json!({"name": n})
                } else {
                    serde_json::json!({"name": n, "dependsOn": {"targets": t}})
                }
            })
            .collect();
        let mut spec = serde_json::json!({"flows": flows});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": "pipe", "namespace": "ml", "uid": "jf-uid"},
            "spec": spec}))
        .unwrap()
    }

    /// The runtime's part: the plan carried out.
    fn apply(f: &mut JobFlow, jobs: &mut Vec<Job>, plan: &FlowPlan, now: Timestamp) {
        jobs.retain(|j| !plan.delete.contains(j.metadata.name.as_ref().unwrap()));
        if let Some(s) = &plan.status {
            f.status = Some(s.clone());
        }
        for job in &plan.create {
            let mut job = job.clone();
            job.metadata.creation_timestamp = Some(Time(now));
            jobs.push(job);
        }
    }

    fn set_phase(jobs: &mut [Job], name: &str, phase: JobPhase) {
        let job = jobs
            .iter_mut()
            .find(|j| j.metadata.name.as_deref() == Some(name))
            .unwrap();
        let mut status: tephra_api::JobStatus =
            serde_json::from_value(serde_json::json!({})).unwrap();
        status.state.phase = Some(phase);
        job.status = Some(status);
    }

    fn names(plan: &FlowPlan) -> Vec<String> {
        plan.create
            .iter()
            .map(|j| j.metadata.name.clone().unwrap())
            .collect()
    }

    fn phase(f: &JobFlow) -> Option<FlowPhase> {
        f.status.as_ref()?.state.as_ref()?.phase
    }

    fn reasons(p: &FlowPlan) -> Vec<&'static str> {
        p.events.iter().map(|e| e.reason).collect()
    }

    #[test]
    fn a_flow_starts_each_job_once_its_targets_completed_and_a_failed_middle_job_stops_the_rest() {
        let templates = [template("prep"), template("train"), template("eval")];
        let mut f = jobflow(
            &[("prep", &[]), ("train", &["prep"]), ("eval", &["train"])],
            serde_json::json!({}),
        );
        let mut jobs = Vec::new();
        let now = at("2026-12-01T10:00:00Z");
        let p = sync(&f, &templates, &jobs, now);
        assert_eq!(names(&p), ["pipe-prep"]);
        let job = &p.create[0];
        assert_eq!(
            job.metadata.labels.as_ref().unwrap()[CREATED_BY_TEMPLATE],
            "ml.prep"
        );
        assert_eq!(
            job.metadata.annotations.as_ref().unwrap()[CREATED_BY_FLOW],
            "ml.pipe"
        );
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("JobFlow", "jf-uid")
        );
        apply(&mut f, &mut jobs, &p, now);
        assert_eq!(phase(&f), Some(FlowPhase::Pending));
        assert_eq!(f.status.as_ref().unwrap().pending_jobs, ["pipe-prep"]);

        set_phase(&mut jobs, "pipe-prep", JobPhase::Running);
        let p = sync(&f, &templates, &jobs, now);
        assert!(p.create.is_empty(), "train waits for prep to complete");
        apply(&mut f, &mut jobs, &p, now);
        assert_eq!(phase(&f), Some(FlowPhase::Running));

        set_phase(&mut jobs, "pipe-prep", JobPhase::Completed);
        let p = sync(&f, &templates, &jobs, now);
        assert_eq!(names(&p), ["pipe-train"]);
        apply(&mut f, &mut jobs, &p, now);

        set_phase(&mut jobs, "pipe-train", JobPhase::Failed);
        let p = sync(&f, &templates, &jobs, now);
        assert!(p.create.is_empty(), "{:?}", names(&p));
        assert!(reasons(&p).contains(&"Failed"), "{:?}", reasons(&p));
        apply(&mut f, &mut jobs, &p, now);
        let s = f.status.clone().unwrap();
        assert_eq!(phase(&f), Some(FlowPhase::Failed));
        assert_eq!(
            (s.completed_jobs, s.failed_jobs),
            (
                vec!["pipe-prep".to_string()],
                vec!["pipe-train".to_string()]
            )
        );
        // Failed stays failed, and nothing more starts.
        set_phase(&mut jobs, "pipe-train", JobPhase::Completed);
        let p = sync(&f, &templates, &jobs, now);
        assert!(p.create.is_empty());
        assert_eq!(
            p.status.and_then(|s| s.state).and_then(|s| s.phase),
            Some(FlowPhase::Failed)
        );
    }

    #[test]
    fn a_flow_whose_jobs_all_completed_succeeds_and_deletes_them_under_retain_policy_delete() {
        let templates = [template("a"), template("b")];
        for (policy, deletes) in [("retain", false), ("delete", true)] {
            let mut f = jobflow(
                &[("a", &[]), ("b", &[])],
                serde_json::json!({"jobRetainPolicy": policy}),
            );
            let mut jobs = Vec::new();
            let now = at("2026-12-01T10:00:00Z");
            let p = sync(&f, &templates, &jobs, now);
            assert_eq!(
                names(&p),
                ["pipe-a", "pipe-b"],
                "independent flows start together"
            );
            apply(&mut f, &mut jobs, &p, now);
            set_phase(&mut jobs, "pipe-a", JobPhase::Completed);
            set_phase(&mut jobs, "pipe-b", JobPhase::Completed);
            let p = sync(&f, &templates, &jobs, now);
            assert!(reasons(&p).contains(&"Succeed"));
            apply(&mut f, &mut jobs, &p, now);
            assert_eq!(phase(&f), Some(FlowPhase::Succeed));
            let p = sync(&f, &templates, &jobs, now);
            assert_eq!(p.delete.len(), if deletes { 2 } else { 0 }, "{policy}");
            assert!(p.status.is_none() && p.create.is_empty());
        }
    }

    #[test]
    fn a_flows_patch_is_merged_over_its_template_and_a_bad_one_is_named() {
        let templates = [template("train")];
        let mut f = jobflow(&[("train", &[])], serde_json::json!({}));
        f.spec.flows[0].patch = Some(tephra_api::flow::Patch {
            job_spec: Some(serde_json::json!({"queue": "gpu", "maxRetry": 7})),
        });
        let p = sync(&f, &templates, &[], at("2026-12-01T10:00:00Z"));
        let spec = &p.create[0].spec;
        assert_eq!(
            (spec.queue.as_str(), spec.max_retry, spec.min_available),
            ("gpu", 7, Some(1))
        );
        f.spec.flows[0].patch = Some(tephra_api::flow::Patch {
            job_spec: Some(serde_json::json!({"tasks": "all of them"})),
        });
        let p = sync(&f, &templates, &[], at("2026-12-01T10:00:00Z"));
        assert!(p.create.is_empty());
        assert!(
            p.events[0].message.contains("patch.jobSpec"),
            "{:?}",
            p.events
        );
    }

    #[test]
    fn missing_templates_probes_and_cycles_are_told() {
        let f = jobflow(
            &[("a", &["b"]), ("b", &["a"]), ("c", &[])],
            serde_json::json!({}),
        );
        let p = sync(&f, &[], &[], at("2026-12-01T10:00:00Z"));
        assert!(p.create.is_empty());
        let r = reasons(&p);
        assert!(
            r.contains(&"DependencyCycle") && r.contains(&"TemplateNotFound"),
            "{r:?}"
        );
        let mut f = jobflow(&[("a", &[])], serde_json::json!({}));
        f.spec.flows[0].depends_on = Some(
            serde_json::from_value(serde_json::json!({
            "probe": {"taskStatusList": [{"taskName": "w", "phase": "Running"}]}}))
            .unwrap(),
        );
        let p = sync(&f, &[template("a")], &[], at("2026-12-01T10:00:00Z"));
        assert_eq!(names(&p), ["pipe-a"], "a probe is not waited for");
        assert!(reasons(&p).contains(&"ProbeNotEvaluated"));
    }

    #[test]
    fn a_jobs_history_grows_only_when_its_phase_changes() {
        let templates = [template("a")];
        let mut f = jobflow(&[("a", &[])], serde_json::json!({}));
        let mut jobs = Vec::new();
        let t0 = at("2026-12-01T10:00:00Z");
        let p = sync(&f, &templates, &jobs, t0);
        apply(&mut f, &mut jobs, &p, t0);
        set_phase(&mut jobs, "pipe-a", JobPhase::Pending);
        // The job as created (with its creation time) is written once.
        let p = sync(&f, &templates, &jobs, t0);
        apply(&mut f, &mut jobs, &p, t0);
        let p = sync(&f, &templates, &jobs, at("2026-12-01T10:01:00Z"));
        assert!(p.status.is_none(), "nothing changed: {:?}", p.status);
        set_phase(&mut jobs, "pipe-a", JobPhase::Running);
        let t2 = at("2026-12-01T10:02:00Z");
        let p = sync(&f, &templates, &jobs, t2);
        apply(&mut f, &mut jobs, &p, t2);
        let h = &f.status.as_ref().unwrap().job_status_list[0].running_histories;
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].end_timestamp, Some(Time(t2)));
        assert_eq!(h[1].state.as_deref(), Some("Running"));
        assert_eq!(
            go_duration("1h2m3.5s"),
            Some(jiff::SignedDuration::from_millis(3_723_500))
        );
    }

    /// A random DAG of flows: each names some earlier ones as targets.
    fn dag() -> impl Strategy<Value = Vec<Vec<usize>>> {
        (1usize..7).prop_flat_map(|n| {
            (0..n)
                .map(|i| proptest::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i))
                .collect::<Vec<_>>()
        })
    }

    proptest! {
        /// Driven to the end with random outcomes: a Job starts only after its targets
        /// completed, each flow's at most once; a failure starts nothing after it and fails the
        /// flow; without one every flow runs and the flow succeeds.
        #[test]
        fn flows_start_in_dependency_order_and_end_as_their_jobs_do(
            graph in dag(),
            fails in proptest::collection::vec(any::<bool>(), 7),
        ) {
            let names: Vec<String> = (0..graph.len()).map(|i| format!("f{i}")).collect();
            let spec: Vec<(&str, Vec<&str>)> = graph.iter().enumerate()
                .map(|(i, t)| (names[i].as_str(), t.iter().map(|j| names[*j].as_str()).collect()))
                .collect();
            let spec: Vec<(&str, &[&str])> = spec.iter().map(|(n, t)| (*n, t.as_slice())).collect();
            let templates: Vec<JobTemplate> = names.iter().map(|n| template(n)).collect();
            let mut f = jobflow(&spec, serde_json::json!({}));
            let mut jobs: Vec<Job> = Vec::new();
            let now = at("2026-12-01T10:00:00Z");
            let mut failed_any = false;
            for _ in 0..(4 * graph.len() + 4) {
                let p = sync(&f, &templates, &jobs, now);
                for job in &p.create {
                    let n = job.metadata.name.clone().unwrap();
                    prop_assert!(!jobs.iter().any(|j| j.metadata.name.as_deref() == Some(n.as_str())), "{n} twice");
                    let i: usize = n.trim_start_matches("pipe-f").parse().unwrap();
                    for t in &graph[i] {
                        let target = jobs.iter().find(|j| j.metadata.name.as_deref() == Some(format!("pipe-f{t}").as_str()));
                        prop_assert_eq!(target.and_then(phase_of), Some(JobPhase::Completed), "{} before f{}", n, t);
                    }
                    prop_assert!(!failed_any, "{n} started after a failure");
                }
                apply(&mut f, &mut jobs, &p, now);
                // A new job runs for a round, then ends.
                for j in jobs.iter_mut() {
                    if phase_of(j).is_none() {
                        let mut status: tephra_api::JobStatus = serde_json::from_value(serde_json::json!({})).unwrap();
                        status.state.phase = Some(JobPhase::Running);
                        j.status = Some(status);
                    } else if phase_of(j) == Some(JobPhase::Running) {
                        let i: usize = j.metadata.name.as_deref().unwrap().trim_start_matches("pipe-f").parse().unwrap();
                        let end = if fails[i] { JobPhase::Failed } else { JobPhase::Completed };
                        failed_any |= fails[i];
                        let mut status: tephra_api::JobStatus = serde_json::from_value(serde_json::json!({})).unwrap();
                        status.state.phase = Some(end);
                        j.status = Some(status);
                    }
                }
            }
            let p = sync(&f, &templates, &jobs, now);
            apply(&mut f, &mut jobs, &p, now);
            if failed_any {
                prop_assert_eq!(phase(&f), Some(FlowPhase::Failed));
            } else {
                prop_assert_eq!(phase(&f), Some(FlowPhase::Succeed));
                prop_assert_eq!(jobs.len(), graph.len());
            }
        }
    }
}
