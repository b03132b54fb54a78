//! Checks that the CRD schema and its CEL rules cannot express within the API server's cost
//! budget. Volcano's admission webhook makes them; tephra has no webhook, so the job controller
//! refuses such a Job with a condition and an event, and `tephra validate` and the simulator
//! refuse it up front. Each check names the field.
//!
//! These run on an object that the schema has already admitted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::batch::Job;

/// One reason a manifest is refused, with the path of the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path with indexes, e.g. `spec.tasks[1].minAvailable`.
    pub field: String,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl FieldError {
    /// The `StatusCause` reason kube-apiserver gives this error (`FieldValueRequired`,
    /// `FieldValueNotSupported`, ...), by the schema check that made it.
    pub fn reason(&self) -> &'static str {
        let m = self.message.as_str();
        if m.starts_with("is required") || m.starts_with("Required value:") {
            "FieldValueRequired"
        } else if m.starts_with("Forbidden:") {
            "FieldValueForbidden"
        } else if m.starts_with("Duplicate value:") {
            "FieldValueDuplicate"
        } else if m.starts_with("unsupported value") {
            "FieldValueNotSupported"
        } else if m.starts_with("must be of type") {
            "FieldValueTypeInvalid"
        } else if m.starts_with("may not be longer") {
            "FieldValueTooLong"
        } else if m.starts_with("must have at most") {
            "FieldValueTooMany"
        } else {
            "FieldValueInvalid"
        }
    }

    /// Whether kube-apiserver skips a custom resource's CEL rules after this schema error.
    pub fn blocks_rules(&self) -> bool {
        matches!(
            self.reason(),
            "FieldValueRequired"
                | "FieldValueNotSupported"
                | "FieldValueTypeInvalid"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
        )
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// The longest pod name (and hostname) Kubernetes accepts: a DNS-1123 label.
pub const MAX_POD_NAME: usize = 63;

/// Every problem of a Job that only these checks find. Empty means the Job is fine.
pub fn job(job: &Job) -> Vec<FieldError> {
    let mut errors = Vec::new();
    depends_on_dag(job, &mut errors);
    mpi_tasks(job, &mut errors);
    pod_names(job, &mut errors);
    errors
}

/// Queue annotation: Volcano's hierarchy path of a queue, e.g. `root/eng/prod`.
pub const HIERARCHY_ANNOTATION: &str = "volcano.sh/hierarchy";
/// Queue annotation: the weight of each level of the hierarchy path, e.g. `1/2/8`.
pub const HIERARCHY_WEIGHTS_ANNOTATION: &str = "volcano.sh/hierarchy-weights";

/// Every problem of a Queue that the schema cannot see: Volcano's hierarchy annotations must
/// pair one positive weight with each level of the path.
pub fn queue(queue: &crate::Queue) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let annotations = queue.metadata.annotations.clone().unwrap_or_default();
    let path = annotations.get(HIERARCHY_ANNOTATION);
    let weights = annotations.get(HIERARCHY_WEIGHTS_ANNOTATION);
    if path.is_none() && weights.is_none() {
        return errors;
    }
    let field = format!("metadata.annotations[{HIERARCHY_WEIGHTS_ANNOTATION}]");
    let (Some(path), Some(weights)) = (path, weights) else {
        errors.push(FieldError {
            field,
            message: format!(
                "{HIERARCHY_ANNOTATION} and {HIERARCHY_WEIGHTS_ANNOTATION} must be set together"
            ),
        });
        return errors;
    };
    let levels = path.split('/').count();
    let parts: Vec<&str> = weights.split('/').collect();
    if parts.len() != levels {
        errors.push(FieldError {
            field: field.clone(),
            message: format!(
                "{weights:?} has {} weight(s) but {HIERARCHY_ANNOTATION} {path:?} has {levels} \
                 level(s): give one weight per level",
                parts.len()
            ),
        });
    }
    for w in parts {
        match w.trim().parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => {}
            _ => errors.push(FieldError {
                field: field.clone(),
                message: format!("{w:?} in {weights:?} must be a number larger than 0"),
            }),
        }
    }
    errors
}

/// The task names as the job controller defaults them (`default<index>` when unnamed).
fn task_names(job: &Job) -> Vec<String> {
    job.spec
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| match t.name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => format!("default{i}"),
        })
        .collect()
}

