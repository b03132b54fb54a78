//! The kubelet's admission of a pod bound to its node, as the real kubelet's predicate handler
//! decides it (`pkg/kubelet/lifecycle/predicate.go`): requests against what the node's
//! admitted pods leave free, then the pod's node selector and required node affinity, its node
//! name, its host ports against those of the admitted pods, and last the node's `NoExecute`
//! taints (`NoSchedule` taints are the scheduler's business, not the kubelet's). Only the
//! first failure is reported, with the kubelet's reason and message; the caller fails the pod
//! with it ("Pod was rejected: ...").
//!
//! Pure functions over the pod's JSON and what the kubelet knows of its node.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::quantity;

/// One host port: (host IP, protocol, port), with Kubernetes' defaults (`0.0.0.0`, `TCP`).
pub type HostPort = (String, String, i64);

/// What the kubelet knows of its node.
#[derive(Clone, Debug, Default)]
pub struct NodeFacts {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints, as Kubernetes objects.
    pub taints: Vec<Value>,
    /// Allocatable, in thousandths.
    pub allocatable: HashMap<String, i128>,
}

/// Why the kubelet refuses a pod: the pod's `status.reason` and the message (without the
/// "Pod was rejected: " prefix the status message carries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `OutOfcpu`, `NodeAffinity`, `NodeName`, `NodePorts`, `TaintToleration`.
    pub reason: String,
    /// What the Event says.
    pub message: String,
}

fn predicate(name: &str, why: &str) -> Refusal {
    Refusal {
        reason: name.to_string(),
        message: format!("Predicate {name} failed: {why}"),
    }
}

/// The host ports a pod asks for: its containers' and its sidecars' (init containers with
/// `restartPolicy: Always`), ports of 0 or less left out.
pub fn host_ports(pod: &Value) -> Vec<HostPort> {
    let list = |p: &str| {
        pod.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let sidecars = list("/spec/initContainers")
        .into_iter()
        .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"));
    let mut out = Vec::new();
    for c in sidecars.chain(list("/spec/containers")) {
        for p in c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let port = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if port <= 0 {
                continue;
            }
            let ip = p
                .get("hostIP")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("0.0.0.0");
            let protocol = p
                .get("protocol")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("TCP");
            out.push((ip.to_string(), protocol.to_string(), port));
        }
    }
    out
}

/// Whether a port wanted clashes with one in use: same protocol and port, on the same IP or
/// where either is the wildcard.
fn clashes(want: &HostPort, used: &HostPort) -> bool {
    want.1 == used.1
        && want.2 == used.2
        && (want.0 == used.0 || want.0 == "0.0.0.0" || used.0 == "0.0.0.0")
}

/// Whether one node-selector requirement holds for a node (`key` a label, or for `matchFields`
/// the field `metadata.name`).
fn requirement(r: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = r
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let number = |s: &str| s.parse::<i64>().ok();
    match r
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(number), values.first().and_then(|b| number(b))), (Some(v), Some(b)) if v > b)
        }
        "Lt" => {
            matches!((value.and_then(number), values.first().and_then(|b| number(b))), (Some(v), Some(b)) if v < b)
        }
        _ => false,
    }
}

/// Whether the pod's node selector and required node affinity admit the node: every selector
/// pair, and one of the required terms (a term with no requirement matches nothing).
pub fn node_affinity_matches(
    pod: &Value,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let selector_ok = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    if !selector_ok {
        return false;
    }
    let Some(terms) = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    else {
        return true;
    };
    terms_match(terms, node_name, labels)
}

/// Whether node selector terms (ORed; the requirements of one ANDed, a term with none matching
/// nothing) admit the node.
pub fn terms_match(terms: &[Value], node_name: &str, labels: &BTreeMap<String, String>) -> bool {
    terms.iter().any(|t| {
        let exprs = t.get("matchExpressions").and_then(Value::as_array);
        let fields = t.get("matchFields").and_then(Value::as_array);
        let n = exprs.map_or(0, Vec::len) + fields.map_or(0, Vec::len);
        n > 0
            && exprs.into_iter().flatten().all(|r| {
                let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
                requirement(r, labels.get(key).map(String::as_str))
            })
            && fields.into_iter().flatten().all(|r| {
                let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
                requirement(r, (key == "metadata.name").then_some(node_name))
            })
    })
}

