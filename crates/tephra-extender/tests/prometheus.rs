//! The shipped dashboard and alerts (`examples/observability/`) in a real Prometheus, Debian's
//! `prometheus` and `promtool` (`.ci/run` installs them): the alert rules pass promtool's check
//! and its unit tests (`tests/prometheus/alerts.test.yaml`), and with Prometheus scraping the
//! scheduler and the extender of a healthy devcluster fleet, every dashboard query returns
//! series, every rule evaluates, and no alert is pending or firing.
//!
//! Without the binaries the tests say so and pass, except under CI (`CI` set), where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::fleet::{declare_gang, extender_fleet, fleet_scheduler, kube_scheduler};
use tephra_devcluster::wait::eventually;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `name` on `PATH`; `None` (after saying so) when it is missing outside CI.
fn binary(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is not installed; .ci/run installs Debian's prometheus package"
        );
        tephra_envtest::skip(&format!(
            "{name} is not installed (apt-get install prometheus)"
        ));
    }
    found
}

/// A fresh directory for one test's files.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tephra-prometheus-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The PrometheusRule's groups as a plain rule file (JSON is YAML), written to `dir`.
fn write_rules(dir: &Path) -> PathBuf {
    let text =
        std::fs::read_to_string(repo_root().join("examples/observability/prometheus-rules.yaml"))
            .unwrap();
    let rule: Value = serde_saphyr::from_str(&text).unwrap();
    let path = dir.join("rules.json");
    std::fs::write(
        &path,
        json!({"groups": rule["spec"]["groups"].clone()}).to_string(),
    )
    .unwrap();
    path
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    let Some(promtool) = binary("promtool") else {
        return;
    };
    let dir = scratch("promtool");
    let rules = write_rules(&dir);
    let out = run(Command::new(&promtool)
        .arg("check")
        .arg("rules")
        .arg(&rules));
    assert!(out.contains("SUCCESS"), "{out}");
    let tests = dir.join("alerts.test.yaml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prometheus/alerts.test.yaml"),
        &tests,
    )
    .unwrap();
    let out = run(Command::new(&promtool).arg("test").arg("rules").arg(&tests));
    assert!(out.contains("SUCCESS"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Prometheus process, stopped when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (job name → address) every second and evaluating
    /// the shipped rules every second.
    async fn start(binary: &Path, targets: &[(&str, SocketAddr)]) -> Self {
        let dir = scratch("server");
        let rules = write_rules(&dir);
        let scrape: Vec<Value> = targets
            .iter()
            .map(|(job, addr)| {
                json!({"job_name": job, "static_configs": [{"targets": [addr.to_string()]}]})
            })
            .collect();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [rules],
            "scrape_configs": scrape,
        });
        let config_path = dir.join("prometheus.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Self { child, addr, dir };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while get(addr, "/-/ready").await.0 != 200 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus never became ready: {}",
                std::fs::read_to_string(p.dir.join("prometheus.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        p
    }

    /// An instant query's result vector.
    async fn query(&self, promql: &str) -> Vec<Value> {
        let (code, body) = get(
            self.addr,
            &format!("/api/v1/query?query={}", url_encode(promql)),
        )
        .await;
        assert_eq!(code, 200, "`{promql}`: {body}");
        assert_eq!(body["status"], "success", "`{promql}`: {body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    async fn api(&self, path: &str) -> Value {
        let (code, body) = get(self.addr, path).await;
        assert_eq!(code, 200, "{path}: {body}");
        body["data"].clone()
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET over HTTP/1.0 (a whole, unchunked body); the status code and the body as JSON (`Null`
/// when it is not JSON, or no answer: code 0).
async fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return (0, Value::Null);
    };
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return (0, Value::Null);
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Every `expr` in the dashboard.
fn dashboard_queries() -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr", Value::String(e)) => out.push(e.clone()),
                        _ => walk(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let text =
        std::fs::read_to_string(repo_root().join("examples/observability/grafana-dashboard.json"))
            .unwrap();
    let mut out = Vec::new();
    walk(&serde_json::from_str(&text).unwrap(), &mut out);
    out
}

#[tokio::test]
async fn on_a_healthy_fleet_every_dashboard_query_has_series_and_no_alert_is_pending_or_firing() {
    let Some(prometheus) = binary("prometheus") else {
        return;
    };
    // A control plane and member `east` binding through its kube-scheduler and the extender;
    // a gang runs there, so that the latency histograms have observations.
    let (_dev, cp, east) = extender_fleet().await;
    let ext =
        tephra_extender::Extender::new(east.clone(), &tephra_extender::Options::default()).unwrap();
    tephra_extender::watch::start(ext.clone(), east.clone());
    let (ext_addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let _driver = kube_scheduler(east.clone(), ext_addr);
    let sched = fleet_scheduler(&cp).await;
    let sched_addr = sched.metrics_addr.expect("the scheduler serves /metrics");
    let prom = Prometheus::start(
        &prometheus,
        &[
            ("tephra-scheduler", sched_addr),
            ("tephra-extender", ext_addr),
        ],
    )
    .await;
    declare_gang(&cp, 3).await;
    let pods: Api<Pod> = Api::namespaced(east.clone(), "default");
    eventually(30, "the gang runs in east", || async {
        let list = pods.list(&ListParams::default()).await.ok()?.items;
        let running = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 3).then_some(())
    })
    .await;

    // Both targets up, scraped often enough for `rate()` over the dashboard's windows.
    eventually(30, "both targets scraped at least four times", || async {
        let up = prom.query("count_over_time(up[5m]) >= 4").await;
        let ok = prom.query("up == 1").await;
        (up.len() == 2 && ok.len() == 2).then_some(())
    })
    .await;
    for q in dashboard_queries() {
        let result = prom.query(&q).await;
        assert!(
            !result.is_empty(),
            "dashboard query has no series on a healthy fleet: {q}"
        );
    }

    // Every rule evaluated without error; none pending or firing.
    let data = prom.api("/api/v1/rules").await;
    let rules: Vec<&Value> = data["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert!(rules.len() >= 6, "{data}");
    for r in &rules {
        assert_eq!(
            r["health"], "ok",
            "rule {} does not evaluate: {r}",
            r["name"]
        );
    }
    let alerts = prom.api("/api/v1/alerts").await;
    assert_eq!(
        alerts["alerts"].as_array().map_or(0, Vec::len),
        0,
        "alerts on a healthy fleet: {alerts}"
    );
    sched.stop().await;
}
