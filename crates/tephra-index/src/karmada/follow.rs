//! PodGroup-backed workloads: a Volcano PodGroup propagated beside the workload whose pods
//! name it (`scheduling.k8s.io/group-name` on a Deployment's, StatefulSet's or Job's pod
//! template, or on a Pod). The workload's binding is the gang, placed whole like any other;
//! the PodGroup's binding is no workload of its own (it has no replicas) and, where
//! karmada-scheduler would duplicate it to every member, it goes to the member its pods go to
//! and nowhere else, moving when they move. Until they are placed it waits, saying for what;
//! a PodGroup no workload's pods name waits too (a copy in every member would have each
//! member's queue admit a gang that never comes there).

use std::collections::{BTreeMap, BTreeSet};

use super::{Binding, BindingWrite, Input, TargetCluster};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Whether `b` is the binding of a Volcano PodGroup.
pub fn is_pod_group(b: &Binding) -> bool {
    let r = &b.spec.resource;
    r.kind == "PodGroup" && r.api_version.starts_with("scheduling.volcano.sh/")
}

/// The namespace of a binding's resource template.
fn template_namespace(b: &Binding) -> String {
    b.spec
        .resource
        .namespace
        .clone()
        .unwrap_or_else(|| b.namespace())
}

/// Each PodGroup binding of tephra's, by key: the key of the workload binding of tephra's
/// whose pods name it (through [`Input::pod_groups`]; the first by key when several do), or
/// `None` when none does yet.
pub fn leaders(input: &Input<'_>) -> BTreeMap<String, Option<String>> {
    let ours = |b: &Binding| input.scheduler_names.contains(&b.spec.scheduler_name);
    let mut out = BTreeMap::new();
    for pg in input.bindings.iter().filter(|b| ours(b) && is_pod_group(b)) {
        let ns = template_namespace(pg);
        let leader = input
            .bindings
            .iter()
            .filter(|w| ours(w) && w.is_workload() && template_namespace(w) == ns)
            .filter(|w| input.pod_groups.get(&w.key()) == Some(&pg.spec.resource.name))
            .map(Binding::key)
            .min();
        out.insert(pg.key(), leader);
    }
    out
}

/// What to write on each following PodGroup binding: the clusters its workload is in after
/// this pass (`placed`: the workloads this pass placed, by key), or a wait for it.
pub fn writes(
    input: &Input<'_>,
    leaders: &BTreeMap<String, Option<String>>,
    placed: &BTreeMap<String, String>,
    now: &Time,
) -> Vec<BindingWrite> {
    let mut out = Vec::new();
    for (key, leader_key) in leaders {
        let Some(pg) = input.bindings.iter().find(|b| &b.key() == key) else {
            continue;
        };
        if pg.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some((leader_key, leader)) = leader_key.as_ref().and_then(|k| {
            let b = input.bindings.iter().find(|b| &b.key() == k)?;
            Some((k, b))
        }) else {
            if pg.spec.clusters.is_empty() {
                let message = "waits for a workload whose pods name it \
                               (scheduling.k8s.io/group-name) to be propagated with it: a \
                               PodGroup goes to the member its pods go to";
                out.extend(super::waiting_write(pg, "Unschedulable", message, now));
            }
            continue;
        };
        let target: BTreeSet<String> = match placed.get(leader_key) {
            Some(cluster) => BTreeSet::from([cluster.clone()]),
            None if leader.needs_scheduling().is_none() => leader
                .spec
                .clusters
                .iter()
                .map(|c| c.name.clone())
                .collect(),
            None => BTreeSet::new(),
        };
        let what = format!(
            "{} {}",
            leader.spec.resource.kind.to_lowercase(),
            leader.spec.resource.name
        );
        if target.is_empty() {
            let message = format!(
                "waits for {what}, whose pods it groups, to be placed: a PodGroup goes to \
                 the member its pods go to"
            );
            out.extend(super::waiting_write(pg, "Unschedulable", &message, now));
            continue;
        }
        let have: BTreeSet<String> = pg.spec.clusters.iter().map(|c| c.name.clone()).collect();
        if have == target && pg.needs_scheduling().is_none() {
            continue;
        }
        let names: Vec<&str> = target.iter().map(String::as_str).collect();
        let clusters: Vec<TargetCluster> = target
            .iter()
            .map(|name| TargetCluster {
                name: name.clone(),
                replicas: 0,
            })
            .collect();
        let event = format!(
            "placed in {} with {what}, whose pods it groups",
            names.join(", ")
        );
        out.push(super::object_write(pg, clusters, event, now));
    }
    out
}
