//! Who is asking and what they may do. Bearer tokens map to users (the server's own token is an
//! administrator in `system:masters`; [`Users::service_account`] issues tokens for service
//! accounts). A resource request's attributes (verb, API group, resource and subresource,
//! namespace, name) are derived as kube-apiserver derives them, and every user but an
//! administrator is authorized by RBAC: the Roles, ClusterRoles and bindings stored in this
//! server, evaluated on each request. Discovery, openapi and health paths are open to every
//! authenticated user, as the default `system:discovery` binding makes them.
//!
//! Each decision for a non-administrator is recorded ([`AccessLog`]), so a test can set what a
//! component did against what its role grants.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, RwLock};

use hyper::Method;
use serde_json::Value;

use crate::resource::RBAC;
use crate::router::ResourcePath;
use crate::store::Store;

/// An authenticated user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// `admin`, or `system:serviceaccount:<namespace>:<name>`.
    pub name: String,
    /// Its groups.
    pub groups: Vec<String>,
}

impl User {
    /// The server's administrator.
    pub fn admin() -> Self {
        Self {
            name: "admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// A service account's user, with the groups Kubernetes gives it.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// Whether RBAC is skipped for this user.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// Tokens issued besides the server's own.
#[derive(Default)]
pub struct Users {
    by_token: RwLock<HashMap<String, User>>,
}

impl Users {
    /// A new bearer token for a service account.
    pub fn service_account(&self, namespace: &str, name: &str) -> String {
        let token = crate::kubeconfig::token();
        self.by_token
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), User::service_account(namespace, name));
        token
    }

    /// A new bearer token for a member of `system:masters` (as a second administrator's
    /// credential), which RBAC does not judge.
    pub fn master(&self, name: &str) -> String {
        let token = crate::kubeconfig::token();
        let user = User {
            name: name.to_string(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        };
        self.by_token
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), user);
        token
    }

    /// Forgets every token issued so far, as a rebuilt cluster (a new signing key) does.
    pub fn revoke_all(&self) {
        self.by_token
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The user a token was issued to.
    pub fn get(&self, token: &str) -> Option<User> {
        self.by_token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }
}

/// What a resource request asks to do, in RBAC's terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'static str,
    /// API group (empty for core).
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, if any.
    pub subresource: Option<String>,
    /// Namespace, for namespaced requests.
    pub namespace: Option<String>,
    /// Object name, when the request names one.
    pub name: Option<String>,
}

impl Attributes {
    /// The attributes of a request on a resource path, as kube-apiserver's request info
    /// derives them: `watch=true` makes a list a watch (a named GET stays a get), and a list
    /// or watch with `fieldSelector=metadata.name=<n>` names `<n>`. `None` for a method RBAC
    /// has no verb for.
    pub fn of(
        method: &Method,
        path: &ResourcePath,
        watch: bool,
        field_selector: Option<&str>,
    ) -> Option<Self> {
        let named = path.name.is_some();
        let verb = match *method {
            Method::GET | Method::HEAD if watch && !named => "watch",
            Method::GET | Method::HEAD if named => "get",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if named => "delete",
            Method::DELETE => "deletecollection",
            _ => return None,
        };
        // A namespace is itself the namespace of requests on it.
        let namespace = match (&path.namespace, path.plural.as_str(), &path.name) {
            (Some(ns), _, _) => Some(ns.clone()),
            (None, "namespaces", Some(name)) if path.group.is_empty() => Some(name.clone()),
            _ => None,
        };
        let selected = field_selector
            .filter(|_| matches!(verb, "list" | "watch"))
            .and_then(|s| s.strip_prefix("metadata.name="))
            .filter(|n| !n.is_empty() && !n.contains(','))
            .map(String::from);
        Some(Self {
            verb,
            group: path.group.clone(),
            resource: path.plural.clone(),
            subresource: path.sub.clone(),
            namespace,
            name: path.name.clone().or(selected),
        })
    }

    /// `pods` or `pods/binding`.
    pub fn resource_path(&self) -> String {
        match &self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// Kubernetes' explanation of a denial.
    pub fn denial(&self, user: &User) -> String {
        let scope = match &self.namespace {
            Some(ns) => format!("in the namespace {ns:?}"),
            None => "at the cluster scope".into(),
        };
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
            user.name,
            self.verb,
            self.resource_path(),
            self.group
        )
    }
}