/// Whether one of the pod's tolerations tolerates a taint.
fn tolerated(pod: &Value, taint: &Value) -> bool {
    let field = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (key, value, effect) = (
        field(taint, "key"),
        field(taint, "value"),
        field(taint, "effect"),
    );
    pod.pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|t| {
            let t_effect = field(t, "effect");
            if !t_effect.is_empty() && t_effect != effect {
                return false;
            }
            let t_key = field(t, "key");
            match field(t, "operator").as_str() {
                "Exists" => t_key.is_empty() || t_key == key,
                _ => t_key == key && field(t, "value") == value,
            }
        })
}

/// A pod's requests, as the kubelet sums them: its containers and sidecars (limits stand in for
/// missing requests), or the most any init container needs beside the sidecars started before
/// it if that is more, plus its overhead and one `pods` slot.
pub fn pod_requests(pod: &Value) -> HashMap<String, i128> {
    let of = |c: &Value| -> HashMap<String, i128> {
        let mut out = HashMap::new();
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        for map in [lim, req].into_iter().flatten() {
            for (k, v) in map {
                if let Some(q) = v
                    .as_str()
                    .map(String::from)
                    .or_else(|| v.as_i64().map(|n| n.to_string()))
                    .and_then(|s| quantity::parse_milli(&s))
                {
                    out.insert(k.clone(), q);
                }
            }
        }
        out
    };
    let mut total: HashMap<String, i128> = HashMap::new();
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (k, v) in of(c) {
            *total.entry(k).or_default() += v;
        }
    }
    // Init containers run one at a time beside the sidecars (`restartPolicy: Always`) started
    // before them; sidecars then run beside the containers (KEP-753).
    let mut sidecars: HashMap<String, i128> = HashMap::new();
    let mut init_phase: HashMap<String, i128> = HashMap::new();
    for c in pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let own = of(c);
        let mut need = sidecars.clone();
        for (k, v) in &own {
            *need.entry(k.clone()).or_default() += v;
        }
        if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            for (k, v) in &own {
                *total.entry(k.clone()).or_default() += v;
                *sidecars.entry(k.clone()).or_default() += v;
            }
        }
        for (k, v) in need {
            let e = init_phase.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    for (k, v) in init_phase {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    // The RuntimeClass's overhead, which admission copied into the pod.
    for (k, v) in pod
        .pointer("/spec/overhead")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(q) = v.as_str().and_then(quantity::parse_milli) {
            *total.entry(k.clone()).or_default() += q;
        }
    }
    total.insert("pods".into(), 1000);
    total
}

