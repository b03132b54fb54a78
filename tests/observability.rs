//! The shipped Grafana dashboard and Prometheus alerts (`examples/observability/`) query only
//! metrics the code registers (the scheduler's and the extender's), and every alert has a
//! runbook line in README, which names only metrics that are exported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use serde_json::Value;

fn registered() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = tephra_kube::metrics::Metrics::new()
        .unwrap()
        .names()
        .iter()
        .cloned()
        .collect();
    names.extend(
        tephra_kube::metrics::Metrics::controller_manager()
            .unwrap()
            .names()
            .iter()
            .cloned(),
    );
    names.extend(
        tephra_extender::metrics::Metrics::new()
            .unwrap()
            .names()
            .iter()
            .cloned(),
    );
    names
}

/// The metric names a PromQL expression reads (a histogram's `_bucket`, `_sum` and `_count`
/// series count as the histogram).
fn metrics_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
            i += 1;
        }
        if i > start {
            let word: String = bytes[start..i].iter().collect();
            let boundary = start == 0
                || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == '_');
            if boundary && (word.starts_with("volcano_") || word.starts_with("tephra_")) {
                out.push(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

fn known(name: &str, registered: &BTreeSet<String>) -> bool {
    registered.contains(name)
        || ["_bucket", "_sum", "_count"]
            .iter()
            .any(|s| name.strip_suffix(s).is_some_and(|b| registered.contains(b)))
}

fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    _ => exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

#[test]
fn every_dashboard_and_alert_query_names_a_registered_metric() {
    let registered = registered();
    let dir = common::repo_root().join("examples/observability");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("grafana-dashboard.json")).unwrap())
            .unwrap();
    let rules = common::yaml_documents(&dir.join("prometheus-rules.yaml"));
    let mut all = Vec::new();
    exprs(&dashboard, &mut all);
    let panel_queries = all.len();
    for r in &rules {
        exprs(r, &mut all);
    }
    assert!(
        panel_queries >= 10 && all.len() > panel_queries,
        "queries found: {all:?}"
    );
    for e in &all {
        let names = metrics_in(e);
        assert!(
            !names.is_empty(),
            "query reads no tephra or Volcano metric: {e}"
        );
        for n in names {
            assert!(
                known(&n, &registered),
                "{n} (in `{e}`) is not a metric the code registers"
            );
        }
    }
}

#[test]
fn every_alert_has_a_runbook_line_in_readme() {
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    let rules = common::yaml_documents(
        &common::repo_root().join("examples/observability/prometheus-rules.yaml"),
    );
    let alerts: Vec<&str> = rules[0]["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    assert!(alerts.len() >= 6);
    for a in alerts {
        assert!(
            readme.contains(&format!("`{a}`")),
            "README has no runbook line for {a}"
        );
    }
}

#[test]
fn a_query_naming_an_unknown_metric_is_caught() {
    let registered = registered();
    let names = metrics_in("rate(volcano_schedule_attempts_total[5m]) / tephra_no_such_metric");
    assert_eq!(
        names,
        ["volcano_schedule_attempts_total", "tephra_no_such_metric"]
    );
    assert!(known(&names[0], &registered));
    assert!(!known(&names[1], &registered));
    assert!(known(
        "volcano_e2e_scheduling_latency_milliseconds_bucket",
        &registered
    ));
}

/// `a_{b,c}_d` → `a_b_d`, `a_c_d`.
fn expand(token: &str) -> Vec<String> {
    let Some(open) = token.find('{') else {
        return vec![token.to_string()];
    };
    let close = open + token[open..].find('}').expect("closed brace");
    token[open + 1..close]
        .split(',')
        .flat_map(|alt| expand(&format!("{}{alt}{}", &token[..open], &token[close + 1..])))
        .collect()
}

/// The metric names a text mentions: whole names, and prefixes (`tephra_cluster_`, `tephra_*`),
/// with `{a,b}` alternatives after an underscore expanded (a brace after a letter holds labels).
/// Rust paths (`tephra_api::`) are not metrics.
fn mentioned_metrics(text: &str) -> Vec<(String, bool)> {
    let flat = text.replace('\n', " ");
    let mut flat = flat.as_str().to_string();
    while flat.contains(", ") {
        flat = flat.replace(", ", ",");
    }
    let chars: Vec<char> = flat.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..chars.len().min(i + 8)].iter().collect();
        let boundary = i == 0 || !(chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '_');
        if !(boundary && (rest.starts_with("volcano_") || rest.starts_with("tephra_"))) {
            i += 1;
            continue;
        }
        let mut token = String::new();
        while i < chars.len() {
            let c = chars[i];
            if c.is_ascii_alphanumeric() || c == '_' {
                token.push(c);
                i += 1;
            } else if c == '{' && token.ends_with('_') {
                while i < chars.len() && chars[i] != '}' {
                    token.push(chars[i]);
                    i += 1;
                }
                token.push('}');
                i += 1;
            } else {
                break;
            }
        }
        let next: String = chars[i..chars.len().min(i + 2)].iter().collect();
        if next == "::" {
            continue;
        }
        let prefix = next.starts_with('*') || token.ends_with('_');
        out.extend(expand(&token).into_iter().map(|n| (n, prefix)));
    }
    out
}

#[test]
fn readme_names_only_metrics_that_are_exported() {
    let registered = registered();
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    let mentioned = mentioned_metrics(&readme);
    assert!(mentioned.len() > 40, "{mentioned:?}");
    for (name, prefix) in mentioned {
        let ok = if prefix {
            registered.iter().any(|r| r.starts_with(&name))
        } else {
            known(&name, &registered)
        };
        assert!(ok, "README names {name}, which no tephra process exports");
    }
}

#[test]
fn metric_names_in_prose_are_read_with_their_alternatives_and_prefixes() {
    let m = mentioned_metrics(
        "per queue `volcano_queue_{allocated,\n request}_{milli_cpu,memory_bytes}`, \
         `tephra_cluster_{ready,nodes}{cluster}`, `tephra_cluster_*`, `tephra_api::Job`, \
         `tephra_no_such_total`",
    );
    let names: Vec<(&str, bool)> = m.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    assert_eq!(
        names,
        [
            ("volcano_queue_allocated_milli_cpu", false),
            ("volcano_queue_allocated_memory_bytes", false),
            ("volcano_queue_request_milli_cpu", false),
            ("volcano_queue_request_memory_bytes", false),
            ("tephra_cluster_ready", false),
            ("tephra_cluster_nodes", false),
            ("tephra_cluster_", true),
            ("tephra_no_such_total", false),
        ]
    );
    assert!(!known("tephra_no_such_total", &registered()));
}
