//! Volcano's CronJob controller (which follows Kubernetes' own), as one pure step: given a
//! CronJob, the Jobs it owns and the controller manager's clock, what to write. The runtime
//! reads the objects, calls [`sync`], carries the plan out and calls again at `requeue_after`.
//!
//! A step: finished Jobs leave `status.active` (a succeeded one moves `lastSuccessfulTime`) and
//! the oldest beyond the history limits are deleted; active references to Jobs that are gone
//! are dropped; a suspended CronJob stops there. Otherwise the most recent scheduled time not yet
//! run is found, from the last one run (or the CronJob's creation), no earlier than
//! `startingDeadlineSeconds` ago (more than 100 missed times is a warning); with none, or one
//! already run, nothing more. `Forbid` skips it while a Job runs, `Replace` deletes the running
//! ones first; then the Job is made from the template, named `<cronjob>-<minutes since the
//! epoch>`, owned by the CronJob and annotated with its scheduled time in the CronJob's zone.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use tephra_api::Job;
use tephra_api::batch::JobPhase;
use tephra_api::cronjob::{ConcurrencyPolicy, CronJob, CronJobStatus};

use crate::cron_schedule::{Schedule, ScheduleError, time_zone};

/// The annotation a Job made by a CronJob carries: its scheduled time (RFC 3339, in the
/// CronJob's zone).
pub const SCHEDULED_TIMESTAMP: &str = "volcano.sh/cronjob-scheduled-timestamp";

/// More missed times than this is a warning, as in Kubernetes.
const MANY_MISSED: i64 = 100;

/// Requeues land this long after the scheduled time, so that the time has passed.
const NEXT_DELTA: SignedDuration = SignedDuration::from_millis(100);

/// An Event for the CronJob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The reason, as Volcano's controller words it.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// What one step writes.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The status to write, when it changed.
    pub status: Option<CronJobStatus>,
    /// Jobs to delete (beyond the history limits, or replaced), by name.
    pub delete: Vec<String>,
    /// The Job to create.
    pub create: Option<Job>,
    /// Events to record.
    pub events: Vec<CronEvent>,
    /// When to look again (the next scheduled time); `None`: only when something changes.
    pub requeue_after: Option<SignedDuration>,
}

fn event(type_: &'static str, reason: &'static str, message: String) -> CronEvent {
    CronEvent {
        type_,
        reason,
        message,
    }
}

/// Whether a Job is done, and how.
fn finished(job: &Job) -> Option<JobPhase> {
    let phase = job.status.as_ref()?.state.phase?;
    matches!(
        phase,
        JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated
    )
    .then_some(phase)
}

fn uid(job: &Job) -> Option<&str> {
    job.metadata.uid.as_deref()
}

fn created(m: &ObjectMeta) -> Option<Timestamp> {
    m.creation_timestamp.as_ref().map(|t| t.0)
}

/// The name of the Job made for `scheduled`.
pub fn job_name(cron: &str, scheduled: Timestamp) -> String {
    format!("{cron}-{}", scheduled.as_second().div_euclid(60))
}

/// The most recent scheduled time in (earliest, now], and how many were missed.
fn most_recent(
    schedule: &Schedule,
    zone: &jiff::tz::TimeZone,
    earliest: Timestamp,
    now: Timestamp,
) -> (Option<Timestamp>, i64) {
    let mut last = None;
    let mut missed = 0;
    let mut t = earliest;
    while let Some(next) = schedule.next(t, zone) {
        if next > now {
            break;
        }
        last = Some(next);
        missed += 1;
        t = next;
        // Past the warning, only the most recent matters: jump near `now`.
        if missed > MANY_MISSED + 1
            && let Some(back) = now.checked_sub(SignedDuration::from_hours(24 * 366)).ok()
            && back > t
        {
            t = back;
        }
    }
    (last, missed)
}

