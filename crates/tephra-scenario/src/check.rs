//! Checks of a scenario beyond its format, and the limits on its size.

use std::collections::{BTreeMap, BTreeSet};

use tephra_scheduler::quantity::parse_scaled_wide;

use super::defs::{Arrival, Count, CountDist, FaultKind, NodePool, Scenario, TraceFormat};

/// The most nodes a scenario's fleet may have (node pools and `fromTrace` together).
///
/// Kubernetes documents 5,000 nodes as the largest cluster it supports; 100,000 is twenty such
/// clusters, more than any fleet tephra has been asked to model, yet small in memory (benchmark
/// B's world of 10,000 nodes and 100,000 pods takes 64 MB). Without a bound,
/// `count: 99999999999` would allocate until the machine runs out of memory.
pub const MAX_NODES: u64 = 100_000;

/// The most member clusters (`fleet.clusters` or `fleet.fromTrace.clusters`).
pub const MAX_CLUSTERS: u64 = 10_000;

/// The most pods one job may have (its tasks' replicas summed).
///
/// Kubernetes bounds replicas and minAvailable by int32; the simulator materialises every pod
/// of a job when it is submitted, so it bounds a job much lower: a million pods is more than
/// six times Kubernetes' documented limit of 150,000 pods per cluster, and by benchmark B's
/// measure (100,000 pending pods with 10,000 nodes peak at 106 MB) about a gigabyte.
pub const MAX_PODS_PER_JOB: u64 = 1_000_000;

/// The most pods the simulator holds at once (jobs submitted and not finished). A run whose
/// workload would pass it stops with an error naming the job, at the time it would arrive.
pub const MAX_PODS_IN_FLIGHT: u64 = 1_000_000;

/// Whether a job of `job_pods` pods may be submitted while `in_flight` pods are held: within
/// [`MAX_PODS_PER_JOB`] and [`MAX_PODS_IN_FLIGHT`]. Jobs that a scenario lists are checked when
/// it is read; this catches jobs from manifests and traces, and many jobs at once.
pub fn admit_pods(in_flight: u64, job_pods: u64) -> Result<(), String> {
    if job_pods > MAX_PODS_PER_JOB {
        return Err(format!(
            "{job_pods} pods; a job has at most {MAX_PODS_PER_JOB}"
        ));
    }
    if in_flight.saturating_add(job_pods) > MAX_PODS_IN_FLIGHT {
        return Err(format!(
            "its {job_pods} pods would bring the pods in flight to {}; a run holds at most \
             {MAX_PODS_IN_FLIGHT} at once",
            in_flight.saturating_add(job_pods)
        ));
    }
    Ok(())
}

/// What Kubernetes allows for replicas and minAvailable (int32).
const INT32_MAX: u64 = i32::MAX as u64;

/// Checks the size of the fleet: node and cluster counts within their limits, and every
/// resource's total (nodes × capacity) within what the scheduler counts exactly (`i64`, in
/// millicores for cpu and whole units otherwise). The message names the field.
fn check_fleet_size(scenario: &Scenario) -> Result<(), String> {
    let fleet = &scenario.fleet;
    if fleet.clusters.len() as u64 > MAX_CLUSTERS {
        return Err(format!(
            "fleet.clusters: {} clusters; a scenario has at most {MAX_CLUSTERS}",
            fleet.clusters.len()
        ));
    }
    if let Some(t) = &fleet.from_trace
        && !(1..=MAX_CLUSTERS).contains(&(t.clusters as u64))
    {
        return Err(format!(
            "fleet.fromTrace.clusters: {} is not between 1 and {MAX_CLUSTERS}",
            t.clusters
        ));
    }
    let mut nodes: u64 = 0;
    let mut totals: BTreeMap<&str, i128> = BTreeMap::new();
    for (i, c) in fleet.clusters.iter().enumerate() {
        for (p, pool) in c.node_pools.iter().enumerate() {
            let at = format!("fleet.clusters[{i}].nodePools[{p}]");
            nodes = nodes.saturating_add(pool.count as u64);
            if nodes > MAX_NODES {
                return Err(format!(
                    "{at}.count: {} nodes bring the fleet to {nodes}; a scenario has at most {MAX_NODES} nodes",
                    pool.count
                ));
            }
            add_pool_capacity(&mut totals, pool, &at)?;
        }
    }
    Ok(())
}

