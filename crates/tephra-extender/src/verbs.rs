//! The extender's answers to `filter`, `prioritize` and `preempt`, without IO: what tephra's
//! plan says about a pod and its candidate nodes. `bind` is the barrier's
//! ([`crate::barrier`]).
//!
//! - A pod tephra planned passes only on its planned node; every other node fails,
//!   unresolvably (no preemption elsewhere makes it tephra's node), naming the plan.
//! - A pod of a gang tephra has not planned fails on every node, unresolvably, with the gang's
//!   reason, so kube-scheduler neither preempts for it nor binds it anywhere.
//! - Any other pod passes untouched.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeStruct, Serializer};

use crate::index::{Index, PodInfo, pod_info};
use crate::wire::{
    ExtenderArgs, ExtenderPreemptionArgs, ExtenderPreemptionResult, HostPriority, HostPriorityList,
    MAX_EXTENDER_PRIORITY, MetaPod, MetaVictims,
};

/// What tephra's plan says of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Only this node.
    Planned(String),
    /// No node: the gang waits (the reason).
    Waiting(String),
    /// tephra does not manage it.
    Free,
}

/// The verdict on `p` (what the request's pod says; the index fills in the gang's state).
pub fn verdict(p: &PodInfo, index: &Index) -> Verdict {
    if let Some(node) = &p.planned {
        return Verdict::Planned(node.clone());
    }
    let Some(gang) = &p.gang else {
        return Verdict::Free;
    };
    let why = match index.gang(gang) {
        Some(g) if g.admitted => "admitted; tephra has not planned this pod yet".to_string(),
        Some(g) => g
            .why
            .clone()
            .unwrap_or_else(|| "not admitted by tephra yet".to_string()),
        None => "tephra has not planned it yet".to_string(),
    };
    let needs = match (index.gang(gang), &p.needs) {
        (None, Some(own)) => own.clone(),
        _ => index.needs(gang),
    };
    let placed = index.bound(gang).len();
    Verdict::Waiting(format!(
        "gang {gang} waiting: {placed}/{} tasks placed; {why}",
        needs.min_member
    ))
}

/// The candidates' names, from whichever form kube-scheduler sent.
fn candidates(args: &ExtenderArgs<'_>) -> Vec<String> {
    match (&args.node_names, &args.nodes) {
        (Some(names), _) => names.iter().map(|n| n.as_str().to_string()).collect(),
        (None, Some(list)) => list
            .items
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect(),
        (None, None) => Vec::new(),
    }
}

/// `filter`'s answer, borrowing the request: every failing node shares one message, so a
/// 5,000-node answer costs no allocation per node. It serializes as kube-scheduler's
/// `ExtenderFilterResult`.
#[derive(Debug)]
pub struct FilterAnswer<'a> {
    node_names: Option<Vec<&'a str>>,
    nodes: Option<Vec<&'a Node>>,
    failed: Vec<&'a str>,
    why: String,
    error: &'static str,
}

struct Failed<'b>(&'b [&'b str], &'b str);

impl Serialize for Failed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for name in self.0 {
            m.serialize_entry(name, self.1)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct Items<'b> {
    metadata: ListMeta,
    items: &'b [&'b Node],
}

impl Serialize for FilterAnswer<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("ExtenderFilterResult", 5)?;
        m.serialize_field(
            "Nodes",
            &self.nodes.as_ref().map(|items| Items {
                metadata: ListMeta::default(),
                items,
            }),
        )?;
        m.serialize_field("NodeNames", &self.node_names)?;
        m.serialize_field("FailedNodes", &Failed(&[], ""))?;
        m.serialize_field(
            "FailedAndUnresolvableNodes",
            &Failed(&self.failed, &self.why),
        )?;
        m.serialize_field("Error", self.error)?;
        m.end()
    }
}

