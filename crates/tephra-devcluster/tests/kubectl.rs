//! The same flows with the real `kubectl` (Debian's `kubernetes-client`; `.ci/run` installs it):
//! `apply -f examples/`, `get` with the CRDs' printer columns, `explain`, `patch`, `delete`,
//! `get -w`, and a refused manifest printed as kubectl prints the API server's 422.
//!
//! `TEPHRA_KUBECTL` names another kubectl binary to run them with. kubectl before 1.27 reads
//! only OpenAPI v2 (protobuf), which the devcluster serves empty, so with such a kubectl
//! (Debian 12's `kubernetes-client` is 1.20) `explain` is not checked; everything else is.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

fn binary() -> String {
    std::env::var("TEPHRA_KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

struct Kubectl {
    /// The client's minor version.
    minor: u32,
    kubeconfig: PathBuf,
    cache: PathBuf,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Kubectl {
    fn new(kubeconfig_yaml: &str) -> Self {
        let found = Command::new(binary())
            .args(["version", "--client", "-o", "json"])
            .output();
        let out = match found {
            Ok(o) if o.status.success() => o.stdout,
            _ => panic!(
                "kubectl is not installed: install Debian's kubernetes-client package \
                 (`apt-get install kubernetes-client`; bash .ci/run does this)"
            ),
        };
        let version: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let minor = version["clientVersion"]["minor"]
            .as_str()
            .unwrap_or_default()
            .trim_end_matches('+')
            .parse()
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "tephra-kubectl-{}-{}",
            std::process::id(),
            tephra_devcluster::kubeconfig::token()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml).unwrap();
        Self {
            minor,
            kubeconfig,
            cache: dir.join("cache"),
            _dir: TempDir(dir),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(binary());
        c.env("KUBECONFIG", &self.kubeconfig)
            .arg(format!("--cache-dir={}", self.cache.display()))
            .args(args)
            .current_dir(repo());
        c
    }

    /// Runs kubectl on a blocking thread (the servers run on this test's runtime).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let mut cmd = self.command(args);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_explains_patches_and_deletes() {
    let h = common::fleet().await;
    let k = Kubectl::new(&h.kubeconfig_yaml());

    let out = k.ok(&["apply", "-f", "examples/"]).await;
    for line in [
        "job.batch.volcano.sh/llama-finetune created",
        "podgroup.scheduling.volcano.sh/ray-cluster-a created",
        "queue.scheduling.volcano.sh/org-ml created",
        "propagationpolicy.policy.tephra.io/gpu-jobs-us-east created",
        "pod/ray-cluster-a-head created",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let again = k
        .ok(&["apply", "-f", "examples/pytorch-distributed.yaml"])
        .await;
    assert!(again.contains("unchanged"), "{again}");

    // Printer columns from the CRDs, short names from discovery.
    let jobs = k.ok(&["get", "vcjob", "-A"]).await;
    let header = jobs.lines().next().unwrap();
    for col in [
        "NAMESPACE",
        "NAME",
        "STATUS",
        "MINAVAILABLE",
        "RUNNINGS",
        "AGE",
    ] {
        assert!(header.contains(col), "{header}");
    }
    assert!(jobs.contains("llama-finetune"), "{jobs}");
    let wide = k.ok(&["get", "queue", "ml-research", "-o", "wide"]).await;
    assert!(wide.lines().next().unwrap().contains("WEIGHT"), "{wide}");

    if k.minor >= 27 {
        let explain = k.ok(&["explain", "vcjob.spec.tasks"]).await;
        assert!(explain.contains("FIELD: tasks"), "{explain}");
        let explain = k.ok(&["explain", "pods.spec.nodeName"]).await;
        assert!(explain.contains("nodeName"), "{explain}");
    } else {
        eprintln!(
            "kubectl 1.{} reads only OpenAPI v2: explain not checked",
            k.minor
        );
    }

    let patched = k
        .ok(&[
            "patch",
            "queue",
            "ml-research",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"weight":7}}"#,
        ])
        .await;
    assert!(
        patched.contains("queue.scheduling.volcano.sh/ml-research patched"),
        "{patched}"
    );
    let weight = k
        .ok(&[
            "get",
            "queue",
            "ml-research",
            "-o",
            "jsonpath={.spec.weight}",
        ])
        .await;
    assert_eq!(weight, "7");
    k.ok(&[
        "patch",
        "queue",
        "ml-research",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/weight","value":8}]"#,
    ])
    .await;
    let (ok, _, err) = k
        .run(&[
            "patch",
            "queue",
            "ml-research",
            "-p",
            r#"{"spec":{"weight":9}}"#,
        ])
        .await;
    assert!(
        !ok && err.contains("the body of the request was in an unknown format"),
        "{err}"
    );

    // A manifest the CRD refuses: kubectl prints the 422 with the field.
    let (ok, _, err) = k
        .run(&["apply", "-f", "tests/broken/job-negative-replicas.yaml"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("The Job \"broken\" is invalid: spec.tasks[0].replicas"),
        "{err}"
    );

    let deleted = k
        .ok(&["delete", "vcjob", "-n", "ml", "llama-finetune"])
        .await;
    assert!(
        deleted.contains("job.batch.volcano.sh \"llama-finetune\" deleted"),
        "{deleted}"
    );
    let (ok, _, err) = k.run(&["get", "vcjob", "-n", "ml", "llama-finetune"]).await;
    assert!(!ok && err.contains("NotFound"), "{err}");

    // A ResourceBinding names its member (and, wide, its workload and what it is evicted from).
    k.ok(&["apply", "-f", "tests/printing/resourcebinding-east.yaml"])
        .await;
    let rb = k.ok(&["get", "rb", "llama-job"]).await;
    let mut lines = rb.lines();
    let header = lines.next().unwrap();
    assert!(header.contains("CLUSTERS"), "{rb}");
    assert!(lines.next().unwrap().contains("east"), "{rb}");
    let wide = k.ok(&["get", "rb", "llama-job", "-o", "wide"]).await;
    assert!(
        wide.contains("WORKLOAD") && wide.contains("EVICTING-FROM"),
        "{wide}"
    );
    let row = wide.lines().nth(1).unwrap();
    assert!(row.contains("llama ") && row.contains("west"), "{wide}");

    // Server-side apply and a member context.
    let ssa = k
        .ok(&[
            "apply",
            "--server-side",
            "-f",
            "examples/podgroup-with-pods.yaml",
        ])
        .await;
    assert!(ssa.contains("serverside-applied"), "{ssa}");
    let nodes = k.ok(&["--context", "east", "get", "nodes"]).await;
    assert!(
        nodes.contains("east-0") && nodes.contains("Ready"),
        "{nodes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_prints_pods_as_they_start() {
    let h = common::fleet().await;
    let k = Kubectl::new(&h.kubeconfig_yaml());
    k.ok(&["--context", "east", "get", "pods"]).await;
    let mut child = k
        .command(&["--context", "east", "get", "pods", "-w", "-o", "wide"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "east").await);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "watched"},
        "spec": {"nodeName": "east-0", "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let mut lines = Vec::new();
    let saw_running = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = rx.recv().await {
            let running =
                line.contains("watched") && line.contains("Running") && line.contains("east-0");
            lines.push(line);
            if running {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    let _ = child.kill();
    let _ = child.wait();
    assert!(saw_running, "kubectl get -w printed:\n{}", lines.join("\n"));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("watched") && l.contains("Pending")),
        "{lines:?}"
    );
    // kubectl logs: what the simulated kubelet did with it, with times.
    let log = k.ok(&["--context", "east", "logs", "watched"]).await;
    assert!(
        log.contains("simulated container c (image busybox) started on node east-0")
            && log.contains("runs until deleted"),
        "{log}"
    );
    let (ok, _, err) = k
        .run(&["--context", "east", "logs", "watched", "-c", "nope"])
        .await;
    assert!(
        !ok && err.contains("container nope is not valid for pod watched"),
        "{err}"
    );
}

/// kubectl sends the built-in kinds its `create` subcommands write in protobuf: they are
/// decoded as kube-apiserver decodes them, and a kind this server cannot decode is refused
/// with 415 naming it (and how to send it instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_writes_the_built_in_kinds_it_sends_in_protobuf() {
    let h = common::fleet().await;
    let k = Kubectl::new(&h.kubeconfig_yaml());
    for args in [
        &["create", "namespace", "team-a"][..],
        &[
            "create",
            "configmap",
            "cfg",
            "-n",
            "team-a",
            "--from-literal=a=b",
        ],
        &[
            "create",
            "secret",
            "generic",
            "pw",
            "-n",
            "team-a",
            "--from-literal=pw=hunter2",
        ],
        &[
            "create",
            "priorityclass",
            "urgent",
            "--value=-5",
            "--description=low, really",
        ],
        &["create", "serviceaccount", "robot", "-n", "team-a"],
        &[
            "create",
            "role",
            "reader",
            "-n",
            "team-a",
            "--verb=get,list",
            "--resource=pods",
        ],
        &[
            "create",
            "rolebinding",
            "reader",
            "-n",
            "team-a",
            "--role=reader",
            "--serviceaccount=team-a:robot",
        ],
        &[
            "create",
            "clusterrole",
            "aggregate",
            "--aggregation-rule=example.com/agg=true",
        ],
        &[
            "create",
            "clusterrolebinding",
            "devs",
            "--clusterrole=aggregate",
            "--group=devs",
        ],
        &[
            "create",
            "service",
            "clusterip",
            "web",
            "-n",
            "team-a",
            "--tcp=80:8080",
        ],
        &[
            "create",
            "service",
            "nodeport",
            "named",
            "-n",
            "team-a",
            "--tcp=80:http",
        ],
        &[
            "create",
            "pdb",
            "half",
            "-n",
            "team-a",
            "--selector=app=x",
            "--min-available=50%",
        ],
        &[
            "create",
            "pdb",
            "one",
            "-n",
            "team-a",
            "--selector=app=y",
            "--max-unavailable=1",
        ],
    ] {
        k.ok(args).await;
    }
    let get = |args: &'static [&'static str]| k.ok(args);
    assert_eq!(
        get(&[
            "get",
            "secret",
            "pw",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.type}"
        ])
        .await,
        "Opaque",
        "defaulted, as kube-apiserver does"
    );
    assert_eq!(
        get(&[
            "get",
            "role",
            "reader",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.rules[0].verbs}|{.rules[0].resources}|{.rules[0].apiGroups}"
        ])
        .await,
        r#"["get","list"]|["pods"]|[""]"#
    );
    assert_eq!(
        get(&["get", "rolebinding", "reader", "-n", "team-a", "-o",
            "jsonpath={.roleRef.kind}/{.roleRef.name}|{.subjects[0].kind}/{.subjects[0].namespace}/{.subjects[0].name}"])
        .await,
        "Role/reader|ServiceAccount/team-a/robot"
    );
    assert_eq!(
        get(&[
            "get",
            "clusterrole",
            "aggregate",
            "-o",
            "jsonpath={.aggregationRule.clusterRoleSelectors[0].matchLabels}"
        ])
        .await,
        r#"{"example.com/agg":"true"}"#
    );
    assert_eq!(
        get(&[
            "get",
            "clusterrolebinding",
            "devs",
            "-o",
            "jsonpath={.subjects[0].kind}/{.subjects[0].name}"
        ])
        .await,
        "Group/devs"
    );
    // targetPort is an IntOrString: a number, or a port's name.
    assert_eq!(
        get(&["get", "svc", "web", "-n", "team-a", "-o",
            "jsonpath={.spec.type}|{.spec.ports[0].port}|{.spec.ports[0].targetPort}|{.spec.selector}"])
        .await,
        r#"ClusterIP|80|8080|{"app":"web"}"#
    );
    assert_eq!(
        get(&[
            "get",
            "svc",
            "named",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.spec.type}|{.spec.ports[0].targetPort}"
        ])
        .await,
        "NodePort|http"
    );
    assert_eq!(
        get(&[
            "get",
            "pdb",
            "half",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.spec.minAvailable}|{.spec.selector.matchLabels.app}"
        ])
        .await,
        "50%|x"
    );
    assert_eq!(
        get(&[
            "get",
            "pdb",
            "one",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.spec.maxUnavailable}"
        ])
        .await,
        "1"
    );
    let data = k
        .ok(&[
            "get",
            "cm",
            "cfg",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.a}",
        ])
        .await;
    assert_eq!(data, "b");
    let pw = k
        .ok(&[
            "get",
            "secret",
            "pw",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.pw}",
        ])
        .await;
    assert_eq!(pw, "aHVudGVyMg==", "hunter2, base64");
    let pc = k
        .ok(&[
            "get",
            "pc",
            "urgent",
            "-o",
            "jsonpath={.value}|{.description}",
        ])
        .await;
    assert_eq!(pc, "-5|low, really");
    let ns = k
        .ok(&["get", "ns", "team-a", "-o", "jsonpath={.status.phase}"])
        .await;
    assert_eq!(ns, "Active");
    k.ok(&["get", "sa", "robot", "-n", "team-a"]).await;
    let (ok, _, err) = k
        .run(&[
            "create",
            "deployment",
            "web",
            "--image=busybox",
            "-n",
            "team-a",
        ])
        .await;
    assert!(
        !ok && err.contains("not apps/v1 Deployment: send it as JSON"),
        "{err}"
    );
}
