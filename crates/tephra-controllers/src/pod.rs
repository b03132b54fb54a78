//! What one pod asks of the scheduler, read from its Kubernetes spec: effective requests (as
//! kube-scheduler computes them), node selector, required and preferred node affinity,
//! tolerations, inter-pod affinity and anti-affinity, topology spread constraints, host ports,
//! scheduling gates, and its labels. The job controller reads a
//! task's pod template with it; the Kubernetes runtime reads pods that integrations create.
//!
//! Anything the scheduler has no meaning for (an unknown operator or effect) is an error that
//! names the field, never silently dropped.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, NodeSelectorRequirement, PodAffinityTerm, PodSpec, Taint as K8sTaint,
    Toleration as K8sToleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sLabelSelector;
use tephra_scheduler::model::{
    HostPort, LabelSelector, Labels, Namespaces, PodRules, PodTerm, Requirement, SelectorOp,
    SpreadTerm, Taint, TaintEffect, Toleration, Weighted, WhenUnsatisfiable,
};

/// A value the scheduler has no meaning for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: unknown value {value:?} (known: {known})")]
pub struct UnknownValue {
    /// Field path.
    pub field: String,
    /// The value.
    pub value: String,
    /// The values that are known.
    pub known: &'static str,
}

/// A resource amount of a pod that the scheduler cannot use. Each names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Not a Kubernetes quantity.
    #[error("{field}: {value:?} is not a Kubernetes quantity")]
    Malformed {
        /// Field path.
        field: String,
        /// The text.
        value: String,
    },
    /// Below zero.
    #[error("{field}: {value:?} must not be negative")]
    Negative {
        /// Field path.
        field: String,
        /// The text.
        value: String,
    },
    /// So large that the pod's total does not fit in 128 bits of thousandths.
    #[error("{field}: {value:?} brings the pod's total past what can be counted")]
    TooLarge {
        /// Field path.
        field: String,
        /// The text.
        value: String,
    },
}

/// One amount of a pod's effective requests, in thousandths of its unit (exact: 9Pi of memory
/// is more millibytes than `i64` holds), with its Kubernetes text.
#[derive(Clone)]
struct Amount {
    milli: i128,
    text: Quantity,
}

/// Reads one amount, refusing text that is not a quantity and negative values.
fn amount(q: &Quantity, field: String) -> Result<Amount, RequestError> {
    let milli = tephra_scheduler::quantity::parse_scaled_wide(&q.0, 1000).map_err(|_| {
        RequestError::Malformed {
            field: field.clone(),
            value: q.0.clone(),
        }
    })?;
    if milli < 0 {
        return Err(RequestError::Negative {
            field,
            value: q.0.clone(),
        });
    }
    Ok(Amount {
        milli,
        text: q.clone(),
    })
}

/// A quantity in thousandths of its unit (exact; rounds up below that).
#[cfg(test)]
pub(crate) fn parse_milli(text: &str) -> Option<i64> {
    tephra_scheduler::quantity::parse_scaled(text, 1000).ok()
}

/// A container's requests, each with the field it comes from: a missing request defaults to
/// the limit, as in Kubernetes.
fn container_requests(c: &Container, at: &str) -> Result<BTreeMap<String, Amount>, RequestError> {
    let mut out = BTreeMap::new();
    if let Some(r) = &c.resources {
        for (kind, list) in [("limits", &r.limits), ("requests", &r.requests)] {
            for (k, v) in list.iter().flatten() {
                let field = format!("{at}.resources.{kind}.{k}");
                out.insert(k.clone(), amount(v, field)?);
            }
        }
    }
    Ok(out)
}

/// Adds `v` to the amount of `name` in `sum`, keeping Kubernetes text form (thousandths).
fn add(
    sum: &mut BTreeMap<String, Amount>,
    name: &str,
    v: &Amount,
    field: impl FnOnce() -> String,
) -> Result<(), RequestError> {
    let e = sum.entry(name.to_string()).or_insert_with(zero);
    let milli = e
        .milli
        .checked_add(v.milli)
        .ok_or_else(|| RequestError::TooLarge {
            field: field(),
            value: v.text.0.clone(),
        })?;
    *e = Amount {
        milli,
        text: Quantity(format!("{milli}m")),
    };
    Ok(())
}