/// Whether the RBAC objects in `store` let `user` do what `attrs` asks.
pub fn allowed(store: &Store, user: &User, attrs: &Attributes) -> bool {
    let kind = |plural: &str| format!("{RBAC}/{plural}");
    let cluster_role = |name: &str| {
        store
            .get(&kind("clusterroles"), &(String::new(), name.to_string()))
            .map(|o| o.value.clone())
    };
    let grants = |role: Option<Value>| role.is_some_and(|r| rules_allow(&r, attrs));
    let (bindings, _) = store.list(&kind("clusterrolebindings"), None, None);
    for b in &bindings {
        if binds(&b.value, user)
            && role_ref(&b.value, "ClusterRole").is_some_and(|n| grants(cluster_role(n)))
        {
            return true;
        }
    }
    let Some(ns) = &attrs.namespace else {
        return false;
    };
    let (bindings, _) = store.list(&kind("rolebindings"), Some(ns), None);
    bindings.iter().any(|b| {
        if !binds(&b.value, user) {
            return false;
        }
        if let Some(n) = role_ref(&b.value, "ClusterRole") {
            return grants(cluster_role(n));
        }
        role_ref(&b.value, "Role").is_some_and(|n| {
            grants(
                store
                    .get(&kind("roles"), &(ns.clone(), n.to_string()))
                    .map(|o| o.value.clone()),
            )
        })
    })
}

fn role_ref<'a>(binding: &'a Value, kind: &str) -> Option<&'a str> {
    let r = binding.get("roleRef")?;
    (r.get("kind")?.as_str()? == kind && r.get("apiGroup").and_then(Value::as_str) == Some(RBAC))
        .then(|| r.get("name")?.as_str())
        .flatten()
}

fn binds(binding: &Value, user: &User) -> bool {
    let binding_ns = binding
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = |s: &Value, f: &str| {
        s.get(f)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| match text(s, "kind").as_str() {
            "ServiceAccount" => {
                let ns = match text(s, "namespace") {
                    n if n.is_empty() => binding_ns.to_string(),
                    n => n,
                };
                user.name == format!("system:serviceaccount:{ns}:{}", text(s, "name"))
            }
            "User" => user.name == text(s, "name"),
            "Group" => user.groups.contains(&text(s, "name")),
            _ => false,
        })
}

fn rules_allow(role: &Value, attrs: &Attributes) -> bool {
    role.get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|rule| rule_allows(rule, attrs))
}

/// One PolicyRule against a resource request, with Kubernetes' wildcards: `*` for verbs,
/// groups and resources, `*/<subresource>` for a subresource of anything.
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    let list = |f: &str| -> Vec<&str> {
        rule.get(f)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    let verbs = list("verbs");
    let groups = list("apiGroups");
    let resources = list("resources");
    let names = list("resourceNames");
    let resource = attrs.resource_path();
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == resource
            || attrs
                .subresource
                .as_deref()
                .is_some_and(|sub| *r == format!("*/{sub}"))
    });
    let name_ok = names.is_empty() || attrs.name.as_deref().is_some_and(|n| names.contains(&n));
    verbs.iter().any(|v| *v == "*" || *v == attrs.verb)
        && groups.iter().any(|g| *g == "*" || *g == attrs.group)
        && resource_ok
        && name_ok
}

/// One line of the access log: who did what, where, and whether it was allowed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// The user.
    pub user: String,
    /// The verb.
    pub verb: &'static str,
    /// API group.
    pub group: String,
    /// `pods` or `pods/binding`.
    pub resource: String,
    /// Namespace, for namespaced requests.
    pub namespace: Option<String>,
    /// Whether RBAC allowed it.
    pub allowed: bool,
}

/// Every distinct access by a non-administrator, with how often it was made.
#[derive(Default)]
pub struct AccessLog {
    seen: Mutex<BTreeMap<Access, u64>>,
}

