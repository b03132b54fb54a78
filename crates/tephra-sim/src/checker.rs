//! An independent checker. It does not use the scheduler's model: it keeps its own account of
//! every node's capacity and usage from the scenario and the simulated events, and validates
//! every bind against it: node capacity (and each shared GPU's pods, memory and cores), gang
//! atomicity, one cluster per gang unless splittable, and the job's cluster eligibility
//! (policy, taints, health).

use std::collections::{BTreeMap, BTreeSet};

use crate::Map;

use tephra_scheduler::model::{JobPolicy, Taint, TaintEffect};
use tephra_scheduler::quantity::parse_scaled;

/// A node: (cluster, node).
pub type NodeKey = (String, String);

/// One shared GPU a pod holds: (uuid, MiB, cores).
pub type GpuSlice = (String, u64, u32);

/// One bind as the checker sees it.
#[derive(Clone, Debug)]
pub struct CheckBind {
    /// Job.
    pub job: String,
    /// Pod.
    pub pod: String,
    /// Cluster.
    pub cluster: String,
    /// Node.
    pub node: String,
    /// The pod's requests, as (resource, quantity).
    pub request: crate::workload::Request,
    /// The shared GPUs it was bound with: (uuid, MiB, cores).
    pub gpus: Vec<GpuSlice>,
}

/// Violations counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Invariants {
    /// Binds that made a node hold more than its capacity.
    pub node_overcommits: u64,
    /// Sessions in which a job got binds that left it below its gang size.
    pub partial_gangs: u64,
    /// Non-splittable gangs running in more than one cluster.
    pub gangs_split_across_clusters: u64,
    /// Binds onto a cluster the job may not use (policy, taints, health).
    pub policy_violations: u64,
    /// Binds that made a shared GPU hold more pods than its split count, more memory than it
    /// has or more than all of its cores, or named a GPU its node does not have.
    pub gpu_overcommits: u64,
}

/// A cluster as the checker knows it.
#[derive(Clone, Debug, Default)]
pub struct CheckCluster {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Provider.
    pub provider: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Zone.
    pub zone: Option<String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Healthy.
    pub ready: bool,
}

struct CheckJob {
    min: u32,
    /// Pods that finished successfully: they count towards the gang, as in the scheduler.
    done: usize,
    policy: JobPolicy,
    /// Placed pods: pod → cluster.
    placed: Map<String, String>,
}

/// The checker.
#[derive(Default)]
pub struct Checker {
    capacity: Map<(String, String), BTreeMap<String, i64>>,
    used: Map<(String, String), BTreeMap<String, i64>>,
    node_ready: Map<(String, String), bool>,
    clusters: BTreeMap<String, CheckCluster>,
    jobs: Map<String, CheckJob>,
    pod_req: Map<String, (NodeKey, BTreeMap<String, i64>)>,
    /// Each node's shared GPUs: uuid → (split, MiB).
    gpus: Map<NodeKey, BTreeMap<String, (u32, u64)>>,
    /// What is in use of each shared GPU: (node, uuid) → (pods, MiB, cores).
    gpus_used: Map<(NodeKey, String), (u32, u64, u32)>,
    /// The shared GPUs each bound pod holds.
    pod_gpus: Map<String, (NodeKey, Vec<GpuSlice>)>,
    /// Counts.
    pub invariants: Invariants,
    /// The first few violations, described.
    pub details: Vec<String>,
}

fn amounts(list: &[(String, String)]) -> BTreeMap<String, i64> {
    list.iter()
        .map(|(k, v)| {
            let scale = if k == "cpu" { 1000 } else { 1 };
            (k.clone(), parse_scaled(v, scale).unwrap_or(0))
        })
        .collect()
}

impl Checker {
    /// Registers a cluster.
    pub fn cluster(&mut self, name: &str, c: CheckCluster) {
        self.clusters.insert(name.to_string(), c);
    }

    /// Marks a cluster healthy or not.
    pub fn cluster_ready(&mut self, name: &str, ready: bool) {
        if let Some(c) = self.clusters.get_mut(name) {
            c.ready = ready;
        }
    }

    /// Sets a cluster's taints.
    pub fn cluster_taints(&mut self, name: &str, taints: Vec<Taint>) {
        if let Some(c) = self.clusters.get_mut(name) {
            c.taints = taints;
        }
    }