fn zero() -> Amount {
    Amount {
        milli: 0,
        text: Quantity("0".into()),
    }
}

/// The path of a pod spec under `at` (a Job's task template), or of a pod's own spec when `at`
/// is empty.
fn spec_path(at: &str) -> String {
    if at.is_empty() {
        "spec".to_string()
    } else {
        format!("{at}.spec")
    }
}

/// The effective requests of a pod, as kube-scheduler computes them: containers and sidecars
/// summed, or the most any init container needs beside the sidecars started before it if that
/// is more, limits standing in for missing requests, pod overhead added. An
/// amount that is not a quantity, or is negative, is an error naming its field under `at`
/// (`spec.tasks[0].template.spec.containers[1].resources.requests.memory`).
/// An empty `at` is a pod of its own (`spec.containers[0]...`).
pub fn requests(spec: &PodSpec, at: &str) -> Result<BTreeMap<String, Quantity>, RequestError> {
    let at = spec_path(at);
    let mut sum: BTreeMap<String, Amount> = BTreeMap::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let base = format!("{at}.containers[{i}]");
        for (k, v) in container_requests(c, &base)? {
            add(&mut sum, &k, &v, || {
                format!("{base}.resources.requests.{k}")
            })?;
        }
    }
    // Init containers run one at a time, each beside the sidecars (init containers with
    // `restartPolicy: Always`) started before it; sidecars then keep running beside the
    // containers. The pod needs the larger of the two phases.
    let mut sidecars: BTreeMap<String, Amount> = BTreeMap::new();
    let mut init_phase: BTreeMap<String, Amount> = BTreeMap::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let base = format!("{at}.initContainers[{i}]");
        let own = container_requests(c, &base)?;
        let field = |k: &str| format!("{base}.resources.requests.{k}");
        let mut need = sidecars.clone();
        for (k, v) in &own {
            add(&mut need, k, v, || field(k))?;
        }
        if c.restart_policy.as_deref() == Some("Always") {
            for (k, v) in &own {
                add(&mut sum, k, v, || field(k))?;
                add(&mut sidecars, k, v, || field(k))?;
            }
        }
        for (k, v) in need {
            let e = init_phase.entry(k).or_insert_with(zero);
            if v.milli > e.milli {
                *e = v;
            }
        }
    }
    for (k, v) in init_phase {
        let e = sum.entry(k).or_insert_with(zero);
        if v.milli > e.milli {
            *e = v;
        }
    }
    for (k, v) in spec.overhead.iter().flatten() {
        let field = format!("{at}.overhead.{k}");
        let v = amount(v, field.clone())?;
        add(&mut sum, k, &v, || field)?;
    }
    Ok(sum.into_iter().map(|(k, v)| (k, v.text)).collect())
}

fn requirement(r: &NodeSelectorRequirement, field: String) -> Result<Requirement, UnknownValue> {
    let op = SelectorOp::parse(&r.operator).ok_or_else(|| UnknownValue {
        field,
        value: r.operator.clone(),
        known: "In, NotIn, Exists, DoesNotExist, Gt, Lt",
    })?;
    Ok(Requirement {
        key: r.key.clone(),
        op,
        values: r.values.clone().unwrap_or_default(),
    })
}

/// Required node affinity: node selector terms ORed, the match expressions of a term ANDed.
pub fn node_affinity(pod: &PodSpec, at: &str) -> Result<Vec<Vec<Requirement>>, UnknownValue> {
    let Some(required) = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Ok(Vec::new());
    };
    let base = format!(
        "{}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        spec_path(at)
    );
    required
        .node_selector_terms
        .iter()
        .enumerate()
        .map(|(t, term)| {
            term.match_expressions
                .iter()
                .flatten()
                .enumerate()
                .map(|(e, expr)| {
                    requirement(expr, format!("{base}[{t}].matchExpressions[{e}].operator"))
                })
                .collect()
        })
        .collect()
}

