//! The test environment itself on the real components: a cluster starts with the real
//! controller manager and scheduler, its RBAC refuses what a role does not grant and the audit
//! log says so, an API server restarts on its data, and nothing outlives the environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{eventually, node};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tephra_envtest::kubelet::{KubeletOptions, Kubelets};
use tephra_envtest::{ClusterOptions, Env, Release, User, require};

fn pod(name: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu}}}]}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_scheduler_binds_a_pod_that_a_simulated_kubelet_then_runs() {
    let Some(bins) = require(&Release::Oldest) else {
        return;
    };
    let env = Env::start(bins).await.unwrap();
    let cluster = env
        .cluster(
            "one",
            ClusterOptions {
                controller_manager: true,
                scheduler: Some(serde_json::Value::Null),
                ..ClusterOptions::default()
            },
        )
        .await
        .unwrap();
    let c = cluster.client().await.unwrap();
    let _kubelets = Kubelets::start(c.clone(), &[node("n0", "4")], KubeletOptions::default())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    // The ServiceAccount admission plugin refuses pods until the controller manager has made
    // the namespace's default service account.
    eventually(60, "the pod created", || async {
        pods.create(&PostParams::default(), &pod("p0", "1"))
            .await
            .ok()
    })
    .await;
    // More than the node holds: the real scheduler leaves it Unschedulable.
    pods.create(&PostParams::default(), &pod("big", "8"))
        .await
        .unwrap();
    eventually(60, "p0 running on n0", || async {
        let p = pods.get("p0").await.ok()?;
        let on = p.spec?.node_name?;
        (on == "n0" && p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    eventually(60, "big unschedulable", || async {
        let p = pods.get("big").await.ok()?;
        let cond = p
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")?;
        (cond.reason.as_deref() == Some("Unschedulable")).then_some(())
    })
    .await;
    let audit = cluster.audit().unwrap();
    assert!(
        audit.iter().any(|e| e.user == "system:kube-scheduler"
            && e.resource_path() == "pods/binding"
            && e.verb == "create"
            && e.code == 201),
        "the audit log records the scheduler's binding"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_refuses_a_service_account_what_no_role_grants_and_the_audit_log_says_so() {
    let Some(bins) = require(&Release::Oldest) else {
        return;
    };
    let env = Env::start(bins).await.unwrap();
    let cluster = env
        .cluster("rbac", ClusterOptions::default())
        .await
        .unwrap();
    let token = cluster
        .service_account_token("team", "reader")
        .await
        .unwrap();
    let as_reader = cluster.client_as(&User::Token(token)).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(as_reader, "team");
    let err = pods.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 403),
        "{err}"
    );
    let refused: Vec<_> = cluster
        .audit()
        .unwrap()
        .into_iter()
        .filter(|e| e.refused() && e.user == "system:serviceaccount:team:reader")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].verb, "list");
    assert_eq!(refused[0].resource, "pods");
    assert_eq!(refused[0].decision, "forbid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restarts_on_its_data_and_nothing_outlives_the_environment() {
    let Some(bins) = require(&Release::Oldest) else {
        return;
    };
    let env = Env::start(bins).await.unwrap();
    let dir = env.dir().to_path_buf();
    let cluster = env.cluster("a", ClusterOptions::default()).await.unwrap();
    let port: u16 = cluster.url().rsplit(':').next().unwrap().parse().unwrap();
    let c = cluster.client().await.unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kept"}, "data": {"k": "v"}}))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cluster.stop_apiserver();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "a stopped API server refuses connections"
    );
    cluster.start_apiserver().await.unwrap();
    let c = cluster.client().await.unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(c, "default");
    assert_eq!(
        cms.get("kept").await.unwrap().data.unwrap()["k"],
        "v",
        "the object outlives the restart"
    );
    drop(cluster);
    drop(env);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!dir.exists(), "{} is removed", dir.display());
}

/// `kubectl get rb` on a real kube-apiserver prints the member a binding places its job in
/// (the CRD's printer columns), as the devcluster's `--test kubectl` checks there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_rb_names_the_member_on_a_real_api_server() {
    let Some(single) =
        tephra_envtest::tier::single(&Release::tier(), &[], ClusterOptions::default())
            .await
            .unwrap()
    else {
        return;
    };
    let kubeconfig = single.cluster.admin_kubeconfig().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .env("KUBECONFIG", &kubeconfig)
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("kubectl runs (apt-get install kubernetes-client)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    kubectl(&["apply", "-f", "tests/printing/resourcebinding-east.yaml"]);
    let rb = kubectl(&["get", "rb", "llama-job"]);
    let mut lines = rb.lines();
    assert!(lines.next().unwrap().contains("CLUSTERS"), "{rb}");
    assert!(lines.next().unwrap().contains("east"), "{rb}");
    let wide = kubectl(&["get", "rb", "llama-job", "-o", "wide"]);
    let row = wide.lines().nth(1).unwrap();
    assert!(row.contains("llama ") && row.contains("west"), "{wide}");
}