/// Adds a pool's nodes × capacity to the fleet's totals, refusing a total `i64` cannot hold.
fn add_pool_capacity<'a>(
    totals: &mut BTreeMap<&'a str, i128>,
    pool: &'a NodePool,
    at: &str,
) -> Result<(), String> {
    for (name, qty) in &pool.capacity {
        let scale = if name == "cpu" { 1000 } else { 1 };
        let field = format!("{at}.capacity.{name}");
        let one = parse_scaled_wide(&qty.0, scale).map_err(|e| format!("{field}: {e}"))?;
        let total = totals.entry(name.as_str()).or_default();
        // Counts are at most MAX_NODES and a quantity at most ~1e38, so this cannot overflow
        // i128 unless the quantity is near its top; checked all the same.
        *total = one
            .checked_mul(pool.count as i128)
            .and_then(|v| v.checked_add(*total))
            .unwrap_or(i128::MAX);
        if *total > i128::from(i64::MAX) {
            return Err(format!(
                "{field}: {} nodes of {} make the fleet's {name} more than tephra counts \
                 exactly ({} {})",
                pool.count,
                qty.0,
                i64::MAX,
                if name == "cpu" { "millicores" } else { "units" }
            ));
        }
    }
    Ok(())
}

/// The largest value a replica count can take.
fn count_max(c: &Count) -> u64 {
    u64::from(match c {
        Count::Fixed(n) => *n,
        Count::Dist(CountDist::Uniform([a, b])) => (*a).max(*b),
        Count::Dist(CountDist::Choice(v)) => v.iter().copied().max().unwrap_or(1),
    })
}

/// Checks a job's replica counts: each an int32, as Kubernetes has them, and their sum within
/// [`MAX_PODS_PER_JOB`]. `tasks` gives each task's field and its largest replica count.
fn check_job_size(at: &str, tasks: impl IntoIterator<Item = (String, u64)>) -> Result<(), String> {
    let mut total: u64 = 0;
    for (field, replicas) in tasks {
        if replicas > INT32_MAX {
            return Err(format!(
                "{field}: {replicas} is more than int32 holds, as Kubernetes counts replicas"
            ));
        }
        if replicas > MAX_PODS_PER_JOB {
            return Err(format!(
                "{field}: {replicas} pods; a job has at most {MAX_PODS_PER_JOB}"
            ));
        }
        total += replicas;
    }
    if total > MAX_PODS_PER_JOB {
        return Err(format!(
            "{at}: the tasks' replicas sum to {total} pods; a job has at most {MAX_PODS_PER_JOB}"
        ));
    }
    Ok(())
}

/// Checks that an optional count is an int32.
fn check_int32(field: &str, v: Option<u32>) -> Result<(), String> {
    match v {
        Some(v) if u64::from(v) > INT32_MAX => Err(format!(
            "{field}: {v} is more than int32 holds, as Kubernetes counts it"
        )),
        _ => Ok(()),
    }
}