/// Tolerations as the scheduler models them: an empty operator is `Equal`, an empty effect
/// tolerates every effect.
pub fn tolerations(pod: &PodSpec, at: &str) -> Result<Vec<Toleration>, UnknownValue> {
    toleration_list(
        pod.tolerations.as_deref().unwrap_or_default(),
        &format!("{}.tolerations", spec_path(at)),
    )
}

/// A node's or cluster's Kubernetes taints as the scheduler models them; a taint with an effect
/// Kubernetes does not know taints nothing (the API server refuses it on nodes).
pub fn taint_list(list: &[K8sTaint]) -> Vec<Taint> {
    list.iter()
        .filter_map(|t| {
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect()
}

/// A list of Kubernetes tolerations as the scheduler models them; `field` names the list in
/// errors (`spec.tolerations`, `spec.placement.clusterTolerations`).
pub fn toleration_list(
    list: &[K8sToleration],
    field: &str,
) -> Result<Vec<Toleration>, UnknownValue> {
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(UnknownValue {
                    field: format!("{field}[{i}].operator"),
                    value: other.to_string(),
                    known: "Equal, Exists",
                });
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(TaintEffect::parse(e).ok_or_else(|| UnknownValue {
                field: format!("{field}[{i}].effect"),
                value: e.to_string(),
                known: "NoSchedule, PreferNoSchedule, NoExecute",
            })?),
        };
        out.push(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
            seconds: t.toleration_seconds,
        });
    }
    Ok(out)
}

/// A Kubernetes label selector as the scheduler matches it; `at` prefixes field paths in errors.
pub fn label_selector(s: &K8sLabelSelector, at: &str) -> Result<LabelSelector, UnknownValue> {
    let expressions = s
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(e, r)| {
            let op = match r.operator.as_str() {
                "In" => SelectorOp::In,
                "NotIn" => SelectorOp::NotIn,
                "Exists" => SelectorOp::Exists,
                "DoesNotExist" => SelectorOp::DoesNotExist,
                other => {
                    return Err(UnknownValue {
                        field: format!("{at}.labelSelector.matchExpressions[{e}].operator"),
                        value: other.to_string(),
                        known: "In, NotIn, Exists, DoesNotExist",
                    });
                }
            };
            Ok(Requirement {
                key: r.key.clone(),
                op,
                values: r.values.clone().unwrap_or_default(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        expressions,
    })
}

fn pod_term(t: &PodAffinityTerm, at: &str) -> Result<PodTerm, UnknownValue> {
    let namespaces = if t.namespace_selector.is_some() {
        Namespaces::All
    } else {
        match &t.namespaces {
            Some(list) if !list.is_empty() => Namespaces::Listed(list.clone()),
            _ => Namespaces::Own,
        }
    };
    Ok(PodTerm {
        selector: t
            .label_selector
            .as_ref()
            .map(|s| label_selector(s, at))
            .transpose()?,
        topology_key: t.topology_key.clone(),
        namespaces,
    })
}

/// The host ports a pod's containers ask for: those of its containers and of its sidecars
/// (init containers that keep running, `restartPolicy: Always`), as kube-scheduler counts them.
/// A port of 0 or less asks for nothing.
pub fn host_ports(pod: &PodSpec) -> Vec<HostPort> {
    let sidecars = pod
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut out: Vec<HostPort> = Vec::new();
    for c in pod.containers.iter().chain(sidecars) {
        for p in c.ports.iter().flatten() {
            let Some(port) = p
                .host_port
                .and_then(|h| u16::try_from(h).ok())
                .filter(|h| *h > 0)
            else {
                continue;
            };
            let hp = HostPort::new(
                port,
                p.protocol.as_deref().unwrap_or_default(),
                p.host_ip.as_deref().unwrap_or_default(),
            );
            if !out.contains(&hp) {
                out.push(hp);
            }
        }
    }
    out
}

/// A pod's topology spread constraints, with `matchLabelKeys` folded into each selector (the
/// pod's own value of each key it carries, as the API server and kube-scheduler do).
pub fn spread(pod: &PodSpec, labels: &Labels, at: &str) -> Result<Vec<SpreadTerm>, UnknownValue> {
    let base = format!("{}.topologySpreadConstraints", spec_path(at));
    let policy = |v: Option<&String>, field: String, default: bool| match v.map(String::as_str) {
        None | Some("") => Ok(default),
        Some("Honor") => Ok(true),
        Some("Ignore") => Ok(false),
        Some(other) => Err(UnknownValue {
            field,
            value: other.to_string(),
            known: "Honor, Ignore",
        }),
    };
    let mut out = Vec::new();
    for (i, c) in pod.topology_spread_constraints.iter().flatten().enumerate() {
        let at_i = format!("{base}[{i}]");
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(UnknownValue {
                    field: format!("{at_i}.whenUnsatisfiable"),
                    value: other.to_string(),
                    known: "DoNotSchedule, ScheduleAnyway",
                });
            }
        };
        let mut selector = c
            .label_selector
            .as_ref()
            .map(|s| label_selector(s, &at_i))
            .transpose()?;
        if let Some(sel) = selector.as_mut() {
            for key in c.match_label_keys.iter().flatten() {
                if let Some(v) = labels.get(key) {
                    let r = Requirement {
                        key: key.clone(),
                        op: SelectorOp::In,
                        values: vec![v.clone()],
                    };
                    if !sel.expressions.contains(&r) {
                        sel.expressions.push(r);
                    }
                }
            }
        }
        out.push(SpreadTerm {
            max_skew: u32::try_from(c.max_skew).unwrap_or(1).max(1),
            topology_key: c.topology_key.clone(),
            when_unsatisfiable,
            selector,
            min_domains: c
                .min_domains
                .and_then(|m| u32::try_from(m).ok())
                .unwrap_or(1)
                .max(1),
            honor_node_affinity: policy(
                c.node_affinity_policy.as_ref(),
                format!("{at_i}.nodeAffinityPolicy"),
                true,
            )?,
            honor_taints: policy(
                c.node_taints_policy.as_ref(),
                format!("{at_i}.nodeTaintsPolicy"),
                false,
            )?,
        });
    }
    Ok(out)
}

