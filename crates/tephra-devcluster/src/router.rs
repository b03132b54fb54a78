//! The URL space: discovery, openapi and health paths, and resource paths
//! (`/api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]`, and the same under
//! `/apis/{group}/{version}`).

/// A resource path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group (empty for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace, for namespaced paths.
    pub namespace: Option<String>,
    /// Plural resource.
    pub plural: String,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`, `binding`, `eviction`).
    pub sub: Option<String>,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez` (and their `/...` checks).
    Health,
    /// `/api`.
    Api,
    /// `/apis`.
    Apis,
    /// `/api/v1` or `/apis/{group}/{version}`: one group version's resources.
    GroupVersion(String, String),
    /// `/apis/{group}`.
    Group(String),
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/{api/v1 | apis/g/v}`.
    OpenApiDoc(String),
    /// `/openapi/v2` (not served).
    OpenApiV2,
    /// A resource.
    Resource(ResourcePath),
    /// Anything else.
    Unknown,
}

/// Routes a path (without the query).
pub fn route(path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        [h, ..] if matches!(*h, "healthz" | "readyz" | "livez") => Route::Health,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["api", v] => Route::GroupVersion(String::new(), (*v).to_string()),
        ["apis", g] => Route::Group((*g).to_string()),
        ["apis", g, v] => Route::GroupVersion((*g).to_string(), (*v).to_string()),
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Route::OpenApiDoc(rest.join("/")),
        ["openapi", "v2"] | ["swagger.json"] => Route::OpenApiV2,
        ["api", v, rest @ ..] => resource("", v, rest),
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let mk = |ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            namespace: ns.map(String::from),
            plural: plural.to_string(),
            name: name.map(String::from),
            sub: sub.map(String::from),
        })
    };
    match rest {
        [plural] => mk(None, plural, None, None),
        ["namespaces", name] => mk(None, "namespaces", Some(name), None),
        ["namespaces", name, sub] if matches!(*sub, "status" | "finalize") => {
            mk(None, "namespaces", Some(name), Some(sub))
        }
        ["namespaces", ns, plural] => mk(Some(ns), plural, None, None),
        ["namespaces", ns, plural, name] => mk(Some(ns), plural, Some(name), None),
        ["namespaces", ns, plural, name, sub] => mk(Some(ns), plural, Some(name), Some(sub)),
        [plural, name] => mk(None, plural, Some(name), None),
        [plural, name, sub] => mk(None, plural, Some(name), Some(sub)),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_resource_paths() {
        let Route::Resource(p) = route("/api/v1/namespaces/default/pods/p1/binding") else {
            panic!("a resource path");
        };
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref(), p.sub.as_deref()),
            ("pods", Some("p1"), Some("binding"))
        );
        let Route::Resource(ns) = route("/api/v1/namespaces/kube-system") else {
            panic!("a resource path");
        };
        assert_eq!(
            (ns.plural.as_str(), ns.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let Route::Resource(all) = route("/apis/batch.volcano.sh/v1alpha1/jobs") else {
            panic!("a resource path");
        };
        assert_eq!((all.namespace, all.name), (None, None));
        assert_eq!(
            route("/apis/policy/v1"),
            Route::GroupVersion("policy".into(), "v1".into())
        );
        assert_eq!(
            route("/openapi/v3/apis/batch.volcano.sh/v1alpha1"),
            Route::OpenApiDoc("apis/batch.volcano.sh/v1alpha1".into())
        );
    }
}