/// Checks what the format alone cannot: names that must be unique or known, counts and
/// rates that must be positive. The message names the field.
pub(super) fn check(scenario: &Scenario) -> Result<(), String> {
    if scenario.fleet.clusters.is_empty() && scenario.fleet.from_trace.is_none() {
        return Err("fleet: give clusters or fromTrace".into());
    }
    let mut names = BTreeSet::new();
    for (i, c) in scenario.fleet.clusters.iter().enumerate() {
        if !names.insert(c.name.as_str()) {
            return Err(format!(
                "fleet.clusters[{i}].name: duplicate cluster {:?}",
                c.name
            ));
        }
        if c.node_pools.is_empty() {
            return Err(format!(
                "fleet.clusters[{i}] ({}).nodePools: at least one pool is needed",
                c.name
            ));
        }
        check_cluster_objects(i, c)?;
    }
    check_fleet_size(scenario)?;
    if scenario.scheduler.period.0 <= 0 {
        return Err("scheduler.period: must be positive".into());
    }
    let queues: BTreeSet<&str> = scenario
        .queues
        .iter()
        .map(|q| q.name.as_str())
        .chain(["default", "root"])
        .collect();
    for (i, q) in scenario.queues.iter().enumerate() {
        if let Some(w) = q.weight
            && !(1..=65535).contains(&w)
        {
            return Err(format!(
                "queues[{i}] ({}).weight: must be between 1 and 65535",
                q.name
            ));
        }
        if let Some(s) = &q.dequeue_strategy
            && s != "fifo"
            && s != "traverse"
        {
            return Err(format!(
                "queues[{i}] ({}).dequeueStrategy: must be fifo or traverse, got {s:?}",
                q.name
            ));
        }
        if let Some(s) = &q.state
            && !["Open", "Closed", "Closing"].contains(&s.as_str())
        {
            return Err(format!(
                "queues[{i}] ({}).state: must be Open, Closed or Closing, got {s:?}",
                q.name
            ));
        }
    }
    // Queue documents among the manifests declare queues too; with manifests, the queues are
    // checked once those are read (`workload::Merged::open`).
    let deferred = !scenario.workload.manifests.is_empty();
    let check_queue = |field: String, q: &str| -> Result<(), String> {
        if deferred || queues.contains(q) {
            Ok(())
        } else {
            Err(format!(
                "{field}: unknown queue {q:?} (declare it under queues, or ship a Queue document in workload.manifests)"
            ))
        }
    };
    let classes = &scenario.scheduler.priority_classes;
    for (i, j) in scenario.workload.jobs.iter().enumerate() {
        if let Some(q) = &j.queue {
            check_queue(format!("workload.jobs[{i}] ({}).queue", j.name), q)?;
        }
        if let Some(pc) = &j.priority_class
            && !classes.contains_key(pc)
        {
            return Err(format!(
                "workload.jobs[{i}] ({}).priorityClass: unknown class {pc:?} (declare it under scheduler.priorityClasses)",
                j.name
            ));
        }
        if j.tasks.is_empty() {
            return Err(format!(
                "workload.jobs[{i}] ({}).tasks: at least one task is needed",
                j.name
            ));
        }
        let at = format!("workload.jobs[{i}] ({})", j.name);
        check_job_size(
            &format!("{at}.tasks"),
            j.tasks.iter().enumerate().map(|(t, task)| {
                (
                    format!("{at}.tasks[{t}].replicas"),
                    u64::from(task.replicas),
                )
            }),
        )?;
        check_int32(&format!("{at}.minAvailable"), j.min_available)?;
        for (t, task) in j.tasks.iter().enumerate() {
            check_int32(&format!("{at}.tasks[{t}].minAvailable"), task.min_available)?;
        }
        // Within MAX_PODS_PER_JOB, checked above.
        let total: u32 = j.tasks.iter().map(|t| t.replicas).sum();
        if let Some(m) = j.min_available
            && m > total
        {
            return Err(format!(
                "workload.jobs[{i}] ({}).minAvailable: {m} exceeds the {total} replicas of its tasks",
                j.name
            ));
        }
    }
    for (i, g) in scenario.workload.generate.iter().enumerate() {
        for q in g.queue.keys() {
            check_queue(format!("workload.generate[{i}].queue"), q)?;
        }
        if let Arrival::Poisson { per_hour } = g.arrival
            && !(per_hour > 0.0 && per_hour.is_finite())
        {
            return Err(format!(
                "workload.generate[{i}].arrival.poisson.perHour: must be positive"
            ));
        }
        if g.template.tasks.is_empty() {
            return Err(format!(
                "workload.generate[{i}].template.tasks: at least one task is needed"
            ));
        }
        let at = format!("workload.generate[{i}].template");
        check_job_size(
            &format!("{at}.tasks"),
            g.template.tasks.iter().enumerate().map(|(t, task)| {
                (
                    format!("{at}.tasks[{t}].replicas"),
                    count_max(&task.replicas),
                )
            }),
        )?;
        check_int32(&format!("{at}.minAvailable"), g.template.min_available)?;
    }
    for (i, t) in scenario.workload.traces.iter().enumerate() {
        for q in t.queues.keys() {
            check_queue(format!("workload.traces[{i}].queues"), q)?;
        }
        if t.format == TraceFormat::AlibabaGpu2023 && t.per_gpu.is_some() {
            return Err(format!(
                "workload.traces[{i}].perGpu: only for philly and crux traces"
            ));
        }
    }
    let cluster_known = |c: &str| scenario.fleet.from_trace.is_some() || names.contains(c);
    for (i, f) in scenario.faults.list.iter().enumerate() {
        if !cluster_known(&f.cluster) {
            return Err(format!(
                "faults[{i}].cluster: unknown cluster {:?}",
                f.cluster
            ));
        }
        if f.kind == FaultKind::NodeDown && f.node.is_none() && f.count.is_none() {
            return Err(format!("faults[{i}]: node-down needs node or count"));
        }
    }
    Ok(())
}

