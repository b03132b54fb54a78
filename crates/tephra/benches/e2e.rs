//! End to end through the devcluster: nodes and gangs of 8 pods created at once, then
//! `tephra scheduler` (the release binary, as its own process) binds them; the time from the
//! last create until every pod is bound, both processes' CPU, the scheduler's peak RSS, and
//! the time from a scheduler restart to its first bind.
//!
//! `cargo bench -p tephra --bench e2e` runs 5,000 nodes and 50,000 pods in one member;
//! `TEPHRA_E2E_MEMBERS=10` spreads the nodes over ten members behind a control plane (pods
//! are then declared on the control plane and created in a member by the scheduler);
//! `TEPHRA_E2E_NODES` and `TEPHRA_E2E_PODS` change the size. With `TEPHRA_E2E_BACKLOG=1` the
//! scheduler starts only once every pod exists (a backlog), so that the time measured is the
//! scheduler's and the API server's, not the load generator's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tephra_devcluster::fleet::MemberSpec;
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Handle, Options};
use tokio::sync::Mutex;

/// The devcluster runs in this process, as it runs in `tephra dev`: with the same allocator
/// as the `tephra` binary, so that the API server measured is the one users get.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn node(name: String) -> NodeSpec {
    NodeSpec {
        name,
        capacity: BTreeMap::from([
            ("cpu".to_string(), "32".to_string()),
            ("memory".to_string(), "128Gi".to_string()),
            ("pods".to_string(), "110".to_string()),
            ("nvidia.com/gpu".to_string(), "8".to_string()),
        ]),
        ..NodeSpec::default()
    }
}

/// CPU seconds (user + system) of a process, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// Peak resident memory of a process in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

struct Killed(Child);