/// `dependsOn` must form a directed acyclic graph: no task waits for itself, directly or
/// through others, and no list names a task twice.
fn depends_on_dag(job: &Job, errors: &mut Vec<FieldError>) {
    let names = task_names(job);
    let index: BTreeMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    // waits_for[i]: the tasks task i depends on (known names only: unknown ones are refused by
    // the schema's own rule).
    let mut waits_for: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); names.len()];
    for (i, task) in job.spec.tasks.iter().enumerate() {
        let Some(deps) = &task.depends_on else {
            continue;
        };
        let mut seen = BTreeSet::new();
        for dep in &deps.name {
            if !seen.insert(dep.as_str()) {
                errors.push(FieldError {
                    field: format!("spec.tasks[{i}].dependsOn.name"),
                    message: format!("lists task {dep:?} twice"),
                });
            }
            if let Some(&j) = index.get(dep.as_str()) {
                waits_for[i].insert(j);
            }
        }
    }
    if let Some(cycle) = find_cycle(&waits_for) {
        let path: Vec<&str> = cycle.iter().map(|&i| names[i].as_str()).collect();
        errors.push(FieldError {
            field: format!("spec.tasks[{}].dependsOn", cycle[0]),
            message: format!(
                "tasks depend on each other in a cycle ({} -> {}): dependsOn must form a \
                 directed acyclic graph",
                path.join(" -> "),
                path[0]
            ),
        });
    }
}

/// A cycle in the graph, as the list of its nodes starting at its smallest index.
fn find_cycle(edges: &[BTreeSet<usize>]) -> Option<Vec<usize>> {
    // Iterative depth-first search with colours: 0 unvisited, 1 on the stack, 2 done.
    let mut colour = vec![0u8; edges.len()];
    for start in 0..edges.len() {
        if colour[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, Vec<usize>)> =
            vec![(start, edges[start].iter().copied().collect())];
        colour[start] = 1;
        while let Some((node, pending)) = stack.last_mut() {
            let node = *node;
            match pending.pop() {
                Some(next) if colour[next] == 1 => {
                    let from = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                    let mut cycle: Vec<usize> = stack[from..].iter().map(|(n, _)| *n).collect();
                    let min = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, n)| **n)
                        .map_or(0, |(i, _)| i);
                    cycle.rotate_left(min);
                    return Some(cycle);
                }
                Some(next) if colour[next] == 0 => {
                    colour[next] = 1;
                    stack.push((next, edges[next].iter().copied().collect()));
                }
                Some(_) => {}
                None => {
                    colour[node] = 2;
                    stack.pop();
                }
            }
        }
    }
    None
}

/// Reads a Go `flag`-style argument list (`--name=value`, `-name=value`, `--name value`) for
/// one flag.
fn flag_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        match body.split_once('=') {
            Some((key, value)) if key == name => return Some(value),
            None if body == name => return iter.next().map(String::as_str),
            _ => {}
        }
    }
    None
}

/// The `mpi` job plugin runs `mpirun` on its master task over its worker task: the master
/// (`--master`, default `master`) must be a task of the job, and so must a worker named
/// explicitly with `--worker`.
fn mpi_tasks(job: &Job, errors: &mut Vec<FieldError>) {
    let Some(args) = job.spec.plugins.get("mpi") else {
        return;
    };
    let names = task_names(job);
    let known = |n: &str| names.iter().any(|t| t == n);
    let master = flag_value(args, "master").unwrap_or("master");
    if !known(master) {
        errors.push(FieldError {
            field: "spec.plugins.mpi".into(),
            message: format!(
                "the mpi master task {master:?} is not a task of this job (tasks: {}); name it \
                 with --master=<task>",
                names.join(", ")
            ),
        });
    }
    if let Some(worker) = flag_value(args, "worker")
        && !known(worker)
    {
        errors.push(FieldError {
            field: "spec.plugins.mpi".into(),
            message: format!(
                "the mpi worker task {worker:?} is not a task of this job (tasks: {})",
                names.join(", ")
            ),
        });
    }
}

