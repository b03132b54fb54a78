//! `batch.volcano.sh/v1alpha1`: the Volcano CronJob, a Volcano Job made on a schedule, with the
//! semantics of Kubernetes' own CronJob (schedule in a time zone, concurrency policy, starting
//! deadline, suspend, history limits).
//!
//! Field names, defaults and enum strings are Volcano's. What Volcano's admission webhook
//! checks is here as CRD validation rules, so that a real kube-apiserver refuses the same
//! manifests without a webhook: the name leaves room for the suffix of the Jobs it makes, the
//! schedule is a five-field cron expression or a macro and carries no `TZ=`, and the time zone
//! is a well-formed IANA name (whether the zone exists is the controller's to say).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::batch::JobSpec;

/// The longest CronJob name: its Jobs are named `<cronjob>-<scheduled time>`, 63 at most.
pub const MAX_NAME: usize = 52;

/// A cron schedule as Volcano's parser takes it: five fields, or a macro (`@daily`, `@every
/// 1h30m`, ...).
pub const SCHEDULE_PATTERN: &str = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+|([0-9A-Za-z*?,/-]+\s+){4}[0-9A-Za-z*?,/-]+)$";

/// A Volcano CronJob: a Job template and the schedule its Jobs are made on.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "batch.volcano.sh",
    version = "v1alpha1",
    kind = "CronJob",
    plural = "cronjobs",
    singular = "cronjob",
    shortname = "cronvcjob",
    shortname = "cronvj",
    namespaced,
    status = "CronJobStatus",
    printcolumn(name = "SCHEDULE", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(
        name = "TIMEZONE",
        type_ = "string",
        json_path = ".spec.timeZone",
        priority = 1
    ),
    printcolumn(name = "SUSPEND", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(
        name = "LAST SCHEDULE",
        type_ = "date",
        json_path = ".status.lastScheduleTime"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new("!has(self.metadata.name) || size(self.metadata.name) <= 52")
        .message("metadata.name: cronJob name must be no more than 52 characters to accommodate job name suffix (max 63 total)")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!self.schedule.contains('TZ')")
        .message("spec.schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field")
        .field_path(".schedule"),
    validation = Rule::new(
        "!has(self.timeZone) || (self.timeZone != '' && self.timeZone.lowerAscii() != 'local' && self.timeZone.split('/').all(p, p != '.' && p != '..' && !p.startsWith('-') && p.matches('^[A-Za-z._0-9+-]{1,14}$')))"
    ).message("spec.timeZone: unknown timeZone: must be a name of the IANA time zone database, not Local").field_path(".timeZone")
)]
pub struct CronJobSpec {
    /// The schedule, in cron format (`*/5 * * * *`) or a macro (`@hourly`).
    #[schemars(length(min = 1, max = 256), regex(pattern = SCHEDULE_PATTERN))]
    pub schedule: String,

    /// The time zone of the schedule (an IANA name, such as `Europe/Berlin`); the controller
    /// manager's when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub time_zone: Option<String>,

    /// Seconds after a scheduled time during which a missed Job may still be started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// What to do when a Job is due while another still runs. Defaults to `Allow`.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,

    /// Makes no more Jobs while true; Jobs already made run on. Defaults to false.
    #[serde(default)]
    pub suspend: bool,

    /// The Job each scheduled time makes.
    pub job_template: JobTemplateSpec,

    /// How many succeeded Jobs to keep. Defaults to 3.
    #[serde(default = "three")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: i32,

    /// How many failed Jobs to keep. Defaults to 1.
    #[serde(default = "one")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: i32,
}

fn three() -> i32 {
    3
}

fn one() -> i32 {
    1
}

/// What to do when a Job is due while another of the CronJob still runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Make it anyway.
    #[default]
    Allow,
    /// Skip it.
    Forbid,
    /// Delete the running Job and make the new one.
    Replace,
}

/// The Job a CronJob makes: its metadata (labels, annotations) and spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobTemplateSpec {
    /// Labels and annotations the Jobs get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The Jobs' spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSpec>,
}

/// What the CronJob controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The Jobs it made that still run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub active: Vec<ObjectReference>,
    /// When a Job was last made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When a Job it made last succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
}