/// One step of the CronJob controller at `now`, over `jobs` (the Jobs the CronJob owns).
pub fn sync(cron: &CronJob, jobs: &[Job], now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let mut status = cron.status.clone().unwrap_or_default();
    let mut changed = false;
    let name = cron.metadata.name.clone().unwrap_or_default();
    let in_active = |s: &CronJobStatus, j: &Job| {
        s.active
            .iter()
            .any(|r| r.uid.is_some() && r.uid.as_deref() == uid(j))
    };

    // Finished Jobs leave the active list; the history keeps the newest.
    let (mut succeeded, mut failed) = (Vec::new(), Vec::new());
    for job in jobs {
        let Some(phase) = finished(job) else { continue };
        let job_name = job.metadata.name.clone().unwrap_or_default();
        if in_active(&status, job) {
            status.active.retain(|r| r.uid.as_deref() != uid(job));
            plan.events.push(event(
                "Normal",
                "SawCompletedJob",
                format!("Saw completed job: {job_name} in active, remove"),
            ));
            changed = true;
        }
        match phase {
            JobPhase::Completed => {
                let at = job
                    .status
                    .as_ref()
                    .and_then(|s| s.state.last_transition_time.clone());
                if let Some(at) = at
                    && status
                        .last_successful_time
                        .as_ref()
                        .is_none_or(|last| at.0 > last.0)
                {
                    status.last_successful_time = Some(at);
                    changed = true;
                }
                succeeded.push(job);
            }
            JobPhase::Failed => failed.push(job),
            _ => {}
        }
    }
    for (list, limit) in [
        (&mut succeeded, cron.spec.successful_jobs_history_limit),
        (&mut failed, cron.spec.failed_jobs_history_limit),
    ] {
        let extra = list
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        list.sort_by(|a, b| {
            (created(&a.metadata), &a.metadata.name).cmp(&(created(&b.metadata), &b.metadata.name))
        });
        for job in list.iter().take(extra) {
            let job_name = job.metadata.name.clone().unwrap_or_default();
            plan.events.push(event(
                "Normal",
                "SuccessfulDelete",
                format!("Deleted job {job_name:?}"),
            ));
            plan.delete.push(job_name);
        }
    }

    // Active references to Jobs that are gone.
    let before = status.active.len();
    status.active.retain(|r| {
        let here = jobs
            .iter()
            .any(|j| r.uid.is_some() && r.uid.as_deref() == uid(j));
        if !here {
            plan.events.push(event(
                "Warning",
                "StaleReference",
                format!(
                    "Active job {:?} no longer exists (UID: {})",
                    r.name.clone().unwrap_or_default(),
                    r.uid.clone().unwrap_or_default()
                ),
            ));
        }
        here
    });
    changed |= status.active.len() != before;
    for job in jobs {
        if finished(job).is_none() && !in_active(&status, job) {
            plan.events.push(event(
                "Warning",
                "OrphanedJob",
                format!(
                    "Detected orphaned job forgotten or not managed by controller: {} (UID: {})",
                    job.metadata.name.clone().unwrap_or_default(),
                    uid(job).unwrap_or_default()
                ),
            ));
        }
    }

    let finish = |mut plan: Plan, status: CronJobStatus, changed: bool| {
        if changed {
            plan.status = Some(status);
        }
        plan
    };
    if cron.spec.suspend {
        return finish(plan, status, changed);
    }
    let zone = match time_zone(cron.spec.time_zone.as_deref()) {
        Ok(z) => z,
        Err(e) => {
            plan.events
                .push(event("Warning", "UnknownTimeZone", e.to_string()));
            return finish(plan, status, changed);
        }
    };
    let schedule = match Schedule::parse(&cron.spec.schedule) {
        Ok(s) => s,
        Err(e @ ScheduleError::Schedule { .. }) | Err(e @ ScheduleError::TimeZone { .. }) => {
            plan.events
                .push(event("Warning", "UnparseableSchedule", e.to_string()));
            return finish(plan, status, changed);
        }
    };

    // The most recent time not run yet, within the starting deadline.
    let last_run = status.last_schedule_time.as_ref().map(|t| t.0);
    let mut earliest = last_run.or_else(|| created(&cron.metadata)).unwrap_or(now);
    if let Some(deadline) = cron.spec.starting_deadline_seconds
        && let Ok(by) = now.checked_sub(SignedDuration::from_secs(deadline))
        && by > earliest
    {
        earliest = by;
    }
    let (due, missed) = most_recent(&schedule, &zone, earliest, now);
    plan.requeue_after = schedule
        .next(now, &zone)
        .map(|t| t.duration_since(now) + NEXT_DELTA);
    let Some(due) = due else {
        return finish(plan, status, changed);
    };
    if missed > MANY_MISSED {
        plan.events.push(event(
            "Warning",
            "TooManyMissedTimes",
            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
        ));
    }
    let job_name = job_name(&name, due);
    let done_already = last_run == Some(due)
        || status
            .active
            .iter()
            .any(|r| r.name.as_deref() == Some(job_name.as_str()));
    if done_already {
        return finish(plan, status, changed);
    }
    match cron.spec.concurrency_policy {
        ConcurrencyPolicy::Forbid if !status.active.is_empty() => {
            plan.events.push(event(
                "Warning",
                "ForbidConcurrent",
                "Skipping job creation because another job is already running".into(),
            ));
            return finish(plan, status, changed);
        }
        ConcurrencyPolicy::Replace if !status.active.is_empty() => {
            plan.events.push(event(
                "Warning",
                "ReplaceConcurrent",
                "Replacing active job for CronJob".into(),
            ));
            for r in std::mem::take(&mut status.active) {
                let n = r.name.unwrap_or_default();
                plan.events.push(event(
                    "Normal",
                    "SuccessfulDelete",
                    format!("Deleted job {n:?}"),
                ));
                plan.delete.push(n);
            }
            changed = true;
        }
        _ => {}
    }
    let Some(job) = job_for(cron, &name, due, &zone) else {
        plan.events.push(event(
            "Warning",
            "FailedCreate",
            "Failed to create job from template: spec.jobTemplate.spec is missing".into(),
        ));
        return finish(plan, status, changed);
    };
    plan.create = Some(job);
    plan.events.push(event(
        "Normal",
        "SuccessfulCreate",
        format!("Created job {job_name}"),
    ));
    // The reference gets its UID once the Job is created (the runtime fills it in).
    status.active.push(ObjectReference {
        api_version: Some("batch.volcano.sh/v1alpha1".into()),
        kind: Some("Job".into()),
        name: Some(job_name),
        namespace: cron.metadata.namespace.clone(),
        ..ObjectReference::default()
    });
    status.last_schedule_time = Some(Time(due));
    finish(plan, status, true)
}

