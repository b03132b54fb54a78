//! Checks of a scenario beyond its format.

use std::collections::BTreeSet;

use super::defs::{Arrival, FaultKind, Scenario, TraceFormat};

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
    }
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
    for (i, f) in scenario.faults.iter().enumerate() {
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
pub(crate) fn named_queues(scenario: &Scenario) -> Vec<(String, &str)> {
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