/// `filter`. The answer uses the form the request used (`NodeNames` or `Nodes`).
pub fn filter<'a>(args: &'a ExtenderArgs<'_>, index: &Index) -> FilterAnswer<'a> {
    let mut out = FilterAnswer {
        node_names: None,
        nodes: None,
        failed: Vec::new(),
        why: String::new(),
        error: "",
    };
    let Some(pod) = &args.pod else {
        out.error = "ExtenderArgs.Pod is missing";
        return out;
    };
    let verdict = verdict(&pod_info(pod), index);
    // One message for every node that fails.
    out.why = match &verdict {
        Verdict::Free => String::new(),
        Verdict::Planned(node) => format!("tephra planned this pod on node {node}"),
        Verdict::Waiting(why) => why.clone(),
    };
    let passes = |name: &str| match &verdict {
        Verdict::Free => true,
        Verdict::Planned(node) => node == name,
        Verdict::Waiting(_) => false,
    };
    if let Some(names) = &args.node_names {
        let mut passed = Vec::new();
        for name in names {
            let name = name.as_str();
            if passes(name) {
                passed.push(name);
            } else {
                out.failed.push(name);
            }
        }
        out.node_names = Some(passed);
    } else if let Some(list) = &args.nodes {
        let mut kept = Vec::new();
        for n in &list.items {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            if passes(name) {
                kept.push(n);
            } else {
                out.failed.push(name);
            }
        }
        out.nodes = Some(kept);
    }
    out
}

/// `prioritize`: the planned node gets the top score, every other node 0.
pub fn prioritize(args: &ExtenderArgs<'_>, index: &Index) -> HostPriorityList {
    let planned = match args.pod.as_ref().map(|p| verdict(&pod_info(p), index)) {
        Some(Verdict::Planned(node)) => Some(node),
        _ => None,
    };
    candidates(args)
        .into_iter()
        .map(|host| HostPriority {
            score: if planned.as_ref() == Some(&host) {
                MAX_EXTENDER_PRIORITY
            } else {
                0
            },
            host,
        })
        .collect()
}

/// A victim: its UID, and what is known of the pod.
type Victim = (String, Option<PodInfo>);

/// `preempt`: a node stays a candidate only if it is the preemptor's planned node (when it has
/// one) and evicting its victims leaves every running gang at or above its minimum. The answer
/// names victims by UID, as kube-scheduler reads it.
pub fn preempt(args: &ExtenderPreemptionArgs, index: &Index) -> ExtenderPreemptionResult {
    let planned = match args.pod.as_ref().map(|p| verdict(&pod_info(p), index)) {
        Some(Verdict::Planned(node)) => Some(node),
        _ => None,
    };
    let mut per_node: Vec<(String, Vec<Victim>, i64)> = Vec::new();
    if let Some(m) = &args.node_name_to_meta_victims {
        for (node, v) in m {
            let pods = v
                .pods
                .iter()
                .map(|p| {
                    let info = index.pod_by_uid(&p.uid).map(|(_, i)| i.clone());
                    (p.uid.clone(), info)
                })
                .collect();
            per_node.push((node.clone(), pods, v.num_pdb_violations));
        }
    } else if let Some(m) = &args.node_name_to_victims {
        for (node, v) in m {
            let pods = v
                .pods
                .iter()
                .map(|p| {
                    let info = pod_info(p);
                    (info.uid.clone(), Some(info))
                })
                .collect();
            per_node.push((node.clone(), pods, v.num_pdb_violations));
        }
    }
    let mut out = ExtenderPreemptionResult::default();
    for (node, victims, pdb) in per_node {
        if planned.as_ref().is_some_and(|p| *p != node) {
            continue;
        }
        if breaks_a_gang(&victims, index) {
            continue;
        }
        out.node_name_to_meta_victims.insert(
            node,
            MetaVictims {
                pods: victims
                    .into_iter()
                    .map(|(uid, _)| MetaPod { uid })
                    .collect(),
                num_pdb_violations: pdb,
            },
        );
    }
    out
}

/// Whether evicting `victims` takes some gang that runs whole below its minMember, or a role
/// below its minTaskMember.
fn breaks_a_gang(victims: &[Victim], index: &Index) -> bool {
    let mut hit: std::collections::BTreeMap<&str, Vec<Option<&str>>> = Default::default();
    for (_, info) in victims {
        if let Some(i) = info
            && let Some(g) = &i.gang
            && i.node.is_some()
        {
            hit.entry(g.as_str()).or_default().push(i.role.as_deref());
        }
    }
    hit.into_iter().any(|(gang, lost)| {
        let needs = index.needs(gang);
        let bound = index.bound(gang);
        // Only a gang that runs whole now can be broken.
        let min = needs.min_member as usize;
        if bound.len() >= min && bound.len().saturating_sub(lost.len()) < min {
            return true;
        }
        needs.roles.iter().any(|(role, min)| {
            let have = bound
                .iter()
                .filter(|(_, r)| *r == Some(role.as_str()))
                .count();
            let gone = lost.iter().filter(|r| **r == Some(role.as_str())).count();
            have >= *min as usize && have.saturating_sub(gone) < *min as usize
        })
    })
}
