//! Deterministic synthetic fleets and workloads, for benchmarks and scale tests. Same seed, same
//! world: no external randomness.

use std::sync::Arc;

use tephra_scheduler::cache::{Cache, Event};
use tephra_scheduler::model::{
    Cluster, GroupPhase, JobPolicy, PodGroupSpec, PodSpec, Requirement, SelectorOp, TaskShape,
    TaskStatus,
};
use tephra_scheduler::resources::PODS;
use tephra_scheduler::testing::{BuildError, GangJob, Role, add_cluster, add_job, add_nodes};
pub use tephra_sim::rng::Rng;

/// Shape of a synthetic fleet.
#[derive(Clone, Copy, Debug)]
pub struct FleetShape {
    /// Number of clusters (named `c0`, `c1`, ...; regions `r0`..`r3` round robin).
    pub clusters: usize,
    /// CPU nodes per cluster: 64 cores, 256Gi.
    pub cpu_nodes: usize,
    /// GPU nodes per cluster: 96 cores, 1Ti, 8 GPUs.
    pub gpu_nodes: usize,
}

/// Builds the fleet.
pub fn build_fleet(cache: &mut Cache, shape: FleetShape) -> Result<(), BuildError> {
    for c in 0..shape.clusters {
        let name = format!("c{c}");
        let mut cluster = Cluster::named(&name);
        cluster.region = Some(format!("r{}", c % 4));
        add_cluster(cache, cluster)?;
        add_nodes(
            cache,
            &name,
            &format!("{name}-cpu"),
            shape.cpu_nodes,
            &[("cpu", "64"), ("memory", "256Gi"), ("pods", "110")],
            &[],
        )?;
        add_nodes(
            cache,
            &name,
            &format!("{name}-gpu"),
            shape.gpu_nodes,
            &[
                ("cpu", "96"),
                ("memory", "1Ti"),
                ("pods", "110"),
                ("nvidia.com/gpu", "8"),
            ],
            &[("nvidia.com/gpu.product", "A100")],
        )?;
    }
    Ok(())
}

/// Gang sizes from 1 to 64, skewed small as real batch workloads are, adjusted so that `jobs`
/// gangs hold exactly `pods` pods (when `jobs <= pods <= 64 * jobs`).
pub fn gang_sizes(rng: &mut Rng, jobs: usize, pods: usize) -> Vec<u32> {
    const SIZES: [(u32, f64); 7] = [
        (1, 0.30),
        (2, 0.20),
        (4, 0.15),
        (8, 0.15),
        (16, 0.10),
        (32, 0.07),
        (64, 0.03),
    ];
    let mut sizes: Vec<u32> = (0..jobs)
        .map(|_| {
            let mut x = rng.unit();
            for (s, p) in SIZES {
                if x < p {
                    return s;
                }
                x -= p;
            }
            1
        })
        .collect();
    let mut total: i64 = sizes.iter().map(|s| i64::from(*s)).sum();
    let target = pods as i64;
    let mut guard = 0;
    while total != target && guard < 10_000_000 && !sizes.is_empty() {
        let i = rng.below(sizes.len() as u64) as usize;
        if total < target && sizes[i] < 64 {
            sizes[i] += 1;
            total += 1;
        } else if total > target && sizes[i] > 1 {
            sizes[i] -= 1;
            total -= 1;
        }
        guard += 1;
    }
    sizes
}

/// Adds `jobs` pending gang jobs holding `pods` pods in total, a `gpu_share` of them GPU jobs
/// (1, 2, 4 or 8 GPUs per pod), the rest CPU jobs (1–16 cores). With `clusters > 1`, one job in
/// ten is pinned to one region. Returns the number of pods added.
pub fn add_workload(
    cache: &mut Cache,
    rng: &mut Rng,
    jobs: usize,
    pods: usize,
    gpu_share: f64,
    clusters: usize,
) -> Result<usize, BuildError> {
    let sizes = gang_sizes(rng, jobs, pods);
    let mut added = 0;
    for (i, size) in sizes.iter().enumerate() {
        let role = if rng.unit() < gpu_share {
            let gpus = [1, 2, 4, 8][rng.below(4) as usize];
            let cpu = (gpus * 8).to_string();
            let mem = format!("{}Gi", gpus * 64);
            Role::new(
                "worker",
                *size,
                &[
                    ("cpu", &cpu),
                    ("memory", &mem),
                    ("nvidia.com/gpu", &gpus.to_string()),
                ],
            )
        } else {
            let cpu = (1 + rng.below(16)).to_string();
            let mem = format!("{}Gi", 4 * (1 + rng.below(16)));
            Role::new("worker", *size, &[("cpu", &cpu), ("memory", &mem)])
        };
        let mut job = GangJob::new(&format!("job-{i}"), vec![role]).created(i as i64);
        if clusters > 1 && rng.below(10) == 0 {
            job = job.policy(JobPolicy {
                field_requirements: vec![Requirement {
                    key: "region".into(),
                    op: SelectorOp::In,
                    values: vec![format!("r{}", rng.below(4))],
                }],
                ..JobPolicy::default()
            });
        }
        added += add_job(cache, &job)?.len();
    }
    Ok(added)
}

