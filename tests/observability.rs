//! The shipped Grafana dashboard and Prometheus alerts (`examples/observability/`) query only
//! metrics the code registers (the scheduler's and the extender's), and every alert has a
//! runbook line in README.
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