    /// A job may no longer use `cluster` (failover took it away), or may again.
    pub fn exclude(&mut self, job: &str, cluster: &str, excluded: bool) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        j.policy.exclude.retain(|c| c != cluster);
        if excluded {
            j.policy.exclude.push(cluster.to_string());
        }
    }

    /// A pod of `job` is set aside under a new name (`ghost`): it still holds its node, but
    /// is no longer the job's. A `finished` one no longer counts as done: it runs again.
    pub fn ghost(&mut self, job: &str, pod: &str, ghost: &str, finished: bool) {
        if let Some(r) = self.pod_req.remove(pod) {
            self.pod_req.insert(ghost.to_string(), r);
        }
        // Its GPUs too: the ghost holds them until it is gone there.
        if let Some(g) = self.pod_gpus.remove(pod) {
            self.pod_gpus.insert(ghost.to_string(), g);
        }
        if let Some(j) = self.jobs.get_mut(job) {
            j.placed.remove(pod);
            if finished {
                j.done = j.done.saturating_sub(1);
            }
        }
    }

    /// Registers a node with its capacity.
    pub fn node(&mut self, cluster: &str, node: &str, capacity: &[(String, String)]) {
        let key = (cluster.to_string(), node.to_string());
        self.capacity.insert(key.clone(), amounts(capacity));
        self.node_ready.insert(key, true);
    }

    /// Marks a node ready or not.
    pub fn node_ready(&mut self, cluster: &str, node: &str, ready: bool) {
        self.node_ready
            .insert((cluster.to_string(), node.to_string()), ready);
    }

    /// Registers a submitted job.
    pub fn job(&mut self, key: &str, min: u32, policy: JobPolicy) {
        self.jobs.insert(
            key.to_string(),
            CheckJob {
                min,
                done: 0,
                policy,
                placed: Map::default(),
            },
        );
    }

    /// Forgets a finished job.
    pub fn job_done(&mut self, key: &str) {
        self.jobs.remove(key);
    }

    fn violation(&mut self, what: String) {
        if self.details.len() < 20 {
            self.details.push(what);
        }
    }

    fn allowed(policy: &JobPolicy, name: &str, c: &CheckCluster) -> Result<(), String> {
        if !c.ready {
            return Err("cluster not ready".into());
        }
        if !policy.cluster_names.is_empty() && !policy.cluster_names.iter().any(|n| n == name) {
            return Err("not in clusterNames".into());
        }
        if policy.exclude.iter().any(|n| n == name) {
            return Err("excluded".into());
        }
        for r in &policy.field_requirements {
            let v = match r.key.as_str() {
                "region" => c.region.clone(),
                "zone" => c.zone.clone(),
                "provider" => c.provider.clone(),
                _ => None,
            };
            if !v.is_some_and(|v| r.values.contains(&v)) {
                return Err(format!("{} not in {:?}", r.key, r.values));
            }
        }
        for r in &policy.cluster_labels {
            if !c.labels.get(&r.key).is_some_and(|v| r.values.contains(v)) {
                return Err(format!("label {} not in {:?}", r.key, r.values));
            }
        }
        for t in &c.taints {
            if t.effect == TaintEffect::PreferNoSchedule {
                continue;
            }
            let ok = policy.tolerations.iter().any(|tol| {
                tol.effect.is_none_or(|e| e == t.effect)
                    && (tol.key.is_empty() && tol.exists
                        || tol.key == t.key && (tol.exists || tol.value == t.value))
            });
            if !ok {
                return Err(format!("taint {} not tolerated", t.key));
            }
        }
        Ok(())
    }

    /// Registers a node's shared GPUs: (uuid, split, MiB).
    pub fn node_gpus(&mut self, cluster: &str, node: &str, gpus: &[(String, u32, u64)]) {
        let key = (cluster.to_string(), node.to_string());
        self.gpus.insert(
            key,
            gpus.iter().map(|(u, s, m)| (u.clone(), (*s, *m))).collect(),
        );
    }

    /// Accounts for the shared GPUs `pod` was bound with on `key`, counting a violation where
    /// a GPU would hold more than it has.
    fn take_gpus(&mut self, pod: &str, key: &NodeKey, gpus: &[GpuSlice]) {
        for (uuid, mib, cores) in gpus {
            let Some(&(split, memory)) = self.gpus.get(key).and_then(|g| g.get(uuid)) else {
                self.invariants.gpu_overcommits += 1;
                self.violation(format!(
                    "pod {pod} bound to GPU {uuid}, which node {}/{} does not have",
                    key.0, key.1
                ));
                continue;
            };
            let u = self
                .gpus_used
                .entry((key.clone(), uuid.clone()))
                .or_default();
            u.0 += 1;
            u.1 += mib;
            u.2 += cores;
            let used = *u;
            if used.0 > split || used.1 > memory || used.2 > 100 {
                self.invariants.gpu_overcommits += 1;
                self.violation(format!(
                    "GPU {uuid} of {}/{} holds {} pod(s) of {split}, {} of {memory} MiB, {} of 100 cores after binding {pod}",
                    key.0, key.1, used.0, used.1, used.2
                ));
            }
        }
        if !gpus.is_empty() {
            self.pod_gpus
                .insert(pod.to_string(), (key.clone(), gpus.to_vec()));
        }
    }

    /// Checks one session's binds: (job, pod, cluster, node, request).
    pub fn binds(&mut self, binds: &[CheckBind]) {
        let mut by_job: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, b) in binds.iter().enumerate() {
            by_job.entry(b.job.as_str()).or_default().push(i);
        }
        for (job, idx) in by_job {
            let Some(j) = self.jobs.get(job) else {
                self.invariants.policy_violations += 1;
                self.violation(format!("bind for unknown job {job}"));
                continue;
            };
            let placed_before = j.placed.len() + j.done;
            let min = j.min;
            let mut clusters: BTreeSet<String> = j.placed.values().cloned().collect();
            let policy = j.policy.clone();
            if placed_before + idx.len() < min as usize {
                self.invariants.partial_gangs += 1;
                self.violation(format!(
                    "job {job}: {} placed + {} bound < gang of {}",
                    placed_before,
                    idx.len(),
                    min
                ));
            }
            for &i in &idx {
                let CheckBind {
                    pod,
                    cluster,
                    node,
                    request: req,
                    gpus,
                    ..
                } = &binds[i];
                clusters.insert(cluster.clone());
                match self.clusters.get(cluster) {
                    Some(c) => {
                        if let Err(why) = Self::allowed(&policy, cluster, c) {
                            self.invariants.policy_violations += 1;
                            self.violation(format!("job {job} bound to cluster {cluster}: {why}"));
                        }
                    }
                    None => {
                        self.invariants.policy_violations += 1;
                        self.violation(format!("job {job} bound to unknown cluster {cluster}"));
                    }
                }
                let key = (cluster.clone(), node.clone());
                if self.node_ready.get(&key) != Some(&true) {
                    self.invariants.policy_violations += 1;
                    self.violation(format!(
                        "pod {pod} bound to node {cluster}/{node} that is down or unknown"
                    ));
                }
                let req = amounts(req);
                let cap = self.capacity.get(&key);
                let used = self.used.entry(key.clone()).or_default();
                for (r, v) in &req {
                    *used.entry(r.clone()).or_insert(0) += v;
                }
                let over: Vec<String> = used
                    .iter()
                    .filter(|(r, v)| **v > cap.and_then(|c| c.get(*r)).copied().unwrap_or(0))
                    .map(|(r, _)| r.clone())
                    .collect();
                if !over.is_empty() {
                    self.invariants.node_overcommits += 1;
                    self.violation(format!(
                        "node {cluster}/{node} over capacity on {over:?} after binding {pod}"
                    ));
                }
                self.take_gpus(pod, &key, gpus);
                self.pod_req.insert(pod.clone(), (key, req));
                if let Some(j) = self.jobs.get_mut(job) {
                    j.placed.insert(pod.clone(), cluster.clone());
                }
            }
            if clusters.len() > 1 && !policy.splittable {
                self.invariants.gangs_split_across_clusters += 1;
                self.violation(format!(
                    "job {job} runs in clusters {clusters:?} but may not be split"
                ));
            }
        }
    }

    /// A pod stopped holding its node: it finished (`finished`) or was evicted.
    pub fn released(&mut self, job: &str, pod: &str, finished: bool) {
        if let Some((key, gpus)) = self.pod_gpus.remove(pod) {
            for (uuid, mib, cores) in gpus {
                if let Some(u) = self.gpus_used.get_mut(&(key.clone(), uuid)) {
                    u.0 = u.0.saturating_sub(1);
                    u.1 = u.1.saturating_sub(mib);
                    u.2 = u.2.saturating_sub(cores);
                }
            }
        }
        if let Some((key, req)) = self.pod_req.remove(pod)
            && let Some(used) = self.used.get_mut(&key)
        {
            for (r, v) in req {
                *used.entry(r).or_insert(0) -= v;
            }
        }
        if let Some(j) = self.jobs.get_mut(job)
            && j.placed.remove(pod).is_some()
            && finished
        {
            j.done += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(job: &str, pod: &str, gpu: &str) -> CheckBind {
        CheckBind {
            job: job.into(),
            pod: pod.into(),
            cluster: "east".into(),
            node: "n".into(),
            request: std::sync::Arc::from(vec![("cpu".to_string(), "1".to_string())]),
            gpus: vec![(gpu.into(), 60000, 50)],
        }
    }

    /// A pod set aside by failover keeps its slice under its ghost's name until the ghost is
    /// gone: then the slice is free for the next pod, and only then.
    #[test]
    fn a_ghost_holds_its_pods_gpu_slice_until_it_is_gone() {
        let mut c = Checker::default();
        c.cluster(
            "east",
            CheckCluster {
                ready: true,
                ..CheckCluster::default()
            },
        );
        c.node("east", "n", &[("cpu".into(), "8".into())]);
        c.node_gpus("east", "n", &[("GPU-0".into(), 4, 81920)]);
        for j in ["a", "b", "c"] {
            c.job(j, 1, JobPolicy::default());
        }
        c.binds(&[bind("a", "a-0", "GPU-0")]);
        c.ghost("a", "a-0", "a-0~east", false);
        // The ghost still holds 60000 MiB of the GPU: b's slice would over-commit it.
        c.binds(&[bind("b", "b-0", "GPU-0")]);
        assert_eq!(c.invariants.gpu_overcommits, 1, "{:?}", c.details);
        c.released("b", "b-0", false);
        // The ghost is gone: c's slice fits.
        c.released("a", "a-0~east", false);
        c.binds(&[bind("c", "c-0", "GPU-0")]);
        assert_eq!(c.invariants.gpu_overcommits, 1, "{:?}", c.details);
    }
}
