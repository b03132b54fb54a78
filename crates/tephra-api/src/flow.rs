//! `flow.volcano.sh/v1alpha1`: Volcano's JobFlow and JobTemplate. A JobTemplate is a Volcano
//! Job's spec kept for later; a JobFlow makes one Job from each template it names, each once
//! the flows it depends on are done (and its probes pass), so that a pipeline (preprocess →
//! train → evaluate) runs as one object.
//!
//! Field names, defaults and enum strings are Volcano's (including the status' `unKnowJobs`).
//! What Volcano's admission webhook checks is here as CRD validation rules where CEL can say it:
//! flow names are unique and each `dependsOn` target names another flow of the JobFlow. A
//! dependency cycle longer than one flow is for the controller to report.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::batch::JobSpec;

/// The label and annotation naming the JobTemplate a Job was made from (`<namespace>.<name>`).
pub const CREATED_BY_TEMPLATE: &str = "volcano.sh/createdByJobTemplate";

/// The label and annotation naming the JobFlow that made a Job (`<namespace>.<name>`).
pub const CREATED_BY_FLOW: &str = "volcano.sh/createdByJobFlow";

/// The name of the Job a JobFlow makes for its flow `flow`: `<jobflow>-<flow>`.
pub fn job_name(jobflow: &str, flow: &str) -> String {
    format!("{jobflow}-{flow}")
}

/// A JobTemplate: the spec of a Volcano Job, for JobFlows to make Jobs from.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "flow.volcano.sh",
    version = "v1alpha1",
    kind = "JobTemplate",
    plural = "jobtemplates",
    singular = "jobtemplate",
    shortname = "jt",
    namespaced,
    status = "JobTemplateStatus",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(transparent)]
pub struct JobTemplateSpec(pub JobSpec);

/// What the JobFlow controller observed of a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobTemplateStatus {
    /// The Jobs made from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_depends_on_list: Vec<String>,
}

/// A JobFlow: Jobs made from JobTemplates in the order their dependencies give.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "flow.volcano.sh",
    version = "v1alpha1",
    kind = "JobFlow",
    plural = "jobflows",
    singular = "jobflow",
    shortname = "jf",
    namespaced,
    status = "JobFlowStatus",
    printcolumn(name = "STATUS", type_ = "string", json_path = ".status.state.phase"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.flows) || self.flows.all(f, self.flows.exists_one(g, g.name == f.name))")
        .message("spec.flows[].name must be unique within the jobflow").field_path(".flows"),
    validation = Rule::new(
        "!has(self.flows) || self.flows.all(f, !has(f.dependsOn) || !has(f.dependsOn.targets) || f.dependsOn.targets.all(t, t != f.name && self.flows.exists(g, g.name == t)))"
    ).message("jobflow Flow is not DAG: spec.flows[].dependsOn.targets must name other flows of the jobflow").field_path(".flows")
)]
pub struct JobFlowSpec {
    /// The flows: each a JobTemplate (by name) and what it waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub flows: Vec<Flow>,
    /// Whether the Jobs made are kept (`retain`) or deleted (`delete`) once the flow is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_retain_policy: Option<RetainPolicy>,
}

/// Whether a JobFlow's Jobs outlive it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RetainPolicy {
    /// Keep them.
    #[serde(rename = "retain")]
    Retain,
    /// Delete them once the flow is done.
    #[serde(rename = "delete")]
    Delete,
}

/// One flow: the JobTemplate it makes a Job from, what it waits for, and a patch of the spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Flow {
    /// The JobTemplate's name (and the flow's).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The flows it waits for, and the probes that must pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,
    /// Changes to the template's spec for this flow's Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<Patch>,
}

/// What a flow waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// The flows whose Jobs must be done first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 253)))]
    pub targets: Vec<String>,
    /// Probes that must pass as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
}

/// Probes of a dependency.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// HTTP GETs that must answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub http_get_list: Vec<HttpGet>,
    /// TCP ports that must accept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tcp_socket_list: Vec<TcpSocket>,
    /// Task phases that must be reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub task_status_list: Vec<TaskStatusProbe>,
}

/// An HTTP GET probe of a task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpGet {
    /// The task whose pods are probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub task_name: Option<String>,
    /// The path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub port: Option<i32>,
    /// A header to send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_header: Option<HttpHeader>,
}

/// An HTTP header.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HttpHeader {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
}

/// A TCP probe of a task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TcpSocket {
    /// The task whose pods are probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub task_name: Option<String>,
    /// The port.
    #[schemars(range(min = 0, max = 65535))]
    pub port: i32,
}

/// A task phase a dependency must reach.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusProbe {
    /// The task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub task_name: Option<String>,
    /// The phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub phase: Option<String>,
}

/// Changes to a template's spec for one flow: fields of a Job's spec, merged into the
/// template's. A patch is partial, so it is not validated as a whole spec here; the Job made
/// from the merge is, as any Job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// The spec's fields to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "partial_job_spec")]
    pub job_spec: Option<serde_json::Value>,
}

/// Any object: the fields of a Job's spec to change.
fn partial_job_spec(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// What the JobFlow controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobFlowStatus {
    /// Jobs waiting for their dependencies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_jobs: Vec<String>,
    /// Jobs running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running_jobs: Vec<String>,
    /// Jobs failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_jobs: Vec<String>,
    /// Jobs completed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed_jobs: Vec<String>,
    /// Jobs terminated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terminated_jobs: Vec<String>,
    /// Jobs in no known state (Volcano's spelling).
    #[serde(default, rename = "unKnowJobs", skip_serializing_if = "Vec::is_empty")]
    pub unknown_jobs: Vec<String>,
    /// Each Job's history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_status_list: Vec<FlowJobStatus>,
    /// Each Job's condition, by Job name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, FlowCondition>,
    /// The flow's phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<FlowState>,
}

/// One Job's history in a flow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowJobStatus {
    /// The Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Time>,
    /// How many times it restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub restart_count: Option<i32>,
    /// Its phases over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running_histories: Vec<JobRunningHistory>,
}

/// One phase of a Job, with when it began and ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobRunningHistory {
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// Until.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Time>,
    /// The phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// A Job's condition in a flow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowCondition {
    /// Its phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// When it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time: Option<Time>,
    /// How long it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_duration: Option<String>,
    /// Its tasks' pods by phase: task → phase → count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_status_count: BTreeMap<String, TaskPhaseCount>,
}

/// A task's pods by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskPhaseCount {
    /// Phase → count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phase: BTreeMap<String, i32>,
}

/// A JobFlow's phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct FlowState {
    /// `Pending`, `Running`, `Succeed`, `Terminating` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<FlowPhase>,
}

/// A JobFlow's phase (Volcano's spellings).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FlowPhase {
    /// Not started.
    Pending,
    /// Running.
    Running,
    /// Every Job succeeded (Volcano's spelling).
    Succeed,
    /// Being deleted.
    Terminating,
    /// A Job failed.
    Failed,
}
