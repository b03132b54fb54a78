//! Discovery: `/version`, and `/api`, `/apis`, `/apis/{g}`, `/api/v1`, `/apis/{g}/{v}` in the
//! legacy format and (when the client asks for `as=APIGroupDiscoveryList`) the aggregated v2
//! format kubectl 1.32 reads first. CRD groups appear the moment a CRD is created.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::resource::{Builtin, ResourceDef};

/// The aggregated-discovery content type.
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `/version`: minor 32 makes the kubectl dispatcher run kubectl 1.32.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": "v1.32.0-tephra",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.4", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// Kubernetes' version priority: GA before beta before alpha, higher numbers first.
fn version_rank(v: &str) -> (u8, i64, i64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major: i64 = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, major, minor)
}

/// Groups and their versions, preferred version first.
fn groups(reg: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in reg.resources() {
        let versions = out.entry(r.group.clone()).or_default();
        if !versions.contains(&r.version) {
            versions.push(r.version.clone());
        }
    }
    for versions in out.values_mut() {
        versions.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
    }
    out
}

fn in_gv<'a>(
    reg: &'a Registry,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a std::sync::Arc<ResourceDef>> {
    reg.resources()
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": gv(group, v), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(json!({}))})
}

/// Legacy `/api`.
pub fn legacy_api() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

/// Legacy `/apis`.
pub fn legacy_apis(reg: &Registry) -> Value {
    let gs: Vec<Value> = groups(reg)
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// Legacy `/apis/{group}`.
pub fn legacy_group(reg: &Registry, group: &str) -> Option<Value> {
    let gs = groups(reg);
    let versions = gs.get(group).filter(|_| !group.is_empty())?;
    let mut entry = group_entry(group, versions);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    Some(entry)
}

/// Legacy `/api/v1` or `/apis/{g}/{v}`: an APIResourceList.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in in_gv(reg, group, version) {
        let mut main = json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": r.verbs(),
        });
        if !r.short_names.is_empty() {
            main["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            main["categories"] = json!(r.categories);
        }
        resources.push(main);
        for (sub, kind, sub_group, sub_version, verbs) in subresources(r) {
            let mut e = json!({"name": format!("{}/{sub}", r.plural), "singularName": r.singular,
                "namespaced": r.namespaced, "kind": kind, "verbs": verbs});
            if sub_group != r.group || sub_version != r.version {
                e["group"] = json!(sub_group);
                e["version"] = json!(sub_version);
            }
            resources.push(e);
        }
    }
    if resources.is_empty() {
        return None;
    }
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": gv(group, version), "resources": resources}))
}

type Sub = (&'static str, String, String, String, Vec<&'static str>);

fn subresources(r: &ResourceDef) -> Vec<Sub> {
    let mut subs = Vec::new();
    if r.status {
        subs.push((
            "status",
            r.kind.clone(),
            r.group.clone(),
            r.version.clone(),
            vec!["get", "patch", "update"],
        ));
    }
    if r.builtin == Some(Builtin::Pod) {
        subs.push((
            "binding",
            "Binding".into(),
            String::new(),
            "v1".into(),
            vec!["create"],
        ));
        subs.push((
            "eviction",
            "Eviction".into(),
            "policy".into(),
            "v1".into(),
            vec!["create"],
        ));
    }
    subs
}

fn aggregated_group(reg: &Registry, group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = in_gv(reg, group, v)
                .map(|r| {
                    let subs: Vec<Value> = subresources(r)
                        .into_iter()
                        .map(|(sub, kind, g, ver, verbs)| {
                            json!({"subresource": sub,
                                   "responseKind": {"group": g, "version": ver, "kind": kind},
                                   "verbs": verbs})
                        })
                        .collect();
                    json!({
                        "resource": r.plural,
                        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": r.singular,
                        "verbs": r.verbs(),
                        "shortNames": r.short_names,
                        "categories": r.categories,
                        "subresources": subs,
                    })
                })
                .collect();
            json!({"version": v, "freshness": "Current", "resources": resources})
        })
        .collect();
    let mut meta = json!({"creationTimestamp": null});
    if !group.is_empty() {
        meta["name"] = json!(group);
    }
    json!({"metadata": meta, "versions": vs})
}

/// Aggregated `/api` (`core`) or `/apis` (every other group).
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let items: Vec<Value> = groups(reg)
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| aggregated_group(reg, g, vs))
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
           "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ga_versions_come_first() {
        let mut vs = vec!["v1alpha1", "v1beta1", "v1", "v2beta2"];
        vs.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
        assert_eq!(vs, vec!["v1", "v2beta2", "v1beta1", "v1alpha1"]);
    }

    #[test]
    fn pods_advertise_binding_and_eviction() {
        let reg = Registry::new();
        let list = resource_list(&reg, "", "v1").expect("core v1");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"pods/eviction") && names.contains(&"pods/binding"));
        let eviction = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "pods/eviction")
            .expect("listed");
        assert_eq!(eviction["group"], "policy");
    }
}