/// The Job made for `scheduled`: the template's labels, annotations and spec, owned by the
/// CronJob; `None` when the template has no spec.
fn job_for(
    cron: &CronJob,
    name: &str,
    scheduled: Timestamp,
    zone: &jiff::tz::TimeZone,
) -> Option<Job> {
    let template = &cron.spec.job_template;
    let spec = template.spec.clone()?;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        tephra_api::well_known::CREATED_BY_CRONJOB.into(),
        name.to_string(),
    );
    annotations.insert(
        SCHEDULED_TIMESTAMP.into(),
        scheduled
            .to_zoned(zone.clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
            .replace("+00:00", "Z"),
    );
    let owner = OwnerReference {
        api_version: "batch.volcano.sh/v1alpha1".into(),
        kind: "CronJob".into(),
        name: name.into(),
        uid: cron.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut job = Job::new(&job_name(name, scheduled), spec);
    job.metadata = ObjectMeta {
        name: Some(job_name(name, scheduled)),
        namespace: cron.metadata.namespace.clone(),
        labels: meta.labels,
        annotations: Some(annotations),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    Some(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cron(schedule: &str, extra: serde_json::Value) -> CronJob {
        let mut spec = serde_json::json!({"schedule": schedule, "jobTemplate": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {"tasks": [{"name": "w", "replicas": 1,
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "ml", "uid": "cj-uid",
                "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": spec}))
        .unwrap()
    }

    /// The runtime's part: the plan carried out on the objects, the new Jobs given UIDs.
    fn apply(c: &mut CronJob, jobs: &mut Vec<Job>, plan: &Plan, now: Timestamp, n: &mut u32) {
        jobs.retain(|j| !plan.delete.contains(j.metadata.name.as_ref().unwrap()));
        if let Some(status) = &plan.status {
            c.status = Some(status.clone());
        }
        if let Some(job) = &plan.create {
            let mut job = job.clone();
            *n += 1;
            job.metadata.uid = Some(format!("uid-{n}"));
            job.metadata.creation_timestamp = Some(Time(now));
            let s = c.status.as_mut().unwrap();
            for r in &mut s.active {
                if r.name == job.metadata.name && r.uid.is_none() {
                    r.uid = job.metadata.uid.clone();
                }
            }
            jobs.push(job);
        }
    }

    fn finish(job: &mut Job, phase: JobPhase, when: Timestamp) {
        let mut status: tephra_api::JobStatus =
            serde_json::from_value(serde_json::json!({})).unwrap();
        status.state.phase = Some(phase);
        status.state.last_transition_time = Some(Time(when));
        job.status = Some(status);
    }

    fn reasons(p: &Plan) -> Vec<&'static str> {
        p.events.iter().map(|e| e.reason).collect()
    }

    #[test]
    fn a_job_is_made_at_each_scheduled_time_named_owned_and_annotated() {
        let mut c = cron(
            "*/5 * * * *",
            serde_json::json!({"timeZone": "Europe/Berlin"}),
        );
        let mut jobs = Vec::new();
        let p = sync(&c, &jobs, at("2026-12-01T10:01:00Z"));
        assert!(p.create.is_none());
        assert_eq!(
            p.requeue_after,
            Some(SignedDuration::from_secs(240) + NEXT_DELTA)
        );
        let now = at("2026-12-01T10:05:30Z");
        let p = sync(&c, &jobs, now);
        let job = p.create.clone().expect("a job at 10:05");
        assert_eq!(job.metadata.name.as_deref(), Some("nightly-29935325"));
        assert_eq!(job.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(job.metadata.labels.as_ref().unwrap()["team"], "a");
        assert_eq!(
            job.metadata.annotations.as_ref().unwrap()[SCHEDULED_TIMESTAMP],
            "2026-12-01T11:05:00+01:00"
        );
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("CronJob", "cj-uid")
        );
        let status = p.status.clone().unwrap();
        assert_eq!(
            status.last_schedule_time,
            Some(Time(at("2026-12-01T10:05:00Z")))
        );
        assert_eq!(reasons(&p), ["SuccessfulCreate"]);
        let mut n = 0;
        apply(&mut c, &mut jobs, &p, now, &mut n);
        // Looking again before the next time makes nothing twice.
        let p = sync(&c, &jobs, at("2026-12-01T10:07:00Z"));
        assert!(p.create.is_none() && p.status.is_none(), "{p:?}");
    }

    #[test]
    fn concurrency_policies_allow_forbid_and_replace_a_running_job() {
        for (policy, creates, deletes, reason) in [
            ("Allow", true, 0, None),
            ("Forbid", false, 0, Some("ForbidConcurrent")),
            ("Replace", true, 1, Some("ReplaceConcurrent")),
        ] {
            let mut c = cron(
                "0 * * * *",
                serde_json::json!({"concurrencyPolicy": policy}),
            );
            let mut jobs = Vec::new();
            let mut n = 0;
            let first = at("2026-12-01T11:00:01Z");
            let p = sync(&c, &jobs, first);
            apply(&mut c, &mut jobs, &p, first, &mut n);
            let p = sync(&c, &jobs, at("2026-12-01T12:00:01Z"));
            assert_eq!(p.create.is_some(), creates, "{policy}");
            assert_eq!(p.delete.len(), deletes, "{policy}");
            if let Some(r) = reason {
                assert!(reasons(&p).contains(&r), "{policy}: {:?}", reasons(&p));
            }
        }
    }

    #[test]
    fn missed_times_run_the_latest_once_unless_past_the_starting_deadline() {
        // The controller was away from 10:00 to 10:17: only 10:15 is made.
        let c = cron("*/5 * * * *", serde_json::json!({}));
        let p = sync(&c, &[], at("2026-12-01T10:17:00Z"));
        assert_eq!(
            p.create.unwrap().metadata.name.as_deref(),
            Some("nightly-29935335")
        );
        // With a deadline of 60 s, 10:15 is two minutes late: nothing, until 10:20.
        let c = cron(
            "*/5 * * * *",
            serde_json::json!({"startingDeadlineSeconds": 60}),
        );
        let p = sync(&c, &[], at("2026-12-01T10:17:00Z"));
        assert!(p.create.is_none());
        assert_eq!(
            p.requeue_after,
            Some(SignedDuration::from_secs(180) + NEXT_DELTA)
        );
        // Away for three days at every minute: too many missed times, the latest still runs.
        let c = cron("* * * * *", serde_json::json!({}));
        let p = sync(&c, &[], at("2026-12-04T10:00:30Z"));
        assert!(reasons(&p).contains(&"TooManyMissedTimes"));
        assert_eq!(
            p.status.unwrap().last_schedule_time,
            Some(Time(at("2026-12-04T10:00:00Z")))
        );
    }

    #[test]
    fn finished_jobs_leave_the_active_list_and_the_history_keeps_its_limits() {
        let mut c = cron(
            "0 * * * *",
            serde_json::json!({"successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 0,
                "suspend": true}),
        );
        let mut jobs = Vec::new();
        for h in 0..4 {
            let mut j = Job::new(
                &format!("nightly-{h}"),
                c.spec.job_template.spec.clone().unwrap(),
            );
            j.metadata.uid = Some(format!("u{h}"));
            j.metadata.creation_timestamp = Some(Time(at(&format!("2026-12-01T1{h}:00:00Z"))));
            let phase = if h == 3 {
                JobPhase::Failed
            } else {
                JobPhase::Completed
            };
            finish(&mut j, phase, at(&format!("2026-12-01T1{h}:30:00Z")));
            jobs.push(j);
        }
        c.status = Some(CronJobStatus {
            active: vec![ObjectReference {
                name: Some("nightly-2".into()),
                uid: Some("u2".into()),
                ..ObjectReference::default()
            }],
            ..CronJobStatus::default()
        });
        // Suspended: the history is kept all the same, and nothing is made.
        let p = sync(&c, &jobs, at("2026-12-01T20:00:00Z"));
        assert!(p.create.is_none());
        let mut deleted = p.delete.clone();
        deleted.sort();
        assert_eq!(deleted, ["nightly-0", "nightly-3"]);
        let s = p.status.clone().unwrap();
        assert!(s.active.is_empty());
        assert_eq!(
            s.last_successful_time,
            Some(Time(at("2026-12-01T12:30:00Z")))
        );
        assert!(reasons(&p).contains(&"SawCompletedJob"));
    }

    #[test]
    fn an_unknown_zone_or_schedule_makes_nothing_and_says_why() {
        let c = cron("0 * * * *", serde_json::json!({"timeZone": "Mars/Olympus"}));
        let p = sync(&c, &[], at("2026-12-01T12:00:00Z"));
        assert!(p.create.is_none());
        assert_eq!(reasons(&p), ["UnknownTimeZone"]);
        let c = cron("0 25 * * *", serde_json::json!({}));
        assert_eq!(
            reasons(&sync(&c, &[], at("2026-12-01T12:00:00Z"))),
            ["UnparseableSchedule"]
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// On a clock driven forward by random steps, with Jobs finishing at random: no scheduled
        /// time gets two Jobs, each Job's time is a scheduled one that had come, `Forbid` never
        /// has two Jobs running, the last scheduled time never goes back, and the history
        /// limits hold after each step.
        #[test]
        fn a_driven_clock_makes_each_scheduled_job_once_within_the_policy(
            policy in prop::sample::select(vec!["Allow", "Forbid", "Replace"]),
            schedule in prop::sample::select(vec!["*/7 * * * *", "0 * * * *", "15,45 9-17 * * 1-5"]),
            steps in prop::collection::vec((1i64..5000, any::<bool>(), any::<bool>()), 1..60),
            deadline in prop::option::of(30i64..600),
        ) {
            let mut extra = serde_json::json!({"concurrencyPolicy": policy,
                "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1});
            if let Some(d) = deadline {
                extra["startingDeadlineSeconds"] = d.into();
            }
            let mut c = cron(schedule, extra);
            let sched = Schedule::parse(schedule).unwrap();
            let mut jobs: Vec<Job> = Vec::new();
            let mut made: BTreeMap<String, Timestamp> = BTreeMap::new();
            let mut now = at("2026-12-01T10:00:00Z");
            let mut n = 0;
            let mut last = None;
            for (dt, finish_one, fail) in steps {
                now = now.checked_add(SignedDuration::from_secs(dt)).unwrap();
                if finish_one
                    && let Some(j) = jobs.iter_mut().find(|j| finished(j).is_none())
                {
                    finish(j, if fail { JobPhase::Failed } else { JobPhase::Completed }, now);
                }
                let p = sync(&c, &jobs, now);
                if let Some(job) = &p.create {
                    let name = job.metadata.name.clone().unwrap();
                    prop_assert!(!made.contains_key(&name), "{} made twice", name);
                    let due = p.status.as_ref().unwrap().last_schedule_time.clone().unwrap().0;
                    prop_assert!(due <= now);
                    let before = due.checked_sub(SignedDuration::from_secs(60)).unwrap();
                    prop_assert_eq!(sched.next(before, &jiff::tz::TimeZone::UTC), Some(due));
                    if let Some(d) = deadline {
                        prop_assert!(now.duration_since(due) <= SignedDuration::from_secs(d));
                    }
                    made.insert(name, due);
                }
                apply(&mut c, &mut jobs, &p, now, &mut n);
                let s = c.status.clone().unwrap_or_default();
                let t = s.last_schedule_time.map(|t| t.0);
                prop_assert!(t >= last, "last scheduled time went back");
                last = t;
                let running = jobs.iter().filter(|j| finished(j).is_none()).count();
                if policy != "Allow" {
                    prop_assert!(running <= 1, "{} jobs running under {}", running, policy);
                }
                // The next step cleans up what this one saw finish.
                let p = sync(&c, &jobs, now);
                apply(&mut c, &mut jobs, &p, now, &mut n);
                let done = |ph| jobs.iter().filter(|j| finished(j) == Some(ph)).count();
                prop_assert!(done(JobPhase::Completed) <= 2 && done(JobPhase::Failed) <= 1);
            }
        }
    }
}
