//! Label and field selectors: the `labelSelector` and `fieldSelector` query parameters in
//! apimachinery's syntax, and a LabelSelector object (`matchLabels`, `matchExpressions`) as a
//! PodDisruptionBudget carries it.

use serde_json::Value;

use crate::status::ApiError;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<(String, Op)>,
    /// A selector that matches nothing (a nil or empty selector object of a PDB).
    nothing: bool,
}

impl LabelSelector {
    /// Parses `app=a,tier!=db,env in (a,b),!legacy`.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(term).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: found '{term}', expected: a valid label selector"
                ))
            })?);
        }
        Ok(Self {
            reqs,
            nothing: false,
        })
    }

    /// Builds a selector from a `metav1.LabelSelector` object. A missing or empty selector
    /// matches nothing, as a PodDisruptionBudget's does.
    pub fn from_object(selector: Option<&Value>) -> Self {
        let Some(sel) = selector.and_then(Value::as_object) else {
            return Self {
                reqs: Vec::new(),
                nothing: true,
            };
        };
        let mut reqs = Vec::new();
        if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                reqs.push((
                    k.clone(),
                    Op::Eq(v.as_str().unwrap_or_default().to_string()),
                ));
            }
        }
        for expr in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expr
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let values: Vec<String> = expr
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            let op = match expr.get("operator").and_then(Value::as_str) {
                Some("In") => Op::In(values),
                Some("NotIn") => Op::NotIn(values),
                Some("Exists") => Op::Exists,
                Some("DoesNotExist") => Op::DoesNotExist,
                _ => continue,
            };
            reqs.push((key, op));
        }
        let nothing = reqs.is_empty();
        Self { reqs, nothing }
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty() && !self.nothing
    }

    /// Whether an object's labels match.
    pub fn matches(&self, object: &Value) -> bool {
        if self.nothing {
            return false;
        }
        if self.reqs.is_empty() {
            return true;
        }
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|(key, op)| match op {
            Op::Eq(v) => get(key) == Some(v.as_str()),
            Op::NotEq(v) => get(key) != Some(v.as_str()),
            Op::In(vs) => get(key).is_some_and(|l| vs.iter().any(|v| v == l)),
            Op::NotIn(vs) => get(key).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Op::Exists => get(key).is_some(),
            Op::DoesNotExist => get(key).is_none(),
        })
    }
}

fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_requirement(term: &str) -> Option<(String, Op)> {
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| (key.to_string(), Op::DoesNotExist));
    }
    for (sep, ctor) in [
        ("!=", Op::NotEq as fn(String) -> Op),
        ("==", Op::Eq as fn(String) -> Op),
        ("=", Op::Eq as fn(String) -> Op),
    ] {
        if let Some((k, v)) = term.split_once(sep) {
            let (k, v) = (k.trim(), v.trim());
            return valid_key(k).then(|| (k.to_string(), ctor(v.to_string())));
        }
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words.as_slice() {
        let rest = rest.trim();
        let (op, list) = if let Some(l) = rest.strip_prefix("notin") {
            (false, l)
        } else if let Some(l) = rest.strip_prefix("in") {
            (true, l)
        } else {
            return None;
        };
        let list = list.trim().strip_prefix('(')?.strip_suffix(')')?;
        let values: Vec<String> = list
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if !valid_key(key) {
            return None;
        }
        return Some((
            key.to_string(),
            if op {
                Op::In(values)
            } else {
                Op::NotIn(values)
            },
        ));
    }
    valid_key(term).then(|| (term.to_string(), Op::Exists))
}

/// A parsed field selector: `metadata.name=x,spec.nodeName!=n1`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// The fields a kind can be selected by, beyond `metadata.name` and `metadata.namespace`.
pub fn supported_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.schedulerName",
            "spec.restartPolicy",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "Node") => &["spec.unschedulable"],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "Secret") => &["type"],
        ("", "Service") => &["spec.clusterIP", "spec.type"],
        ("", "Namespace") => &["status.phase"],
        _ => &[],
    }
}

impl FieldSelector {
    /// Parses and checks a field selector against the fields `kind` supports. Every kind
    /// takes `metadata.name`, and `metadata.namespace` but for Nodes, Namespaces and
    /// cluster-scoped custom resources (whose field label conversions leave it out).
    pub fn parse(
        text: &str,
        group: &str,
        kind: &str,
        builtin: bool,
        namespaced: bool,
    ) -> Result<Self, ApiError> {
        let namespace_field = if builtin {
            !matches!((group, kind), ("", "Node" | "Namespace"))
        } else {
            namespaced
        };
        let mut terms = Vec::new();
        for term in text.split(',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            let known = field == "metadata.name"
                || (field == "metadata.namespace" && namespace_field)
                || supported_fields(group, kind).contains(&field);
            if !known {
                return Err(ApiError::bad_request(
                    if builtin || field == "metadata.namespace" {
                        format!("field label not supported: {field}")
                    } else {
                        format!(
                            "{field:?} is not a known field selector: only \"metadata.name\", \
                         \"metadata.namespace\""
                        )
                    },
                ));
            }
            terms.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self { terms })
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value of `metadata.name=` when the selector pins one name (a fast path).
    pub fn pinned_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, eq, _)| *eq && f == "metadata.name")
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether an object matches.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, eq, want)| {
            // An Event's `source` selects its source's component.
            let path = match field.as_str() {
                "source" => "/source/component".to_string(),
                f => format!("/{}", f.replace('.', "/")),
            };
            let got = match object.pointer(&path) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                // A missing boolean selects as "false", a missing string as "".
                None if field == "spec.unschedulable" || field == "spec.hostNetwork" => {
                    "false".into()
                }
                _ => String::new(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": labels}, "spec": {"nodeName": "n1"}})
    }

    #[test]
    fn label_selectors_follow_apimachinery_syntax() {
        let p = pod(json!({"app": "a", "tier": "web"}));
        let m = |s: &str| LabelSelector::parse(s).expect("parses").matches(&p);
        assert!(m("app=a"));
        assert!(m("app==a,tier!=db"));
        assert!(m("tier in (web, api)"));
        assert!(!m("tier notin (web)"));
        assert!(m("app"));
        assert!(m("!legacy"));
        assert!(!m("app=b"));
        assert!(LabelSelector::parse("a in (x").is_err());
    }

    #[test]
    fn field_selectors_check_the_supported_fields() {
        let p = pod(json!({}));
        let s = FieldSelector::parse("spec.nodeName=n1", "", "Pod", true, true).expect("parses");
        assert!(s.matches(&p));
        let e = FieldSelector::parse("spec.foo=1", "", "Pod", true, true).expect_err("refused");
        assert_eq!(e.message, "field label not supported: spec.foo");
        let e = FieldSelector::parse("spec.queue=a", "batch.volcano.sh", "Job", false, true)
            .expect_err("refused");
        assert!(e.message.contains("is not a known field selector"), "{e}");
    }

    #[test]
    fn an_empty_selector_object_matches_nothing() {
        let p = pod(json!({"app": "a"}));
        assert!(!LabelSelector::from_object(None).matches(&p));
        assert!(!LabelSelector::from_object(Some(&json!({}))).matches(&p));
        assert!(
            LabelSelector::from_object(Some(&json!({"matchLabels": {"app": "a"}}))).matches(&p)
        );
    }
}
