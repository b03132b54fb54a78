//! `tephra job list|view|suspend|resume|delete`, with vcctl's flags (`-N/--name`,
//! `-n/--namespace`, `-q/--queue`, `-S/--scheduler`, `--selector`); suspend and resume go
//! through the Command CRD (AbortJob, ResumeJob), as vcctl does. `view` says why a job waits:
//! its PodGroup's conditions, where its ResourceBinding places it, and its last events.

use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use tephra_api::well_known::JOB_NAME;
use tephra_api::{Job, PodGroup, ResourceBinding};

use super::print::{CliError, Listing};
use super::{Scope, block_on};

/// The job's flags.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(subcommand)]
    command: Verb,
    #[command(flatten)]
    scope: Scope,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// Run a Job: one task from the flags, or the Job in a YAML file (`-f`), checked as the API
    /// server would admit it before it is sent.
    Run {
        /// The Job's name.
        #[arg(short = 'N', long)]
        name: Option<String>,
        /// The container image.
        #[arg(short = 'i', long, default_value = "busybox")]
        image: String,
        /// minAvailable.
        #[arg(short = 'm', long, default_value_t = 1)]
        min: i32,
        /// Replicas of the one task.
        #[arg(short = 'r', long, default_value_t = 1)]
        replicas: i32,
        /// Requests, `name=quantity,...`.
        #[arg(short = 'R', long, default_value = "cpu=1000m,memory=100Mi")]
        requests: String,
        /// Limits, `name=quantity,...`.
        #[arg(short = 'L', long, default_value = "cpu=1000m,memory=100Mi")]
        limits: String,
        /// The scheduler.
        #[arg(short = 'S', long, default_value = "volcano")]
        scheduler: String,
        /// A YAML file with the Job (its namespace is `-n`'s unless it names one).
        #[arg(short = 'f', long)]
        filename: Option<std::path::PathBuf>,
    },
    /// List Jobs.
    List {
        /// Only Jobs in this queue.
        #[arg(short = 'q', long)]
        queue: Option<String>,
        /// Only Jobs with this scheduler name.
        #[arg(short = 'S', long)]
        scheduler: Option<String>,
        /// Only Jobs whose name contains this.
        #[arg(long)]
        selector: Option<String>,
    },
    /// Show a Job and why it waits.
    View {
        /// The Job's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Suspend a Job (an AbortJob Command).
    Suspend {
        /// The Job's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Resume a suspended Job (a ResumeJob Command).
    Resume {
        /// The Job's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Delete a Job.
    Delete {
        /// The Job's name.
        #[arg(short = 'N', long)]
        name: String,
    },
}

fn phase(j: &Job) -> String {
    j.status
        .as_ref()
        .and_then(|s| s.state.phase)
        .map_or_else(|| "Pending".into(), |p| format!("{p:?}"))
}

fn listing(jobs: &[Job], all: bool) -> Listing<'_, Job> {
    let rows = jobs
        .iter()
        .map(|j| {
            let s = j.status.clone().unwrap_or_default();
            let replicas: i32 = j.spec.tasks.iter().map(|t| t.replicas.unwrap_or(0)).sum();
            let mut row = Vec::new();
            if all {
                row.push(j.metadata.namespace.clone().unwrap_or_default());
            }
            row.extend([
                j.metadata.name.clone().unwrap_or_default(),
                j.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.strftime("%Y-%m-%d").to_string())
                    .unwrap_or_default(),
                phase(j),
                if j.spec.tasks.len() > 1 {
                    "Multi"
                } else {
                    "Batch"
                }
                .to_string(),
                replicas.to_string(),
                j.spec.min_available.unwrap_or(replicas).to_string(),
                s.pending.to_string(),
                s.running.to_string(),
                s.succeeded.to_string(),
                s.failed.to_string(),
                s.unknown.to_string(),
                s.retry_count.to_string(),
                j.spec.queue.clone(),
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if all {
        headers.push("NAMESPACE");
    }
    headers.extend([
        "NAME",
        "CREATION",
        "PHASE",
        "JOBTYPE",
        "REPLICAS",
        "MIN",
        "PENDING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "UNKNOWN",
        "RETRYCOUNT",
        "QUEUE",
    ]);
    Listing {
        kind: "job.batch.volcano.sh",
        items: jobs,
        names: jobs
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect(),
        headers,
        rows,
        wide: 1,
        single: false,
    }
}

/// Runs `tephra job`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    block_on(async move {
        let scope = f.scope;
        let client = scope.connection.client().await?;
        let ns = scope.namespace.clone();
        let jobs: Api<Job> = if scope.all_namespaces {
            Api::all(client.clone())
        } else {
            Api::namespaced(client.clone(), &ns)
        };
        match f.command {
            Verb::Run {
                name,
                image,
                min,
                replicas,
                requests,
                limits,
                scheduler,
                filename,
            } => {
                let doc = match filename {
                    Some(path) => {
                        let text = std::fs::read_to_string(&path).map_err(|e| {
                            CliError::Other(format!("reading {}: {e}", path.display()))
                        })?;
                        serde_saphyr::from_str::<serde_json::Value>(&text).map_err(|e| {
                            CliError::Other(format!("{}: not a YAML Job: {e}", path.display()))
                        })?
                    }
                    None => {
                        let name = name.ok_or_else(|| {
                            CliError::Other("job run: give --name (-N) or --filename (-f)".into())
                        })?;
                        let resources =
                            |flag: &str, text: &str| -> Result<serde_json::Value, CliError> {
                                let mut out = serde_json::Map::new();
                                for pair in text.split(',').filter(|p| !p.is_empty()) {
                                    let (k, v) = pair.split_once('=').ok_or_else(|| {
                                        CliError::Other(format!(
                                            "{flag} {text:?}: expected name=quantity,..."
                                        ))
                                    })?;
                                    out.insert(k.trim().into(), v.trim().into());
                                }
                                Ok(serde_json::Value::Object(out))
                            };
                        serde_json::json!({
                            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                            "metadata": {"name": name},
                            "spec": {"minAvailable": min, "schedulerName": scheduler,
                                "tasks": [{"name": name, "replicas": replicas, "template": {
                                    "metadata": {"name": name},
                                    "spec": {"restartPolicy": "Never", "containers": [{
                                        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                                        "resources": {"requests": resources("--requests", &requests)?,
                                                      "limits": resources("--limits", &limits)?}}]}}}]}
                        })
                    }
                };
                let admission = tephra_api::admission::Admission::new()
                    .map_err(|e| CliError::Other(format!("building admission checks: {e}")))?;
                admission
                    .admit(&doc)
                    .map_err(|e| CliError::Other(format!("the Job is refused: {e}")))?;
                let job: Job = serde_json::from_value(doc)
                    .map_err(|e| CliError::Other(format!("the Job is refused: {e}")))?;
                let job_ns = job.metadata.namespace.clone().unwrap_or_else(|| ns.clone());
                let created = Api::<Job>::namespaced(client.clone(), &job_ns)
                    .create(&kube::api::PostParams::default(), &job)
                    .await
                    .map_err(|e| {
                        let n = job.metadata.name.clone().unwrap_or_default();
                        CliError::api(&format!("job {job_ns}/{n}"), e)
                    })?;
                println!(
                    "run job {} successfully",
                    created.metadata.name.unwrap_or_default()
                );
            }
            Verb::List {
                queue,
                scheduler,
                selector,
            } => {
                let mut list = jobs
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| CliError::api("jobs", e))?
                    .items;
                list.retain(|j| {
                    queue.as_ref().is_none_or(|q| j.spec.queue == *q)
                        && scheduler.as_ref().is_none_or(|s| {
                            j.spec.scheduler_name.as_deref().unwrap_or("volcano") == s
                        })
                        && selector.as_ref().is_none_or(|s| {
                            j.metadata
                                .name
                                .as_deref()
                                .unwrap_or_default()
                                .contains(s.as_str())
                        })
                });
                print!(
                    "{}",
                    listing(&list, scope.all_namespaces).render(scope.output)?
                );
            }
            Verb::View { name } => view(&client, &ns, &name, scope.output).await?,
            Verb::Suspend { name } => command(&client, &ns, &name, "AbortJob").await?,
            Verb::Resume { name } => command(&client, &ns, &name, "ResumeJob").await?,
            Verb::Delete { name } => {
                Api::<Job>::namespaced(client, &ns)
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map_err(|e| CliError::api(&format!("job {ns}/{name}"), e))?;
                println!("job.batch.volcano.sh/{name} deleted");
            }
        }
        Ok(())
    })
}

