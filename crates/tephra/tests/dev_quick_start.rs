//! README's quick start with a Kubernetes API, run as a user would: `tephra dev` (with the
//! scheduler inside, or serving the API only while `tephra scheduler --members clusters` runs
//! against it), `kubectl apply` of a PodGroup with its pods, and the gang running in a member;
//! `kubectl apply` of a Volcano Job, run by the job controller inside to Completed; the web UI
//! at the address it prints.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A child process killed when the test ends, passing or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(args: &[&str]) -> Killed {
    Killed(
        Command::new(env!("CARGO_BIN_EXE_tephra"))
            .args(args)
            .current_dir(repo())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tephra starts"),
    )
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .current_dir(repo())
        .output()
        .expect("kubectl runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn until(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Applies the PodGroup example and waits until its three pods run in one member.
fn apply_and_see_the_gang_run(kubeconfig: &Path) {
    until(20, "the API answers", || {
        kubectl(kubeconfig, &["get", "queues"]).0
    });
    let (ok, out) = kubectl(
        kubeconfig,
        &["apply", "-f", "examples/podgroup-with-pods.yaml"],
    );
    assert!(ok, "{out}");
    let members = ["us-east-gpu", "us-west-gpu", "us-east-cpu"];
    until(30, "three pods running in one member", || {
        members.iter().any(|m| {
            let (ok, out) = kubectl(
                kubeconfig,
                &["--context", m, "get", "pods", "-n", "ray", "--no-headers"],
            );
            ok && out.lines().filter(|l| l.contains("Running")).count() == 3
        })
    });
    let (ok, out) = kubectl(
        kubeconfig,
        &["get", "resourcebindings", "-n", "ray", "-o", "name"],
    );
    assert!(ok && out.contains("ray-cluster-a"), "{out}");
    // The pods declared on the control plane read as their copies run: READY 1/1.
    until(
        20,
        "the declared pods READY 1/1 on the control plane",
        || {
            let (ok, out) = kubectl(kubeconfig, &["get", "pods", "-n", "ray", "--no-headers"]);
            ok && out.lines().count() == 3
                && out
                    .lines()
                    .all(|l| l.split_whitespace().nth(1) == Some("1/1") && l.contains("Running"))
        },
    );
    // README's `-L tephra.io/member`: a MEMBER column naming where each one runs.
    until(
        20,
        "the declared pods' MEMBER column naming one member",
        || {
            let args = ["get", "pods", "-n", "ray", "-L", "tephra.io/member"];
            let (ok, out) = kubectl(kubeconfig, &args);
            let header = out.lines().next().unwrap_or("");
            let named: Vec<&str> = out
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().last())
                .collect();
            ok && header.split_whitespace().last() == Some("MEMBER")
                && named.len() == 3
                && named.iter().all(|m| members.contains(m) && *m == named[0])
        },
    );
    // README's `kubectl logs`: read from the member, through the control plane.
    let (ok, log) = kubectl(kubeconfig, &["logs", "-n", "ray", "ray-cluster-a-head"]);
    assert!(
        ok && log.contains("simulated container ray-head"),
        "the head's log from its member: {log}"
    );
    // Its printer columns say it is scheduled and fully applied.
    until(
        20,
        "the binding's CLUSTERS column naming a member, SCHEDULED and FULLYAPPLIED True",
        || {
            let (ok, out) = kubectl(kubeconfig, &["get", "resourcebindings", "-n", "ray"]);
            let header: Vec<&str> = out
                .lines()
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let row: Vec<&str> = out
                .lines()
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .collect();
            // NAME CLUSTERS SCHEDULED FULLYAPPLIED AGE: the member it landed in, then both
            // conditions.
            ok && header.get(1..4) == Some(&["CLUSTERS", "SCHEDULED", "FULLYAPPLIED"][..])
                && row.get(1).is_some_and(|c| members.contains(c))
                && row.get(2..4) == Some(&["True", "True"][..])
        },
    );
}

fn kubeconfig(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tephra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("kubeconfig")
}

