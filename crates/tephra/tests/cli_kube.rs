//! `tephra job|queue|pg|cluster` against a devcluster fleet, run as a user runs them (the
//! binary, a kubeconfig, a context); tables and messages compared with golden files under
//! `tests/golden/` (`TEPHRA_BLESS=1` rewrites them), exit codes checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_devcluster::fleet::MemberSpec;
use tephra_devcluster::{DevCluster, Handle, Options};

struct Cli {
    kubeconfig: PathBuf,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Cli {
    fn new(dev: &Handle, tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tephra-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, dev.kubeconfig_yaml()).unwrap();
        Self {
            kubeconfig,
            _dir: TempDir(dir),
        }
    }

    /// Runs `tephra <args>` on the control plane; (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut all: Vec<&str> = args.to_vec();
        let path = self.kubeconfig.to_str().unwrap().to_string();
        all.extend(["--kubeconfig", &path, "--context", "control-plane"]);
        let out = Command::new(env!("CARGO_BIN_EXE_tephra"))
            .args(&all)
            .output()
            .expect("tephra runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs and expects success.
    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "tephra {args:?}: {err}");
        out
    }
}

fn golden(name: &str, actual: &str) {
    let today = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%d")
        .to_string();
    let actual = actual.replace(&today, "YYYY-MM-DD");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("TEPHRA_BLESS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (TEPHRA_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, want, "{name} differs from its golden file");
}

async fn fleet() -> Handle {
    DevCluster::start(Options {
        members: vec![MemberSpec {
            name: "east".into(),
            ..MemberSpec::default()
        }],
        control_plane: true,
        queues: vec![
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": true}}),
        ],
        kubelet: None,
        ..Options::default()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_commands_create_list_get_and_operate_as_vcctl_does() {
    let dev = fleet().await;
    let cli = Cli::new(&dev, "queue");
    let created =
        tokio::task::block_in_place(|| cli.ok(&["queue", "create", "-n", "research", "-w", "3"]));
    assert_eq!(created, "queue.scheduling.volcano.sh/research created\n");
    tokio::task::block_in_place(|| {
        golden("queue-list.txt", &cli.ok(&["queue", "list"]));
        golden(
            "queue-list-wide.txt",
            &cli.ok(&["queue", "list", "-o", "wide"]),
        );
        golden(
            "queue-get-name.txt",
            &cli.ok(&["queue", "get", "-n", "research", "-o", "name"]),
        );
        let yaml = cli.ok(&["queue", "get", "-n", "research", "-o", "yaml"]);
        assert!(
            yaml.contains("kind: Queue") && yaml.contains("weight: 3"),
            "{yaml}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&cli.ok(&["queue", "list", "-o", "json"])).unwrap();
        assert_eq!(json["kind"], "List");
        assert_eq!(json["items"].as_array().unwrap().len(), 2);
        assert_eq!(
            cli.ok(&[
                "queue", "operate", "-n", "research", "-a", "update", "-w", "5"
            ]),
            "queue.scheduling.volcano.sh/research weight set to 5\n"
        );
        assert_eq!(
            cli.ok(&["queue", "operate", "-n", "research", "-a", "close"]),
            "queue.scheduling.volcano.sh/research CloseQueue requested\n"
        );
        // Errors: what failed, and an exit code per kind.
        let (code, _, err) = cli.run(&["queue", "get", "-n", "nope"]);
        assert_eq!((code, err.trim()), (3, "error: queue nope not found"));
        let (code, _, err) = cli.run(&["queue", "create", "-n", "research"]);
        assert_eq!(code, 5, "{err}");
        let (code, _, err) = cli.run(&["queue", "operate", "-n", "research", "-a", "shrink"]);
        assert_eq!(code, 1);
        assert!(
            err.contains("valid actions are open, close, update and delete"),
            "{err}"
        );
    });
    let commands: Api<tephra_api::Command> =
        Api::namespaced(dev.client("control-plane").await.unwrap(), "default");
    let list = commands.list(&Default::default()).await.unwrap().items;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].fields.action.as_deref(), Some("CloseQueue"));
    assert_eq!(list[0].fields.target.as_ref().unwrap().name, "research");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_pg_and_cluster_commands_list_view_suspend_and_taint() {
    let dev = fleet().await;
    let cp = dev.client("control-plane").await.unwrap();
    let job: tephra_api::Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": "default",
                 "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                     "containers": [{"name": "main", "image": "busybox"}]}}}]}
    }))
    .unwrap();
    Api::<tephra_api::Job>::namespaced(cp.clone(), "default")
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    let pg: tephra_api::PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "default",
                     "annotations": {"tephra.io/expected-start": "2026-01-01T01:00:00Z"}},
        "spec": {"minMember": 2, "queue": "default"}
    }))
    .unwrap();
    Api::<tephra_api::PodGroup>::namespaced(cp.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
    // What the scheduler would have said of it: a condition on the PodGroup.
    Api::<tephra_api::PodGroup>::namespaced(cp.clone(), "default")
        .patch(
            "llm",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [{
                "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                "message": "2/2 tasks in gang unschedulable: 0/1 nodes are available, 1 Insufficient nvidia.com/gpu",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cli = Cli::new(&dev, "job");
    tokio::task::block_in_place(|| {
        golden("job-list.txt", &cli.ok(&["job", "list"]));
        golden("job-list-all.txt", &cli.ok(&["job", "list", "-A"]));
        assert_eq!(
            cli.ok(&["job", "list", "-q", "other"]),
            "No resources found\n"
        );
        golden("job-view.txt", &cli.ok(&["job", "view", "-N", "llm"]));
        assert_eq!(
            cli.ok(&["job", "suspend", "-N", "llm"]),
            "job.batch.volcano.sh/llm AbortJob requested\n"
        );
        let (code, _, err) = cli.run(&["job", "resume", "-N", "gone"]);
        assert_eq!((code, err.trim()), (3, "error: job default/gone not found"));
        golden("pg-list.txt", &cli.ok(&["pg", "list"]));
        golden(
            "cluster-list.txt",
            &cli.ok(&["cluster", "list", "-o", "wide"]),
        );
        assert_eq!(
            cli.ok(&["cluster", "taint", "east", "maintenance=true:NoSchedule"]),
            "cluster.cluster.tephra.io/east tainted\n"
        );
        golden(
            "cluster-get-tainted.txt",
            &cli.ok(&["cluster", "get", "east", "-o", "wide"]),
        );
        cli.ok(&["cluster", "untaint", "east", "maintenance:NoSchedule"]);
        let (code, _, _) = cli.run(&["cluster", "untaint", "east", "maintenance"]);
        assert_eq!(code, 3, "removing a taint that is not there");
        let (code, _, err) = cli.run(&["cluster", "taint", "east", "bad:Sometimes"]);
        assert_eq!(code, 1);
        assert!(
            err.contains("is not NoSchedule, PreferNoSchedule or NoExecute"),
            "{err}"
        );
        // job run, from flags and from a file; a Job the API server would refuse is refused
        // before it is sent, naming the field.
        assert_eq!(
            cli.ok(&[
                "job", "run", "-N", "quick", "-r", "3", "-m", "2", "-R", "cpu=500m"
            ]),
            "run job quick successfully\n"
        );
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let hello = repo.join("examples/dev/hello-job.yaml");
        assert_eq!(
            cli.ok(&["job", "run", "-f", hello.to_str().unwrap()]),
            "run job hello successfully\n"
        );
        golden(
            "job-list-after-run.txt",
            &cli.ok(&["job", "list", "-o", "wide"]),
        );
        let broken = repo.join("tests/broken/job-minavailable-exceeds-replicas.yaml");
        let (code, _, err) = cli.run(&["job", "run", "-f", broken.to_str().unwrap()]);
        assert_eq!(code, 1);
        assert!(
            err.contains("the Job is refused") && err.contains("minAvailable"),
            "{err}"
        );
        let (code, _, err) = cli.run(&["job", "run", "-N", "x", "-R", "cpu"]);
        assert_eq!(code, 1);
        assert!(
            err.contains("--requests \"cpu\": expected name=quantity"),
            "{err}"
        );
        assert_eq!(
            cli.ok(&["job", "delete", "-N", "llm"]),
            "job.batch.volcano.sh/llm deleted\n"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_join_registers_a_member_rotate_gives_it_new_credentials_and_unjoin_removes_it() {
    let dev = fleet().await;
    let other = DevCluster::start(Options::single()).await.unwrap();
    let cli = Cli::new(&dev, "join");
    let member_kubeconfig = cli.kubeconfig.with_file_name("member-kubeconfig");
    std::fs::write(&member_kubeconfig, other.kubeconfig_for("local").unwrap()).unwrap();
    let path = member_kubeconfig.to_str().unwrap().to_string();
    tokio::task::block_in_place(|| {
        let out = cli.ok(&[
            "cluster",
            "join",
            "west",
            "--cluster-kubeconfig",
            &path,
            "--cluster-region",
            "eu-west-1",
            "--binding-mode",
            "Extender",
        ]);
        assert!(
            out.starts_with("cluster.cluster.tephra.io/west joined (https://"),
            "{out}"
        );
        let (code, _, err) = cli.run(&["cluster", "join", "west", "--cluster-kubeconfig", &path]);
        assert_eq!(code, 5, "joining twice is a conflict: {err}");
    });
    let cp = dev.client("control-plane").await.unwrap();
    let west = Api::<tephra_api::Cluster>::all(cp.clone())
        .get("west")
        .await
        .unwrap();
    assert_eq!(west.spec.region.as_deref(), Some("eu-west-1"));
    assert_eq!(
        west.spec.binding_mode,
        Some(tephra_api::cluster::BindingMode::Extender)
    );
    let r = west.spec.secret_ref.clone().unwrap();
    assert_eq!(
        (r.namespace.as_str(), r.name.as_str()),
        ("tephra-cluster", "west")
    );
    // The Secret is what the scheduler connects with: the member answers with it.
    let endpoint = tephra_kube::clients::Endpoint::of(&west).unwrap();
    let member = tephra_kube::members::connect(&cp, &endpoint).await.unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(member)
        .list(&Default::default())
        .await
        .expect("the joined member answers with the Secret's token and CA");
    // The member is rebuilt with a new token: the Secret's no longer works, and `rotate`
    // writes the new one from the member's new kubeconfig into the same Secret.
    other.rotate_member_token("local").unwrap();
    let stale = tephra_kube::members::connect(&cp, &endpoint).await.unwrap();
    assert!(
        Api::<k8s_openapi::api::core::v1::Node>::all(stale)
            .list(&Default::default())
            .await
            .is_err()
    );
    std::fs::write(&member_kubeconfig, other.kubeconfig_for("local").unwrap()).unwrap();
    tokio::task::block_in_place(|| {
        let out = cli.ok(&["cluster", "rotate", "west", "--cluster-kubeconfig", &path]);
        assert!(
            out.starts_with("cluster.cluster.tephra.io/west credentials rotated (https://"),
            "{out}"
        );
    });
    let fresh = tephra_kube::members::connect(&cp, &endpoint).await.unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(fresh)
        .list(&Default::default())
        .await
        .expect("the member answers with the rotated token");
    tokio::task::block_in_place(|| {
        assert_eq!(
            cli.ok(&["cluster", "unjoin", "west"]),
            "cluster.cluster.tephra.io/west unjoined\n"
        );
        let (code, _, _) = cli.run(&["cluster", "unjoin", "west"]);
        assert_eq!(code, 3);
    });
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(cp, "tephra-cluster");
    assert!(
        secrets.get_opt("west").await.unwrap().is_none(),
        "the Secret goes with the Cluster"
    );
}

/// The words of each line of a table, for checks that do not depend on ages or widths.
fn words(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_and_jobflow_commands_list_get_suspend_resume_describe_and_delete() {
    let dev = fleet().await;
    let cp = dev.client("control-plane").await.unwrap();
    let template = json!({"tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
        "containers": [{"name": "c", "image": "busybox"}]}}}]});
    let create = |doc: serde_json::Value| {
        let cp = cp.clone();
        async move {
            let (group, version) = {
                let av = doc["apiVersion"].as_str().unwrap().to_string();
                let (g, v) = av.split_once('/').unwrap();
                (g.to_string(), v.to_string())
            };
            let kind = doc["kind"].as_str().unwrap().to_string();
            let ar = kube::discovery::ApiResource {
                group,
                version,
                api_version: doc["apiVersion"].as_str().unwrap().into(),
                plural: format!("{}s", kind.to_lowercase()),
                kind,
            };
            let api: Api<kube::api::DynamicObject> =
                Api::namespaced_with(cp.clone(), "default", &ar);
            api.create(
                &PostParams::default(),
                &serde_json::from_value(doc).unwrap(),
            )
            .await
            .unwrap();
        }
    };
    create(
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 2 * * *", "timeZone": "Europe/Berlin",
            "jobTemplate": {"spec": template.clone()}}}),
    )
    .await;
    for t in ["prep", "train"] {
        create(
            json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate",
            "metadata": {"name": t}, "spec": template.clone()}),
        )
        .await;
    }
    create(
        json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
        "metadata": {"name": "pipe"},
        "spec": {"flows": [{"name": "prep"},
            {"name": "train", "dependsOn": {"targets": ["prep"]}}]}}),
    )
    .await;
    // The flow controller makes prep's Job (no scheduler runs: it stays without a phase).
    let ctl = tephra_kube::jobflows::start(
        cp.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    );
    let jobs: Api<tephra_api::Job> = Api::namespaced(cp.clone(), "default");
    for _ in 0..200 {
        if jobs.get("pipe-prep").await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cli = Cli::new(&dev, "cron-flow");
    tokio::task::block_in_place(|| {
        let list = words(&cli.ok(&["cronjob", "list"]));
        assert_eq!(
            list[0],
            [
                "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"
            ]
        );
        assert_eq!(
            list[1][..7],
            ["nightly", "0", "2", "*", "*", "*", "Europe/Berlin"]
        );
        assert_eq!(list[1][7..10], ["False", "0", "<none>"]);
        let wide = cli.ok(&["cronjob", "list", "-o", "wide"]);
        assert!(
            wide.contains("TASKS") && words(&wide)[1].last().unwrap() == "w",
            "{wide}"
        );
        assert_eq!(
            cli.ok(&["cronjob", "suspend", "-N", "nightly"]),
            "cronjob.batch.volcano.sh/nightly suspended\n"
        );
        assert_eq!(
            words(&cli.ok(&["cronjob", "get", "-N", "nightly"]))[1][7],
            "True"
        );
        assert_eq!(
            cli.ok(&["cronjob", "resume", "-N", "nightly"]),
            "cronjob.batch.volcano.sh/nightly resumed\n"
        );
        assert_eq!(
            cli.ok(&["cronjob", "get", "-N", "nightly", "-o", "name"]),
            "cronjob.batch.volcano.sh/nightly\n"
        );
        let (code, _, err) = cli.run(&["cronjob", "get", "-N", "nope"]);
        assert_eq!(
            (code, err.trim()),
            (3, "error: cronjob default/nope not found")
        );

        let list = words(&cli.ok(&["jobflow", "list"]));
        assert_eq!(list[0], ["NAME", "PHASE", "COMPLETED", "AGE"]);
        assert_eq!(list[1][..3], ["pipe", "Pending", "0/2"]);
        let described = cli.ok(&["jobflow", "describe", "-N", "pipe"]);
        let d = words(&described);
        let steps = d
            .iter()
            .position(|l| l.first().map(String::as_str) == Some("STEP"))
            .unwrap();
        assert_eq!(
            d[steps + 1],
            ["prep", "pipe-prep", "Pending", "<none>"],
            "{described}"
        );
        assert_eq!(
            d[steps + 2],
            ["train", "pipe-train", "NotCreated", "prep"],
            "{described}"
        );
        let yaml = cli.ok(&["jobflow", "get", "-N", "pipe", "-o", "yaml"]);
        assert!(yaml.contains("kind: JobFlow"), "{yaml}");
        assert_eq!(
            cli.ok(&["jobflow", "delete", "-N", "pipe"]),
            "jobflow.flow.volcano.sh/pipe deleted\n"
        );
        assert_eq!(
            cli.ok(&["cronjob", "delete", "-N", "nightly"]),
            "cronjob.batch.volcano.sh/nightly deleted\n"
        );
        assert_eq!(cli.ok(&["jobflow", "list"]), "No resources found\n");
    });
    for t in ctl {
        t.abort();
    }
}