async fn command(client: &kube::Client, ns: &str, name: &str, action: &str) -> anyhow::Result<()> {
    let what = format!("job {ns}/{name}");
    let job = Api::<Job>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .map_err(|e| CliError::api(&what, e))?;
    let uid = job.metadata.uid.clone().unwrap_or_default();
    super::bus_command(
        client,
        ns,
        ("batch.volcano.sh/v1alpha1", "Job", name, uid),
        action,
    )
    .await?;
    println!("job.batch.volcano.sh/{name} {action} requested");
    Ok(())
}

/// Whether the Job has finished (Completed, Failed, Terminated or Aborted).
fn finished(j: &Job) -> bool {
    matches!(
        phase(j).as_str(),
        "Completed" | "Failed" | "Terminated" | "Aborted"
    )
}

/// Where pod `p` runs: its node, or in a fleet the member and node its `PodScheduled`
/// condition names, with the command for its logs there.
fn pod_where(p: &Pod) -> String {
    use tephra_api::well_known::placed;
    let conditions = p.status.iter().flat_map(|s| s.conditions.iter().flatten());
    for c in conditions {
        if c.type_ == "PodScheduled"
            && c.reason.as_deref() == Some(placed::REASON)
            && let Some((cluster, node)) = c.message.as_deref().and_then(placed::parse)
        {
            let ns = p.metadata.namespace.as_deref().unwrap_or("default");
            let name = p.metadata.name.as_deref().unwrap_or_default();
            return format!(
                "member {cluster}, node {node} (logs: kubectl --context {cluster} logs -n {ns} {name})"
            );
        }
    }
    match p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(node) => format!("node {node}"),
        None => "not placed".to_string(),
    }
}