impl AccessLog {
    /// Records one decision.
    pub fn record(&self, user: &User, attrs: &Attributes, allowed: bool) {
        let access = Access {
            user: user.name.clone(),
            verb: attrs.verb,
            group: attrs.group.clone(),
            resource: attrs.resource_path(),
            namespace: attrs.namespace.clone(),
            allowed,
        };
        *self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(access)
            .or_default() += 1;
    }

    /// Everything recorded so far.
    pub fn entries(&self) -> Vec<(Access, u64)> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(a, n)| (a.clone(), *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn attrs(verb: &'static str, group: &str, resource: &str, sub: Option<&str>) -> Attributes {
        Attributes {
            verb,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(String::from),
            namespace: Some("default".into()),
            name: Some("p".into()),
        }
    }

    #[test]
    fn a_rule_grants_only_its_verbs_groups_and_resources() {
        let rule = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]});
        assert!(rule_allows(&rule, &attrs("get", "", "pods", None)));
        assert!(!rule_allows(&rule, &attrs("delete", "", "pods", None)));
        assert!(!rule_allows(&rule, &attrs("get", "apps", "pods", None)));
        assert!(!rule_allows(
            &rule,
            &attrs("get", "", "pods", Some("status"))
        ));
    }

    #[test]
    fn subresources_need_their_own_rule_or_a_wildcard() {
        let exact = json!({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]});
        let any = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(
            &exact,
            &attrs("create", "", "pods", Some("binding"))
        ));
        assert!(!rule_allows(&exact, &attrs("create", "", "pods", None)));
        assert!(rule_allows(
            &any,
            &attrs("update", "x.io", "jobs", Some("status"))
        ));
        assert!(!rule_allows(&any, &attrs("update", "x.io", "jobs", None)));
    }

    #[test]
    fn resource_names_limit_a_rule_to_named_objects() {
        let rule = json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                          "resourceNames": ["p"], "verbs": ["get", "list"]});
        assert!(rule_allows(
            &rule,
            &attrs("get", "coordination.k8s.io", "leases", None)
        ));
        let mut list = attrs("list", "coordination.k8s.io", "leases", None);
        list.name = None;
        assert!(!rule_allows(&rule, &list));
    }

    #[test]
    fn verbs_follow_the_method_and_the_path() {
        let path = |name: Option<&str>| ResourcePath {
            group: String::new(),
            version: "v1".into(),
            namespace: Some("ns".into()),
            plural: "pods".into(),
            name: name.map(String::from),
            sub: None,
        };
        let verb =
            |m: Method, name, watch| Attributes::of(&m, &path(name), watch, None).map(|a| a.verb);
        assert_eq!(verb(Method::GET, None, false), Some("list"));
        assert_eq!(verb(Method::GET, None, true), Some("watch"));
        assert_eq!(verb(Method::GET, Some("p"), false), Some("get"));
        assert_eq!(verb(Method::DELETE, None, false), Some("deletecollection"));
        assert_eq!(verb(Method::DELETE, Some("p"), false), Some("delete"));
        assert_eq!(verb(Method::PATCH, Some("p"), false), Some("patch"));
        assert_eq!(verb(Method::OPTIONS, Some("p"), false), None);
        // watch=true on a named object is still a get, as kube-apiserver reads it.
        assert_eq!(verb(Method::GET, Some("p"), true), Some("get"));
        let one = Attributes::of(&Method::GET, &path(None), true, Some("metadata.name=p")).unwrap();
        assert_eq!((one.verb, one.name.as_deref()), ("watch", Some("p")));
    }

    #[test]
    fn bindings_match_service_accounts_users_and_groups() {
        let sa = User::service_account("tephra-system", "sched");
        let b = |subject: Value| json!({"metadata": {"namespace": "tephra-system"}, "subjects": [subject]});
        assert!(binds(
            &b(json!({"kind": "ServiceAccount", "name": "sched"})),
            &sa
        ));
        assert!(binds(
            &b(json!({"kind": "ServiceAccount", "name": "sched", "namespace": "tephra-system"})),
            &sa
        ));
        assert!(!binds(
            &b(json!({"kind": "ServiceAccount", "name": "other"})),
            &sa
        ));
        assert!(binds(
            &b(json!({"kind": "Group", "name": "system:serviceaccounts"})),
            &sa
        ));
        assert!(!binds(&b(json!({"kind": "User", "name": "admin"})), &sa));
    }
}