/// The queues that explicit, generated and trace jobs name, with the field that names each.
pub fn named_queues(scenario: &Scenario) -> Vec<(String, &str)> {
    let w = &scenario.workload;
    let mut out = Vec::new();
    for (i, j) in w.jobs.iter().enumerate() {
        if let Some(q) = &j.queue {
            out.push((format!("workload.jobs[{i}] ({}).queue", j.name), q.as_str()));
        }
    }
    for (i, g) in w.generate.iter().enumerate() {
        out.extend(
            g.queue
                .keys()
                .map(|q| (format!("workload.generate[{i}].queue"), q.as_str())),
        );
    }
    for (i, t) in w.traces.iter().enumerate() {
        out.extend(
            t.queues
                .keys()
                .map(|q| (format!("workload.traces[{i}].queues"), q.as_str())),
        );
    }
    out
}

/// A cluster's StorageClasses, DeviceClasses and its pools' volumes and devices.
fn check_cluster_objects(i: usize, c: &super::defs::ClusterDef) -> Result<(), String> {
    let at = format!("fleet.clusters[{i}] ({})", c.name);
    let mut classes = BTreeSet::new();
    for (k, sc) in c.storage_classes.iter().enumerate() {
        if !classes.insert(sc.name.as_str()) {
            return Err(format!(
                "{at}.storageClasses[{k}].name: duplicate class {:?}",
                sc.name
            ));
        }
        if let Some(m) = &sc.volume_binding_mode
            && m != "Immediate"
            && m != "WaitForFirstConsumer"
        {
            return Err(format!(
                "{at}.storageClasses[{k}].volumeBindingMode: must be Immediate or WaitForFirstConsumer, got {m:?}"
            ));
        }
    }
    if c.storage_classes.iter().filter(|s| s.default).count() > 1 {
        return Err(format!("{at}.storageClasses: more than one is the default"));
    }
    let tiers = c
        .topology
        .as_ref()
        .map(|t| t.tiers.as_slice())
        .unwrap_or_default();
    let mut names = BTreeSet::new();
    for (k, t) in tiers.iter().enumerate() {
        if t.size == 0 {
            return Err(format!("{at}.topology.tiers[{k}].size: must be at least 1"));
        }
        if t.name.is_empty() || !names.insert(t.name.as_str()) {
            return Err(format!(
                "{at}.topology.tiers[{k}].name: must be set and unique, got {:?}",
                t.name
            ));
        }
    }
    for (k, dc) in c.device_classes.iter().enumerate() {
        for (s, e) in dc.selectors.iter().enumerate() {
            tephra_controllers::dra::CelSelector::compile(e).map_err(|why| {
                format!("{at}.deviceClasses[{k}].selectors[{s}]: CEL compile error: {why}")
            })?;
        }
    }
    for (p, pool) in c.node_pools.iter().enumerate() {
        for (v, vol) in pool.volumes.iter().enumerate() {
            if !classes.contains(vol.storage_class.as_str()) {
                return Err(format!(
                    "{at}.nodePools[{p}] ({}).volumes[{v}].storageClass: unknown class {:?} (declare it under storageClasses)",
                    pool.name, vol.storage_class
                ));
            }
            if let Err(m) = tephra_scheduler::model::AccessModes::parse(
                vol.access_modes.iter().map(String::as_str),
            ) {
                return Err(format!(
                    "{at}.nodePools[{p}] ({}).volumes[{v}].accessModes: unknown mode {m:?}",
                    pool.name
                ));
            }
        }
        if let Some(v) = &pool.vgpus {
            for (field, zero) in [
                ("count", v.count == 0),
                ("memory", v.memory == 0),
                ("split", v.split == 0),
            ] {
                if zero {
                    return Err(format!(
                        "{at}.nodePools[{p}] ({}).vgpus.{field}: must be at least 1",
                        pool.name
                    ));
                }
            }
            if !v.model.contains(tephra_scheduler::model::vgpu::VENDOR)
                || v.model.contains([',', ':'])
            {
                return Err(format!(
                    "{at}.nodePools[{p}] ({}).vgpus.model: {:?} must name NVIDIA and hold no ',' or ':' (the device plugin writes NVIDIA-<model>)",
                    pool.name, v.model
                ));
            }
        }
        if let Some(d) = &pool.devices {
            if d.count == 0 {
                return Err(format!(
                    "{at}.nodePools[{p}] ({}).devices.count: must be at least 1",
                    pool.name
                ));
            }
            for (n, v) in &d.attributes {
                if !(v.is_string() || v.is_i64() || v.is_boolean()) {
                    return Err(format!(
                        "{at}.nodePools[{p}] ({}).devices.attributes.{n}: a string, an integer or a boolean, got {v}",
                        pool.name
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::Scenario;

    fn refusal(text: &str) -> String {
        Scenario::parse(text, "s.yaml", Path::new("."))
            .expect_err("refused")
            .to_string()
    }

    fn with_pool(pool: &str) -> String {
        format!("fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {pool}\n")
    }

    fn with_job(task: &str) -> String {
        format!(
            "{}workload:\n  jobs:\n    - {{name: j, tasks: [{task}]}}\n",
            with_pool("{name: p, count: 1, capacity: {cpu: \"4\"}}")
        )
    }

    #[test]
    fn a_fleet_total_past_what_i64_counts_is_refused_naming_the_pool() {
        let e = refusal(&with_pool(
            "{name: p, count: 1100, capacity: {cpu: \"4\", memory: 8Pi}}",
        ));
        assert!(
            e.contains("fleet.clusters[0].nodePools[0].capacity.memory"),
            "{e}"
        );
        // 1000 of them fit exactly (8Pi × 1000 < 2^63 bytes).
        Scenario::parse(
            &with_pool("{name: p, count: 1000, capacity: {memory: 8Pi}}"),
            "s.yaml",
            Path::new("."),
        )
        .expect("fits");
    }

    #[test]
    fn more_nodes_than_the_limit_are_refused_before_any_is_built() {
        let e = refusal(&with_pool(
            "{name: p, count: 99999999999, capacity: {cpu: \"4\"}}",
        ));
        assert!(e.contains("fleet.clusters[0].nodePools[0].count"), "{e}");
        assert!(e.contains("100000"), "{e}");
        let two = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {name: p, count: 60000, capacity: {cpu: \"4\"}}\n    - name: b\n      nodePools:\n        - {name: p, count: 60000, capacity: {cpu: \"4\"}}\n";
        let e = refusal(two);
        assert!(e.contains("fleet.clusters[1].nodePools[0].count"), "{e}");
    }

    #[test]
    fn replicas_past_the_per_job_limit_or_int32_are_refused() {
        let e = refusal(&with_job(
            "{name: w, replicas: 2000000000, resources: {cpu: \"1\"}, duration: 1h}",
        ));
        assert!(e.contains("workload.jobs[0] (j).tasks[0].replicas"), "{e}");
        assert!(e.contains("1000000"), "{e}");
        let e = refusal(&with_job(
            "{name: w, replicas: 3000000000, resources: {cpu: \"1\"}, duration: 1h}",
        ));
        assert!(e.contains("int32"), "{e}");
        let e = refusal(&with_job(
            "{name: w, replicas: 600000, resources: {cpu: \"1\"}, duration: 1h}, {name: v, replicas: 600000, resources: {cpu: \"1\"}, duration: 1h}",
        ));
        assert!(e.contains("workload.jobs[0] (j).tasks"), "{e}");
    }

    #[test]
    fn generated_replicas_past_the_limit_are_refused() {
        let text = format!(
            "{}workload:\n  generate:\n    - count: 1\n      arrival: {{every: 1m}}\n      template:\n        tasks: [{{name: w, replicas: {{uniform: [1, 2000000000]}}, resources: {{cpu: \"1\"}}, duration: 1h}}]\n",
            with_pool("{name: p, count: 1, capacity: {cpu: \"4\"}}")
        );
        let e = refusal(&text);
        assert!(
            e.contains("workload.generate[0].template.tasks[0].replicas"),
            "{e}"
        );
    }

    #[test]
    fn jobs_past_the_pod_limits_are_not_admitted() {
        assert_eq!(super::admit_pods(0, 1_000_000), Ok(()));
        assert_eq!(super::admit_pods(999_999, 1), Ok(()));
        let e = super::admit_pods(0, 2_000_000_000).unwrap_err();
        assert!(e.contains("a job has at most 1000000"), "{e}");
        let e = super::admit_pods(600_000, 600_000).unwrap_err();
        assert!(e.contains("in flight to 1200000"), "{e}");
        assert!(super::admit_pods(u64::MAX, u64::MAX).is_err());
    }

    #[test]
    fn trace_fleets_cannot_ask_for_more_clusters_than_the_limit() {
        let e = refusal(
            "fleet:\n  fromTrace: {format: alibaba-gpu-2023, path: nodes.csv, clusters: 99999999999}\n",
        );
        assert!(e.contains("fleet.fromTrace.clusters"), "{e}");
    }
}