/// The `Where its pods run:` section: each pod's phase and where it runs.
fn pod_lines(pods: &[Pod]) -> String {
    let mut pods: Vec<&Pod> = pods.iter().collect();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = String::from("Where its pods run:\n");
    if pods.is_empty() {
        out.push_str("  none\n");
    }
    for p in pods {
        out.push_str(&format!(
            "  {} {} {}\n",
            p.metadata.name.as_deref().unwrap_or_default(),
            p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Pending"),
            pod_where(p)
        ));
    }
    out
}

/// The `Expected:` line for a waiting job's PodGroup, from its `tephra.io/expected-start`.
fn expected_start(g: &PodGroup, now: i64) -> Option<String> {
    use tephra_kube::eta::{EXPECTED_START, Expected};
    let span = |s: i64| tephra_scheduler::duration::Duration::from_millis(s * 1000).go_string();
    let text = g.metadata.annotations.as_ref()?.get(EXPECTED_START)?;
    let line = match Expected::parse(text) {
        Some(e @ Expected::At(t)) if t > now => {
            format!("{} (in {})", e.text(), span(t - now))
        }
        Some(e @ Expected::At(_)) => format!("{} (overdue)", e.text()),
        Some(Expected::After(t)) => format!(
            "not within {} (not before {})",
            span(t - now),
            Expected::At(t).text()
        ),
        Some(e @ Expected::Never(_)) => {
            format!("never: {}", e.never_why().unwrap_or_default())
        }
        None => format!("{text:?} (not a time)"),
    };
    Some(format!("Expected:   {line}\n"))
}