/// Whether the kubelet of `node_name` admits `pod`, given the requests (`requests`, summed as
/// [`pod_requests`] does) and host ports of the pods it already runs.
pub fn admit(
    pod: &Value,
    requests: &HashMap<String, i128>,
    node_name: &str,
    node: &NodeFacts,
    used: &HashMap<String, i128>,
    ports_in_use: &[HostPort],
) -> Result<(), Refusal> {
    // Resources: pods first, then cpu, memory, ephemeral storage, then the others by name.
    let mut names: Vec<&String> = requests.keys().collect();
    names.sort_by_key(|k| {
        let rank = ["pods", "cpu", "memory", "ephemeral-storage"]
            .iter()
            .position(|r| r == k)
            .unwrap_or(4);
        (rank, (*k).clone())
    });
    for k in names {
        let want = requests[k];
        if want <= 0 {
            continue;
        }
        let capacity = node.allocatable.get(k).copied().unwrap_or(0);
        let in_use = used.get(k).copied().unwrap_or(0);
        if in_use + want > capacity {
            return Err(Refusal {
                reason: format!("OutOf{k}"),
                message: format!(
                    "Node didn't have enough resource: {k}, requested: {}, used: {}, capacity: {}",
                    quantity::display(k, want),
                    quantity::display(k, in_use),
                    quantity::display(k, capacity)
                ),
            });
        }
    }
    if !node_affinity_matches(pod, node_name, &node.labels) {
        return Err(predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    let bound_to = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !bound_to.is_empty() && bound_to != node_name {
        return Err(predicate(
            "NodeName",
            "node(s) didn't match the requested node name",
        ));
    }
    let wanted = host_ports(pod);
    if wanted
        .iter()
        .any(|w| ports_in_use.iter().any(|u| clashes(w, u)))
    {
        return Err(predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    let untolerated = node.taints.iter().any(|t| {
        t.get("effect").and_then(Value::as_str) == Some("NoExecute") && !tolerated(pod, t)
    });
    if untolerated {
        return Err(predicate(
            "TaintToleration",
            "node(s) had taints that the pod didn't tolerate",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(labels: &[(&str, &str)], taints: Vec<Value>) -> NodeFacts {
        NodeFacts {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints,
            allocatable: HashMap::from([("cpu".into(), 4000), ("pods".into(), 110_000)]),
        }
    }

    fn requests() -> HashMap<String, i128> {
        HashMap::from([("cpu".into(), 1000), ("pods".into(), 1000)])
    }

    #[test]
    fn sidecars_and_overhead_count_as_the_kubelet_counts_them() {
        let pod = json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "300m"}}},
                {"resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "250m"}}});
        // The 2-CPU init container runs beside the 300m sidecar: 2.3, more than the 1.3 of the
        // running phase; then the overhead.
        assert_eq!(pod_requests(&pod)["cpu"], 2550);
        let pod = json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "500m"}}}],
            "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}]}});
        assert_eq!(pod_requests(&pod)["cpu"], 1000);
    }

    #[test]
    fn requests_sum_containers_and_take_limits_for_missing_requests() {
        let pod = json!({"spec": {"containers": [
            {"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}]}});
        let r = pod_requests(&pod);
        assert_eq!(r["cpu"], 4000);
        assert_eq!(r["nvidia.com/gpu"], 2000);
        assert_eq!(r["memory"], 1_073_741_824_000);
        assert_eq!(r["pods"], 1000);
    }

    #[test]
    fn the_first_failure_is_the_one_reported_in_the_kubelets_order() {
        let pod = json!({"spec": {"nodeSelector": {"disk": "ssd"},
            "containers": [{"ports": [{"containerPort": 80, "hostPort": 80}]}]}});
        let ports = vec![("0.0.0.0".to_string(), "TCP".to_string(), 80)];
        let r = admit(
            &pod,
            &requests(),
            "n",
            &facts(&[], vec![]),
            &HashMap::new(),
            &ports,
        )
        .unwrap_err();
        assert_eq!(r.reason, "NodeAffinity");
        let r = admit(
            &pod,
            &requests(),
            "n",
            &facts(&[("disk", "ssd")], vec![]),
            &HashMap::new(),
            &ports,
        )
        .unwrap_err();
        assert_eq!(r.reason, "NodePorts");
        assert_eq!(
            r.message,
            "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
        );
        let full = HashMap::from([("cpu".to_string(), 3500)]);
        let r = admit(&pod, &requests(), "n", &facts(&[], vec![]), &full, &ports).unwrap_err();
        assert_eq!(r.reason, "OutOfcpu");
    }

    #[test]
    fn ports_clash_on_the_wildcard_address_and_the_same_address_only() {
        let pod =
            json!({"spec": {"containers": [{"ports": [{"hostPort": 80, "hostIP": "10.0.0.1"}]}]}});
        let other_ip = vec![("10.0.0.2".to_string(), "TCP".to_string(), 80)];
        let udp = vec![("0.0.0.0".to_string(), "UDP".to_string(), 80)];
        let any = vec![("0.0.0.0".to_string(), "TCP".to_string(), 80)];
        let f = facts(&[], vec![]);
        assert!(admit(&pod, &requests(), "n", &f, &HashMap::new(), &other_ip).is_ok());
        assert!(admit(&pod, &requests(), "n", &f, &HashMap::new(), &udp).is_ok());
        assert!(admit(&pod, &requests(), "n", &f, &HashMap::new(), &any).is_err());
    }

    #[test]
    fn only_untolerated_no_execute_taints_refuse_a_pod() {
        let no_schedule = json!({"key": "k", "effect": "NoSchedule"});
        let no_execute = json!({"key": "k", "value": "v", "effect": "NoExecute"});
        let pod = json!({"spec": {"containers": [{}]}});
        let f = facts(&[], vec![no_schedule]);
        assert!(admit(&pod, &requests(), "n", &f, &HashMap::new(), &[]).is_ok());
        let f = facts(&[], vec![no_execute]);
        let r = admit(&pod, &requests(), "n", &f, &HashMap::new(), &[]).unwrap_err();
        assert_eq!(r.reason, "TaintToleration");
        let tolerant = json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}], "containers": [{}]}});
        assert!(admit(&tolerant, &requests(), "n", &f, &HashMap::new(), &[]).is_ok());
    }

    #[test]
    fn required_terms_are_ored_and_match_fields_name_the_node() {
        let pod = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n7"]}]}
        ]}}}}});
        let zone_a = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        assert!(node_affinity_matches(&pod, "n1", &zone_a));
        assert!(node_affinity_matches(&pod, "n7", &BTreeMap::new()));
        assert!(!node_affinity_matches(&pod, "n1", &BTreeMap::new()));
        let empty_term = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{}]}}}}});
        assert!(!node_affinity_matches(&empty_term, "n1", &zone_a));
    }
}