/// Fills the fleet with running jobs: `per_node` single-core pods on every node, grouped in
/// gangs of `gang` pods, all Running. Returns the number of pods added.
pub fn add_running(cache: &mut Cache, per_node: usize, gang: usize) -> Result<usize, BuildError> {
    fill_running(
        cache,
        &RunningFill {
            namespace: "running",
            queue: "default",
            priority: 0,
            request: &[("cpu", "1"), ("memory", "2Gi")],
            per_node,
            gang,
            gpu_nodes: None,
        },
    )
}

/// Running work to fill a fleet with.
#[derive(Clone, Copy, Debug)]
pub struct RunningFill<'a> {
    /// Namespace of the jobs; jobs and pods are named run-<n> within it, so use one namespace
    /// per fill.
    pub namespace: &'a str,
    /// Queue of the jobs.
    pub queue: &'a str,
    /// Priority of the jobs.
    pub priority: i32,
    /// Request of each pod.
    pub request: &'a [(&'a str, &'a str)],
    /// Pods per node.
    pub per_node: usize,
    /// Pods per gang (the gang's minMember).
    pub gang: usize,
    /// Only nodes with GPUs (`Some(true)`), only without (`Some(false)`), or all (`None`).
    pub gpu_nodes: Option<bool>,
}

/// Fills the chosen nodes with running gangs. Returns the number of pods added.
pub fn fill_running(cache: &mut Cache, fill: &RunningFill) -> Result<usize, BuildError> {
    let (per_node, gang) = (fill.per_node, fill.gang);
    let mut request = cache.names_mut().parse(fill.request.iter().copied())?;
    request.set(PODS, 1);
    let shape = Arc::new(TaskShape {
        role: "worker".into(),
        request,
        node_selector: Default::default(),
        affinity: Vec::new(),
        tolerations: Vec::new(),
        priority: fill.priority,
        preemptable: true,
        namespace: fill.namespace.into(),
        priority_class: None,
        rules: Default::default(),
    });
    let nodes: Vec<(String, String)> = cache
        .world()
        .nodes
        .iter()
        .filter(|(_, n)| fill.gpu_nodes.is_none_or(|g| n.has_gpu == g))
        .map(|(_, n)| (n.spec.cluster.clone(), n.spec.name.clone()))
        .collect();
    let mut count = 0usize;
    for (cluster, node) in &nodes {
        for _ in 0..per_node {
            let job = count / gang.max(1);
            if count.is_multiple_of(gang.max(1)) {
                cache.apply(Event::PodGroupUpsert(PodGroupSpec {
                    namespace: fill.namespace.into(),
                    name: format!("run-{job}"),
                    queue: fill.queue.into(),
                    min_member: gang as u32,
                    min_task_member: Default::default(),
                    min_resources: None,
                    largest_task: None,
                    priority_class: None,
                    priority: Some(fill.priority),
                    phase: GroupPhase::Running,
                    phase_since: 0,
                    created: 0,
                    policy: Arc::new(JobPolicy::default()),
                    topology: None,
                    sub_groups: Vec::new(),
                }))?;
            }
            cache.apply(Event::PodUpsert(PodSpec {
                gpus: None,
                namespace: fill.namespace.into(),
                name: format!("run-{job}-{count}"),
                group: Some(format!("run-{job}")),
                shape: Arc::clone(&shape),
                index: (count % gang.max(1)) as u32,
                status: TaskStatus::Running,
                placement: Some((cluster.clone(), node.clone())),
                created: 0,
                lives_in: None,
                planned: None,
                ghost_of: None,
                foreign: false,
            }))?;
            count += 1;
        }
    }
    Ok(count)
}