/// The PersistentVolumeClaims a pod's volumes use: each `persistentVolumeClaim` volume's claim
/// and, when the pod's name is known, each generic ephemeral volume's (`<pod>-<volume>`, the
/// claim Kubernetes creates for it).
pub fn claims(pod: &PodSpec, pod_name: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in pod.volumes.iter().flatten() {
        let name = match (&v.persistent_volume_claim, &v.ephemeral, pod_name) {
            (Some(pvc), _, _) => pvc.claim_name.clone(),
            (None, Some(_), Some(pod)) => format!("{pod}-{}", v.name),
            _ => continue,
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Labels, preferred node affinity, inter-pod affinity, topology spread constraints, host ports,
/// scheduling gates and volume claims of a pod with `labels`.
pub fn rules(pod: &PodSpec, labels: &Labels, at: &str) -> Result<PodRules, UnknownValue> {
    let mut rules = PodRules {
        labels: labels.clone(),
        spread: spread(pod, labels, at)?,
        host_ports: host_ports(pod),
        gates: pod
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        claims: claims(pod, None),
        ..PodRules::default()
    };
    let Some(affinity) = &pod.affinity else {
        return Ok(rules);
    };
    let base = format!("{}.affinity", spec_path(at));
    if let Some(preferred) = affinity.node_affinity.as_ref().and_then(|n| {
        n.preferred_during_scheduling_ignored_during_execution
            .as_ref()
    }) {
        for (i, p) in preferred.iter().enumerate() {
            let term = p
                .preference
                .match_expressions
                .iter()
                .flatten()
                .enumerate()
                .map(|(e, expr)| {
                    requirement(
                        expr,
                        format!(
                            "{base}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference.matchExpressions[{e}].operator"
                        ),
                    )
                })
                .collect::<Result<_, _>>()?;
            rules.preferred_nodes.push(Weighted {
                weight: p.weight,
                term,
            });
        }
    }
    for (kind, source, required, preferred) in [
        (
            "podAffinity",
            affinity.pod_affinity.as_ref().map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
            &mut rules.affinity,
            &mut rules.preferred_affinity,
        ),
        (
            "podAntiAffinity",
            affinity.pod_anti_affinity.as_ref().map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
            &mut rules.anti_affinity,
            &mut rules.preferred_anti_affinity,
        ),
    ] {
        let Some((req, pref)) = source else {
            continue;
        };
        for (i, t) in req.iter().flatten().enumerate() {
            required.push(pod_term(
                t,
                &format!("{base}.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
            )?);
        }
        for (i, w) in pref.iter().flatten().enumerate() {
            preferred.push(Weighted {
                weight: w.weight,
                term: pod_term(
                    &w.pod_affinity_term,
                    &format!(
                        "{base}.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm"
                    ),
                )?,
            });
        }
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).expect("a pod spec")
    }

    #[test]
    fn pod_affinity_terms_are_read_with_their_namespaces_and_weights() {
        let pod = spec(serde_json::json!({
            "containers": [{"name": "c"}],
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                ]},
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "podAffinityTerm": {
                        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]},
                        "topologyKey": "zone", "namespaces": ["data"]}}
                ]},
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}
                ]}
            }
        }));
        let labels = Labels::from([("app".to_string(), "web".to_string())]);
        let r = rules(&pod, &labels, "pod").expect("reads");
        assert_eq!(r.labels, labels);
        assert_eq!(r.anti_affinity[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(r.anti_affinity[0].namespaces, Namespaces::Own);
        assert_eq!(r.preferred_affinity[0].weight, 50);
        assert_eq!(
            r.preferred_affinity[0].term.namespaces,
            Namespaces::Listed(vec!["data".into()])
        );
        assert_eq!(r.preferred_nodes[0].weight, 10);
    }

    /// Found by the fit differential against the real kube-scheduler (seed 172): a sidecar's
    /// requests add to the containers', and an init container needs its own beside the
    /// sidecars started before it (KEP-753, as kube-scheduler sums them).
    #[test]
    fn sidecars_add_to_the_containers_and_run_beside_later_init_containers() {
        let cpu = |r: &BTreeMap<String, Quantity>| r.get("cpu").map(|q| q.0.clone());
        let c = |name: &str, cpu: &str, sidecar: bool| {
            let mut c = serde_json::json!({"name": name,
                "resources": {"requests": {"cpu": cpu}}});
            if sidecar {
                c["restartPolicy"] = serde_json::json!("Always");
            }
            c
        };
        // One 500m container, one 500m sidecar: 1 CPU (it was 500m, as if the sidecar ran
        // only before the containers).
        let pod = spec(serde_json::json!({"containers": [c("main", "500m", false)],
            "initContainers": [c("proxy", "500m", true)]}));
        assert_eq!(
            cpu(&requests(&pod, "").expect("reads")),
            Some("1000m".into())
        );
        // A 2-CPU init container after a 300m sidecar needs 2.3 CPUs while it runs, more than
        // the 1.3 of the running phase.
        let pod = spec(serde_json::json!({"containers": [c("main", "1", false)],
            "initContainers": [c("proxy", "300m", true), c("setup", "2", false)]}));
        assert_eq!(
            cpu(&requests(&pod, "").expect("reads")),
            Some("2300m".into())
        );
        // An init container before the sidecar runs alone.
        let pod = spec(serde_json::json!({"containers": [c("main", "1", false)],
            "initContainers": [c("setup", "2", false), c("proxy", "300m", true)]}));
        assert_eq!(
            cpu(&requests(&pod, "").expect("reads")),
            Some("2000m".into())
        );
    }

    #[test]
    fn an_unknown_selector_operator_names_the_field() {
        let pod = spec(serde_json::json!({
            "containers": [{"name": "c"}],
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
                 "topologyKey": "zone"}
            ]}}
        }));
        let e = rules(&pod, &Labels::new(), "pod").expect_err("Gt is not a label operator");
        assert!(
            e.field.ends_with(
                "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"
            ),
            "{e}"
        );
    }
}
