//! Least privilege, the other way round, for both kinds of API server: every grant of the
//! rendered roles (each (group, resource, verb) a ServiceAccount's bindings give it) was used
//! by some request, or by an admission check that a request made, in the test's run.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::of_kind;

/// (component, group, resource, verb): a grant a test's workloads are excused from using.
pub type Grant = (&'static str, &'static str, &'static str, &'static str);

/// (group, resource, verb) triples.
pub type Grants = BTreeSet<(String, String, String)>;

/// Every (group, resource, verb) each ServiceAccount's roles grant.
pub fn granted(docs: &[Value]) -> BTreeMap<String, Grants> {
    let roles: BTreeMap<(String, String), &Value> = of_kind(docs, "ClusterRole")
        .into_iter()
        .chain(of_kind(docs, "Role"))
        .map(|r| {
            let kind = r["kind"].as_str().unwrap().to_string();
            (
                (kind, r["metadata"]["name"].as_str().unwrap().to_string()),
                r,
            )
        })
        .collect();
    let mut out: BTreeMap<String, Grants> = BTreeMap::new();
    for b in of_kind(docs, "ClusterRoleBinding")
        .into_iter()
        .chain(of_kind(docs, "RoleBinding"))
    {
        let key = (
            b["roleRef"]["kind"].as_str().unwrap().to_string(),
            b["roleRef"]["name"].as_str().unwrap().to_string(),
        );
        let role = roles
            .get(&key)
            .unwrap_or_else(|| panic!("{key:?} is bound but not rendered"));
        for subject in b["subjects"].as_array().unwrap() {
            let user = format!(
                "system:serviceaccount:{}:{}",
                subject["namespace"].as_str().unwrap(),
                subject["name"].as_str().unwrap()
            );
            let set = out.entry(user).or_default();
            for rule in role["rules"].as_array().unwrap() {
                let list = |f: &str| -> Vec<String> {
                    rule[f]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                        .collect()
                };
                for g in list("apiGroups") {
                    for r in list("resources") {
                        for v in list("verbs") {
                            set.insert((g.clone(), r.clone(), v));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every grant was used (`used`: by user), or is one of `unused` (grants for paths the
/// workloads do not take), each named with the code needing it.
pub fn assert_roles_used(docs: &[Value], used: &BTreeMap<String, Grants>, unused: &[Grant]) {
    let mut idle = Vec::new();
    for (user, grants) in granted(docs) {
        let component = user
            .rsplit(':')
            .next()
            .unwrap()
            .trim_start_matches("tephra-")
            .to_string();
        for (g, r, v) in grants {
            let was_used = used
                .get(&user)
                .is_some_and(|u| u.contains(&(g.clone(), r.clone(), v.clone())));
            let excused = unused
                .iter()
                .any(|(c, ug, ur, uv)| *c == component && *ug == g && *ur == r && *uv == v);
            assert!(
                !(was_used && excused),
                "{component} {v} {g}/{r} is used now: drop it from the unused list"
            );
            if !was_used && !excused {
                idle.push(format!("{component} {v} {g}/{r}"));
            }
        }
    }
    assert!(
        idle.is_empty(),
        "granted but never used (remove the rule, or list it as unused with the code that needs it):\n{}",
        idle.join("\n")
    );
}

/// The grant only a Workload API gang uses (executor.rs: KubeGroupConditions, the
/// `PodGroupInitiallyScheduled` condition), unused where the server does not serve
/// `scheduling.k8s.io/v1beta1` (before 1.37, or with it off) or where the scenario runs no such
/// gang (a fleet's: Workload API gangs across a fleet are not in its scenario yet).
pub const WORKLOAD_API_STATUS: Grant = (
    "scheduler",
    "scheduling.k8s.io",
    "podgroups/status",
    "patch",
);

/// The watch of Kubernetes' own PodGroups (watch.rs), which lists nothing where the server does
/// not serve `scheduling.k8s.io/v1beta1` (it answers 404 and the kind counts as absent).
pub const WORKLOAD_API_LIST: Grant = ("scheduler", "scheduling.k8s.io", "podgroups", "list");