#[test]
fn tephra_dev_schedules_a_podgroup_applied_with_kubectl() {
    let k = kubeconfig("dev");
    let _dev = start(&["dev", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "the kubeconfig written", || k.exists());
    apply_and_see_the_gang_run(&k);
}

/// README's Workload API example on `tephra dev`: the Kubernetes PodGroup's three pods run in
/// one member, and `kubectl get podgroups.scheduling.k8s.io` says it was scheduled.
#[test]
fn tephra_dev_schedules_a_kubernetes_podgroup_applied_with_kubectl() {
    let k = kubeconfig("kube-gang");
    let _dev = start(&["dev", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "the kubeconfig written", || k.exists());
    until(20, "the API answers", || kubectl(&k, &["get", "queues"]).0);
    let (ok, out) = kubectl(
        &k,
        &["apply", "-f", "examples/kube-podgroup-with-pods.yaml"],
    );
    assert!(ok, "{out}");
    let members = ["us-east-gpu", "us-west-gpu", "us-east-cpu"];
    until(30, "three pods running in one member", || {
        members.iter().any(|m| {
            let (ok, out) = kubectl(
                &k,
                &[
                    "--context",
                    m,
                    "get",
                    "pods",
                    "-n",
                    "ray-gangs",
                    "--no-headers",
                ],
            );
            ok && out.lines().filter(|l| l.contains("Running")).count() == 3
        })
    });
    until(20, "the PodGroup's STATUS Scheduled", || {
        let (ok, out) = kubectl(
            &k,
            &[
                "get",
                "podgroups.scheduling.k8s.io",
                "-n",
                "ray-gangs",
                "--no-headers",
            ],
        );
        // NAME POLICY WORKLOAD STATUS AGE
        let row: Vec<&str> = out.split_whitespace().collect();
        ok && row.get(..4) == Some(&["ray-cluster-b", "Gang", "<none>", "Scheduled"][..])
    });
    // `kubectl logs` on the control plane: its API server asks the virtual node's kubelet
    // endpoint, and tephra reads the log of the pod's copy in its member.
    let (ok, out) = kubectl(
        &k,
        &[
            "get",
            "pods",
            "-n",
            "ray-gangs",
            "-o",
            "wide",
            "--no-headers",
        ],
    );
    assert!(ok && out.lines().count() == 3, "{out}");
    assert!(
        out.lines()
            .all(|l| l.split_whitespace().any(|c| c == "tephra")),
        "each declared pod on the virtual node: {out}"
    );
    let pod = out
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let (ok, log) = kubectl(&k, &["logs", "-n", "ray-gangs", &pod]);
    assert!(
        ok && log.contains("[tephra devcluster] simulated container"),
        "the member's log through the control plane: {log}"
    );
}

#[test]
fn tephra_scheduler_runs_against_tephra_dev_from_its_kubeconfig() {
    let k = kubeconfig("sched");
    let _dev = start(&["dev", "--no-scheduler", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "the kubeconfig written", || k.exists());
    let _scheduler = start(&[
        "scheduler",
        "--kubeconfig",
        k.to_str().unwrap(),
        "--members",
        "clusters",
        "--listen-address",
        "127.0.0.1:0",
        "--schedule-period",
        "500ms",
        // The virtual node's endpoint, which `kubectl logs` reaches: the kubeconfig's CA
        // signed the devcluster's kubelet client certificate.
        "--virtual-node-address",
        "127.0.0.1",
        "--virtual-node-port",
        "0",
    ]);
    apply_and_see_the_gang_run(&k);
}

#[test]
fn tephra_dev_runs_a_volcano_job_applied_with_kubectl_to_completed() {
    let k = kubeconfig("job");
    let _dev = start(&["dev", "--speed", "20", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "the kubeconfig written", || k.exists());
    until(20, "the API answers", || kubectl(&k, &["get", "queues"]).0);
    let (ok, out) = kubectl(&k, &["apply", "-f", "examples/dev/hello-job.yaml"]);
    assert!(ok, "{out}");
    until(60, "the job Completed", || {
        let (ok, out) = kubectl(
            &k,
            &[
                "get",
                "vcjob",
                "hello",
                "-o",
                "jsonpath={.status.state.phase}",
            ],
        );
        ok && out.trim() == "Completed"
    });
    let (ok, out) = kubectl(
        &k,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=hello",
        ],
    );
    assert!(ok && out.contains("CompleteJob"), "{out}");
}

fn phase(k: &Path, job: &str) -> String {
    let (_, out) = kubectl(
        k,
        &["get", "vcjob", job, "-o", "jsonpath={.status.state.phase}"],
    );
    out.trim().to_string()
}

#[test]
fn tephra_dev_runs_the_volume_and_dra_examples_to_completed() {
    let k = kubeconfig("claims");
    let _dev = start(&["dev", "--speed", "20", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "the kubeconfig written", || k.exists());
    until(20, "the API answers", || kubectl(&k, &["get", "queues"]).0);
    for example in [
        "examples/volcano-job-with-volume.yaml",
        "examples/dra-gpu-gang.yaml",
    ] {
        let (ok, out) = kubectl(&k, &["apply", "-f", example]);
        assert!(ok, "{example}: {out}");
    }
    until(90, "both jobs Completed", || {
        phase(&k, "checkpointed") == "Completed" && phase(&k, "dra-train") == "Completed"
    });
    // The gang's volume was provisioned where it ran, and its GPUs came from the DRA pool.
    let members = ["us-east-gpu", "us-west-gpu", "us-east-cpu"];
    let provisioned = members.iter().any(|m| {
        let (ok, out) = kubectl(
            &k,
            &[
                "--context",
                m,
                "get",
                "pvc",
                "checkpoints",
                "-o",
                "jsonpath={.status.phase}",
            ],
        );
        ok && out.trim() == "Bound"
    });
    assert!(provisioned, "the claim was bound in the gang's member");
    let (ok, out) = kubectl(
        &k,
        &[
            "--context",
            "us-west-gpu",
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
        ],
    );
    assert!(ok, "{out}");
    let workers: Vec<&str> = out.lines().filter(|l| l.starts_with("dra-train")).collect();
    assert_eq!(workers.len(), 4, "{out}");
    assert!(workers.iter().all(|l| l.contains("h100-dra")), "{out}");
    // Each had a claim of its own in the member (released once it finished).
    let (ok, out) = kubectl(
        &k,
        &[
            "--context",
            "us-west-gpu",
            "get",
            "resourceclaims",
            "--no-headers",
        ],
    );
    assert!(ok && out.lines().count() == 4, "{out}");
}

/// The phase of the Volcano Job `ns/job`.
fn phase_in(k: &Path, ns: &str, job: &str) -> String {
    let (_, out) = kubectl(
        k,
        &[
            "get",
            "vcjob",
            "-n",
            ns,
            job,
            "-o",
            "jsonpath={.status.state.phase}",
        ],
    );
    out.trim().to_string()
}

#[test]
fn tephra_dev_runs_every_shipped_volcano_job_example_to_completed_as_shipped() {
    let k = kubeconfig("examples");
    let _dev = start(&[
        "dev",
        "--speed",
        "1000",
        "--kubeconfig",
        k.to_str().unwrap(),
    ]);
    until(30, "the kubeconfig written", || k.exists());
    until(20, "the API answers", || kubectl(&k, &["get", "queues"]).0);
    // Each brings what it needs (its namespace, PriorityClass, queue): nothing else is made.
    for example in [
        "examples/pytorch-distributed.yaml",
        "examples/mpi-job.yaml",
        "examples/spark-job.yaml",
    ] {
        let (ok, out) = kubectl(&k, &["apply", "-f", example]);
        assert!(ok, "{example}: {out}");
    }
    let jobs = [
        ("ml", "llama-finetune"),
        ("hpc", "lm-mpi"),
        ("analytics", "nightly-etl"),
    ];
    until(120, "every example Job Completed", || {
        jobs.iter()
            .all(|(ns, job)| phase_in(&k, ns, job) == "Completed")
    });
}

#[test]
fn a_second_tephra_dev_refuses_a_live_kubeconfig_and_the_first_removes_its_own_when_stopped() {
    let k = kubeconfig("two");
    let mut first = start(&["dev", "--no-scheduler", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "the kubeconfig written", || k.exists());
    let written = std::fs::read_to_string(&k).unwrap();
    let second = Command::new(env!("CARGO_BIN_EXE_tephra"))
        .args(["dev", "--no-scheduler", "--kubeconfig", k.to_str().unwrap()])
        .current_dir(repo())
        .output()
        .expect("tephra runs");
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success(),
        "a second instance took over: {said}"
    );
    assert!(
        said.contains(k.to_str().unwrap()) && said.contains("is running"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&k).unwrap(),
        written,
        "the live kubeconfig was overwritten"
    );
    // Its log went to the file beside the kubeconfig, not to the terminal.
    let log = k.with_file_name("tephra-dev.log");
    assert!(log.exists(), "no log file beside the kubeconfig");
    // SIGTERM (a background job killed): it stops and removes its kubeconfig.
    let pid = first.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    until(10, "the first instance stopped", || {
        first.0.try_wait().ok().flatten().is_some()
    });
    assert!(!k.exists(), "its kubeconfig was left behind");
    // A kubeconfig left by an instance that is gone is simply replaced.
    std::fs::write(&k, written).unwrap();
    let _third = start(&["dev", "--no-scheduler", "--kubeconfig", k.to_str().unwrap()]);
    until(30, "kubectl answered through a fresh kubeconfig", || {
        kubectl(&k, &["get", "queues"]).0
    });
}

/// An HTTP GET of `path` at `host:port` (plain HTTP/1.1, one request): status and body.
fn http_get(host_port: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(host_port).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_string()))
}

/// `tephra dev` prints where its web UI is on a line starting `UI:`, beside the export line;
/// the page is there, and its JSON shows the fleet's members.
#[test]
fn tephra_dev_prints_its_ui_address_and_the_ui_answers() {
    use std::io::{BufRead, BufReader};
    let k = kubeconfig("ui");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tephra"))
        .args(["dev", "--kubeconfig", k.to_str().unwrap()])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tephra starts");
    let stdout = child.stdout.take().expect("stdout");
    let _dev = Killed(child);
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.starts_with("export KUBECONFIG="))
        .collect();
    let url = lines
        .iter()
        .find_map(|l| l.strip_prefix("UI: "))
        .unwrap_or_else(|| panic!("no UI: line in {lines:#?}"));
    assert_eq!(
        lines.last().map(|l| l.starts_with("UI: ")),
        Some(true),
        "{lines:#?}"
    );
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host_port, path) = rest.split_at(rest.find('/').expect("a path"));
    let (status, page) = http_get(host_port, path).expect("the UI answers");
    assert_eq!(status, 200);
    assert!(page.contains("<title>tephra</title>"), "{page}");
    until(20, "the fleet JSON lists the members", || {
        http_get(host_port, "/ui/api/v1/fleet").is_some_and(|(s, body)| {
            s == 200
                && ["us-east-gpu", "us-west-gpu", "us-east-cpu"]
                    .iter()
                    .all(|m| body.contains(m))
        })
    });
}