/// Pods are named `<job>-<task>-<index>`, and that name is also the pod's hostname: it must fit
/// in a DNS label.
fn pod_names(job: &Job, errors: &mut Vec<FieldError>) {
    let job_name = job.metadata.name.as_deref().unwrap_or_default();
    if job_name.is_empty() {
        return;
    }
    for (i, (task, name)) in job.spec.tasks.iter().zip(task_names(job)).enumerate() {
        let last = task.replicas.unwrap_or(0).max(1) - 1;
        let pod = format!("{job_name}-{name}-{last}");
        if pod.len() > MAX_POD_NAME {
            errors.push(FieldError {
                field: format!("spec.tasks[{i}].name"),
                message: format!(
                    "pod name {pod:?} would be {} characters, more than the {MAX_POD_NAME} a pod \
                     name (and hostname) may have: shorten the job or task name",
                    pod.len()
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(yaml: serde_json::Value) -> Job {
        serde_json::from_value(yaml).expect("a Job")
    }

    fn base(tasks: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "n"},
            "spec": {"tasks": tasks}
        })
    }

    #[test]
    fn a_depends_on_cycle_is_refused_naming_the_cycle() {
        let j = job(base(serde_json::json!([
            {"name": "a", "replicas": 1, "dependsOn": {"name": ["c"]}},
            {"name": "b", "replicas": 1, "dependsOn": {"name": ["a"]}},
            {"name": "c", "replicas": 1, "dependsOn": {"name": ["b"]}},
            {"name": "d", "replicas": 1, "dependsOn": {"name": ["a"]}},
        ])));
        let errors = super::job(&j);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "spec.tasks[0].dependsOn");
        assert!(errors[0].message.contains("a -> c -> b -> a"), "{errors:?}");
    }

    #[test]
    fn a_dag_with_shared_dependencies_passes() {
        let j = job(base(serde_json::json!([
            {"name": "a", "replicas": 1},
            {"name": "b", "replicas": 1, "dependsOn": {"name": ["a"]}},
            {"name": "c", "replicas": 1, "dependsOn": {"name": ["a", "b"], "iteration": "all"}},
        ])));
        assert_eq!(super::job(&j), vec![]);
    }

    #[test]
    fn a_task_listed_twice_in_depends_on_is_refused() {
        let j = job(base(serde_json::json!([
            {"name": "a", "replicas": 1},
            {"name": "b", "replicas": 1, "dependsOn": {"name": ["a", "a"]}},
        ])));
        let errors = super::job(&j);
        assert_eq!(errors[0].field, "spec.tasks[1].dependsOn.name");
    }

    #[test]
    fn the_mpi_master_must_be_a_task_in_every_flag_form() {
        for args in [
            serde_json::json!([]),
            serde_json::json!(["--master=launcher"]),
            serde_json::json!(["-master", "launcher"]),
        ] {
            let mut doc = base(serde_json::json!([{"name": "worker", "replicas": 2}]));
            doc["spec"]["plugins"] = serde_json::json!({"mpi": args});
            let errors = super::job(&job(doc));
            assert_eq!(errors.len(), 1, "{args}: {errors:?}");
            assert_eq!(errors[0].field, "spec.plugins.mpi");
        }
        let mut doc = base(serde_json::json!([
            {"name": "launcher", "replicas": 1}, {"name": "worker", "replicas": 2}
        ]));
        doc["spec"]["plugins"] = serde_json::json!({"mpi": ["--master=launcher", "--port=2222"]});
        assert_eq!(super::job(&job(doc)), vec![]);
    }

    #[test]
    fn an_explicit_mpi_worker_must_exist_but_a_default_one_need_not() {
        let mut doc = base(serde_json::json!([{"name": "master", "replicas": 1}]));
        doc["spec"]["plugins"] = serde_json::json!({"mpi": []});
        assert_eq!(super::job(&job(doc.clone())), vec![]);
        doc["spec"]["plugins"] = serde_json::json!({"mpi": ["--worker=workers"]});
        let errors = super::job(&job(doc));
        assert!(errors[0].message.contains("\"workers\""), "{errors:?}");
    }

    fn queue_with(annotations: serde_json::Value) -> crate::Queue {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "q", "annotations": annotations}
        }))
        .expect("a Queue")
    }

    #[test]
    fn hierarchy_annotations_need_one_positive_weight_per_level() {
        let ok = queue_with(serde_json::json!({
            "volcano.sh/hierarchy": "root/eng/prod", "volcano.sh/hierarchy-weights": "1/2/8"
        }));
        assert_eq!(super::queue(&ok), vec![]);
        let short = queue_with(serde_json::json!({
            "volcano.sh/hierarchy": "root/eng/prod", "volcano.sh/hierarchy-weights": "1/2"
        }));
        assert!(
            super::queue(&short)[0]
                .message
                .contains("one weight per level")
        );
        let zero = queue_with(serde_json::json!({
            "volcano.sh/hierarchy": "root/eng", "volcano.sh/hierarchy-weights": "1/0"
        }));
        assert!(super::queue(&zero)[0].message.contains("larger than 0"));
        let alone = queue_with(serde_json::json!({"volcano.sh/hierarchy": "root/eng"}));
        assert!(super::queue(&alone)[0].message.contains("set together"));
    }

    #[test]
    fn a_pod_name_longer_than_a_dns_label_is_refused() {
        let mut doc = base(serde_json::json!([{"name": "worker", "replicas": 100}]));
        doc["metadata"]["name"] = serde_json::json!("a".repeat(53));
        // 53 + "-worker-" (8) + "99" = 63: fits.
        assert_eq!(super::job(&job(doc.clone())), vec![]);
        doc["spec"]["tasks"][0]["replicas"] = serde_json::json!(101);
        let errors = super::job(&job(doc));
        assert_eq!(errors[0].field, "spec.tasks[0].name");
    }
}