impl Drop for Killed {
    /// SIGINT first, so that a scheduler stops as on Ctrl-C and `perf record` (with
    /// `TEPHRA_E2E_PERF`) writes its data and stops its child; SIGKILL after 10 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scheduler(kubeconfig: &std::path::Path, context: &str, fleet: bool, run: &str) -> Killed {
    let mut args = vec![
        "scheduler".to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--context".into(),
        context.into(),
        "--listen-address".into(),
        "127.0.0.1:0".into(),
    ];
    if fleet {
        args.extend(["--members".into(), "clusters".into()]);
    }
    // `TEPHRA_E2E_ARGS` adds scheduler flags (split on whitespace), to measure a setting.
    if let Ok(extra) = std::env::var("TEPHRA_E2E_ARGS") {
        args.extend(extra.split_whitespace().map(String::from));
    }
    // `TEPHRA_E2E_PERF=FILE` profiles the scheduler with `perf record` into FILE.main and
    // FILE.restart (its CPU figure is then perf's own process); `TEPHRA_E2E_PERF_CALLGRAPH=dwarf` unwinds with DWARF, since release
    // builds keep no frame pointers.
    let mut command = match std::env::var("TEPHRA_E2E_PERF") {
        Ok(out) => {
            let out = format!("{out}.{run}");
            let callgraph =
                std::env::var("TEPHRA_E2E_PERF_CALLGRAPH").unwrap_or_else(|_| "fp".into());
            let mut c = Command::new("perf");
            c.args([
                "record",
                "-F",
                "499",
                "--call-graph",
                &callgraph,
                "-o",
                &out,
                "--",
                env!("CARGO_BIN_EXE_tephra"),
            ]);
            c
        }
        Err(_) => Command::new(env!("CARGO_BIN_EXE_tephra")),
    };
    Killed(
        command
            .args(&args)
            .env(
                "RUST_LOG",
                std::env::var("TEPHRA_E2E_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("tephra scheduler starts"),
    )
}

/// Counts the pods that have a node, in every member, by watching.
fn count_bound(
    handle: &Handle,
    rt: &tokio::runtime::Runtime,
    members: &[String],
) -> Arc<AtomicUsize> {
    let bound = Arc::new(AtomicUsize::new(0));
    for m in members {
        let client = rt.block_on(handle.client(m)).unwrap();
        let seen = Arc::new(Mutex::new(HashSet::<String>::new()));
        let bound = Arc::clone(&bound);
        rt.spawn(async move {
            let pods: Api<Pod> = Api::all(client);
            let mut s = watcher::watcher(pods, watcher::Config::default()).boxed();
            while let Ok(Some(ev)) = s.try_next().await {
                let p = match ev {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => p,
                    _ => continue,
                };
                if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
                    let key = format!("{:?}/{:?}", p.metadata.namespace, p.metadata.name);
                    if seen.lock().await.insert(key) {
                        bound.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        });
    }
    bound
}

async fn create_gangs(client: kube::Client, ns: &str, prefix: &str, gangs: usize) {
    let per = 8;
    futures::stream::iter(0..gangs)
        .for_each_concurrent(16, |g| {
            let client = client.clone();
            async move {
                let name = format!("{prefix}{g}");
                let pgs: Api<tephra_api::PodGroup> = Api::namespaced(client.clone(), ns);
                let pg: tephra_api::PodGroup = serde_json::from_value(json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"minMember": per, "queue": "default"}
                }))
                .unwrap();
                pgs.create(&PostParams::default(), &pg).await.unwrap();
                let pods: Api<Pod> = Api::namespaced(client, ns);
                futures::stream::iter(0..per)
                    .for_each_concurrent(per, |i| {
                        let pods = pods.clone();
                        let name = name.clone();
                        async move {
                            let pod: Pod = serde_json::from_value(json!({
                                "metadata": {"name": format!("{name}-w-{i}"), "namespace": ns,
                                    "annotations": {"scheduling.k8s.io/group-name": name,
                                                    "volcano.sh/task-spec": "worker"}},
                                "spec": {"schedulerName": "volcano", "containers": [{"name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
                            }))
                            .unwrap();
                            pods.create(&PostParams::default(), &pod).await.unwrap();
                        }
                    })
                    .await;
            }
        })
        .await;
}

fn main() {
    let nodes = env("TEPHRA_E2E_NODES", 5000);
    let pods = env("TEPHRA_E2E_PODS", 50_000);
    let members = env("TEPHRA_E2E_MEMBERS", 1).max(1);
    let gangs = pods / 8;
    let fleet = members > 1;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let names: Vec<String> = if fleet {
        (0..members).map(|i| format!("m{i}")).collect()
    } else {
        vec!["local".into()]
    };
    let per = nodes / members;
    let kubelet = KubeletOptions {
        heartbeat: Duration::from_secs(60),
        start_delay: Duration::from_secs(1),
        ..KubeletOptions::default()
    };
    let options = Options {
        members: names
            .iter()
            .map(|m| MemberSpec {
                name: m.clone(),
                nodes: (0..per).map(|i| node(format!("{m}-n{i}"))).collect(),
                ..MemberSpec::default()
            })
            .collect(),
        control_plane: fleet,
        queues: vec![
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "default"}, "spec": {"weight": 1}}),
        ],
        kubelet: Some(kubelet),
        ..Options::default()
    };
    let started = Instant::now();
    let handle = rt.block_on(DevCluster::start(options)).unwrap();
    eprintln!(
        "devcluster: {} member(s), {} nodes, up in {:.1?}",
        members,
        per * members,
        started.elapsed()
    );
    let dir = std::env::temp_dir().join(format!("tephra-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, handle.kubeconfig_yaml()).unwrap();
    let control = if fleet { "control-plane" } else { "local" };
    let client = rt.block_on(handle.client(control)).unwrap();
    let bound = count_bound(&handle, &rt, &names);
    let backlog = env("TEPHRA_E2E_BACKLOG", 0) == 1;
    let mut sched = (!backlog).then(|| scheduler(&kubeconfig, control, fleet, "main"));
    if !backlog {
        std::thread::sleep(Duration::from_secs(2));
    }
    let mut t0 = Instant::now();
    let self_cpu = cpu_seconds(std::process::id());
    let live_cpu = sched.as_ref().map(|s| cpu_seconds(s.0.id()));
    rt.block_on(create_gangs(client.clone(), "default", "g", gangs));
    let created = Instant::now();
    if backlog {
        t0 = Instant::now();
        sched = Some(scheduler(&kubeconfig, control, fleet, "main"));
    }
    let sched = sched.unwrap();
    let sched_pid = sched.0.id();
    // Live: both processes' CPU from the first create; backlog: from the scheduler's start.
    let cpu0 = match live_cpu {
        Some(c) => (self_cpu, c),
        None => (cpu_seconds(std::process::id()), cpu_seconds(sched_pid)),
    };
    let total = gangs * 8;
    eprintln!(
        "created {total} pods in {gangs} PodGroups ({})",
        if backlog {
            "before the scheduler started"
        } else {
            "while it ran"
        }
    );
    let mut last_report = Instant::now();
    while bound.load(Ordering::SeqCst) < total {
        std::thread::sleep(Duration::from_millis(50));
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!("  {} / {total} bound", bound.load(Ordering::SeqCst));
            last_report = Instant::now();
        }
        assert!(
            created.elapsed() < Duration::from_secs(900),
            "not every pod bound in 15 min"
        );
    }
    let after = created.elapsed();
    let all = t0.elapsed();
    let cpu1 = (cpu_seconds(std::process::id()), cpu_seconds(sched_pid));
    let rss = peak_rss_mib(sched_pid);
    println!(
        "e2e ({}): {} member(s), {} nodes, {total} pods in gangs of 8: every pod bound {:.2} s after the last create \
         ({:.0} pods/s from the {}, {:.2} s in all); CPU: scheduler {:.1} s, API servers + kubelets + load generator {:.1} s; \
         scheduler peak RSS {:.0} MiB",
        if backlog { "backlog" } else { "live" },
        members,
        per * members,
        after.as_secs_f64(),
        total as f64 / all.as_secs_f64(),
        if backlog {
            "scheduler's start"
        } else {
            "first create"
        },
        all.as_secs_f64(),
        cpu1.1 - cpu0.1,
        cpu1.0 - cpu0.0,
        rss
    );
    // Restart: a fresh scheduler lists everything again; time until it binds a new gang.
    drop(sched);
    rt.block_on(create_gangs(client, "default", "after-restart-", 1));
    let restart = Instant::now();
    let _sched = scheduler(&kubeconfig, control, fleet, "restart");
    while bound.load(Ordering::SeqCst) < total + 8 {
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            restart.elapsed() < Duration::from_secs(300),
            "no bind after the restart"
        );
    }
    println!(
        "restart: first gang bound {:.2} s after the scheduler process started",
        restart.elapsed().as_secs_f64()
    );
    handle.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