async fn view(
    client: &kube::Client,
    ns: &str,
    name: &str,
    output: Option<super::Output>,
) -> anyhow::Result<()> {
    let what = format!("job {ns}/{name}");
    let job = Api::<Job>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .map_err(|e| CliError::api(&what, e))?;
    if let Some(o @ (super::Output::Yaml | super::Output::Json)) = output {
        print!("{}", super::print::structured(&[job], o, true)?);
        return Ok(());
    }
    let s = job.status.clone().unwrap_or_default();
    let mut out = String::new();
    out.push_str(&format!("Name:       {name}\nNamespace:  {ns}\n"));
    out.push_str(&format!("Queue:      {}\n", job.spec.queue.as_str()));
    out.push_str(&format!("Phase:      {}", phase(&job)));
    if let Some(r) = s.state.reason.as_deref().filter(|r| !r.is_empty()) {
        out.push_str(&format!(" ({r})"));
    }
    out.push('\n');
    out.push_str(&format!(
        "Pods:       {} pending, {} running, {} succeeded, {} failed (min available {})\n",
        s.pending,
        s.running,
        s.succeeded,
        s.failed,
        job.spec.min_available.unwrap_or(s.min_available)
    ));
    // The PodGroup the job controller made (Volcano's name, `<job>-<uid>`, or the job's own).
    let groups = Api::<PodGroup>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::api("podgroups", e))?;
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let group = groups.items.into_iter().find(|g| {
        g.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid)
            || g.metadata.name.as_deref() == Some(name)
    });
    match &group {
        Some(g) => {
            let gs = g.status.clone().unwrap_or_default();
            out.push_str(&format!(
                "PodGroup:   {} ({}, minMember {})\n",
                g.metadata.name.as_deref().unwrap_or_default(),
                gs.phase
                    .map_or_else(|| "Pending".into(), |p| format!("{p:?}")),
                g.spec.min_member.unwrap_or(1)
            ));
            for c in &gs.conditions {
                out.push_str(&format!(
                    "  {:?}={}: {}: {}\n",
                    c.type_,
                    c.status,
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default()
                ));
            }
            if let Some(line) = expected_start(g, k8s_openapi::jiff::Timestamp::now().as_second()) {
                out.push_str(&line);
            }
            if let Some(basis) = g
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(tephra_api::well_known::EXPECTED_START_BASIS))
            {
                out.push_str(&format!("Assumes:    {basis}\n"));
            }
        }
        None if finished(&job) => out.push_str(
            "PodGroup:   gone (a Job gives its PodGroup up when it finishes, as in Volcano)\n",
        ),
        None => out.push_str("PodGroup:   none yet\n"),
    }
    // Its pods and where each runs (or ran): a member and node in a fleet.
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("{JOB_NAME}={name}")))
        .await
        .map_err(|e| CliError::api("pods", e))?;
    out.push_str(&pod_lines(&pods.items));
    // Where the fleet placed it.
    let gname = group.as_ref().and_then(|g| g.metadata.name.clone());
    if let Some(gn) = &gname
        && let Ok(rb) = Api::<ResourceBinding>::namespaced(client.clone(), ns)
            .get(gn)
            .await
    {
        for c in &rb.spec.clusters {
            let tasks: Vec<String> = c.tasks.iter().map(|(t, n)| format!("{t}={n}")).collect();
            out.push_str(&format!("Cluster:    {} ({})\n", c.name, tasks.join(", ")));
        }
        for t in &rb.spec.graceful_eviction_tasks {
            out.push_str(&format!(
                "Evicting:   from {} ({}: {})\n",
                t.from_cluster,
                t.reason,
                t.message.as_deref().unwrap_or_default()
            ));
        }
    }
    // The last events on the Job and its PodGroup.
    let events = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut mine: Vec<&Event> = events
        .iter()
        .filter(|e| {
            let n = e.involved_object.name.as_deref();
            n == Some(name) || (gname.is_some() && n == gname.as_deref())
        })
        .collect();
    mine.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    out.push_str("Events:\n");
    if mine.is_empty() {
        out.push_str("  none\n");
    }
    for e in mine.iter().rev().take(10).rev() {
        out.push_str(&format!(
            "  {} {} {}: {}\n",
            e.type_.as_deref().unwrap_or("Normal"),
            e.involved_object.kind.as_deref().unwrap_or_default(),
            e.reason.as_deref().unwrap_or_default(),
            e.message.as_deref().unwrap_or_default()
        ));
    }
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(expected: &str) -> PodGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g", "annotations": {"tephra.io/expected-start": expected}},
            "spec": {}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_pod_says_where_it_runs_and_a_declared_pod_how_to_read_its_logs() {
        let message = tephra_api::well_known::placed::message("us-east", "gpu-3", "ml", "w-0");
        let pods = [
            pod(serde_json::json!({
                "metadata": {"name": "w-1", "namespace": "ml"},
                "spec": {"containers": [], "nodeName": "n7"},
                "status": {"phase": "Succeeded"}
            })),
            pod(serde_json::json!({
                "metadata": {"name": "w-0", "namespace": "ml"},
                "spec": {"containers": []},
                "status": {"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True", "reason": "PlacedInMember",
                     "message": message}]}
            })),
            pod(serde_json::json!({
                "metadata": {"name": "w-2", "namespace": "ml"},
                "spec": {"containers": []}
            })),
        ];
        assert_eq!(
            pod_lines(&pods),
            "Where its pods run:\n  w-0 Running member us-east, node gpu-3 (logs: kubectl --context us-east \
             logs -n ml w-0)\n  w-1 Succeeded node n7\n  w-2 Pending not placed\n"
        );
        assert_eq!(pod_lines(&[]), "Where its pods run:\n  none\n");
    }

    #[test]
    fn the_expected_start_is_shown_with_how_far_off_it_is() {
        // 2026-01-01T00:00:00Z
        let now = 1_767_225_600;
        let line = |text: &str| expected_start(&group(text), now);
        assert_eq!(
            line("2026-01-01T01:30:00Z").as_deref(),
            Some("Expected:   2026-01-01T01:30:00Z (in 1h30m0s)\n")
        );
        assert_eq!(
            line("2025-12-31T23:00:00Z").as_deref(),
            Some("Expected:   2025-12-31T23:00:00Z (overdue)\n")
        );
        assert_eq!(
            line("after 2026-01-02T00:00:00Z").as_deref(),
            Some("Expected:   not within 24h0m0s (not before 2026-01-02T00:00:00Z)\n")
        );
        // Never is not "later".
        assert_eq!(
            line("never: its queue does not exist").as_deref(),
            Some("Expected:   never: its queue does not exist\n")
        );
        assert_eq!(
            line("never: it can never be placed as the fleet is (see its condition)").as_deref(),
            Some("Expected:   never: it can never be placed as the fleet is\n")
        );
        assert_eq!(
            line("soon").as_deref(),
            Some("Expected:   \"soon\" (not a time)\n")
        );
    }
}
