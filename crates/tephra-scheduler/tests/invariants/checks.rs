//! What every session must keep, checked on its decisions: nothing over-committed, no gang
//! partly bound, split or misplaced, pipelined pods on room being freed, volumes and devices
//! given once and where they are, host ports, and spread constraints.

use super::*;

/// Pipelined reservations never over-commit a node: what runs there, less what is evicted,
/// plus what is bound and pipelined, fits its allocatable.
pub(crate) fn check_pipelined(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut after: BTreeMap<(String, String), Resources> = w
        .nodes
        .iter()
        .map(|(_, n)| ((n.spec.cluster.clone(), n.spec.name.clone()), n.used))
        .collect();
    let request = |task: &str| w.tasks.get(w.task_id(task).unwrap()).unwrap();
    for b in d.binds.iter().chain(&d.pipelined) {
        after
            .get_mut(&(b.cluster.clone(), b.node.clone()))
            .unwrap()
            .add(&request(&b.task).spec.shape.request);
    }
    for e in &d.evictions {
        let t = request(&e.task);
        let (cluster, node) = t.spec.placement.clone().unwrap();
        after
            .get_mut(&(cluster, node))
            .unwrap()
            .sub(&t.spec.shape.request);
    }
    for ((cluster, node), used) in &after {
        let n = w.nodes.get(w.node_id(cluster, node).unwrap()).unwrap();
        for i in 0..MAX_RESOURCES {
            if i == tephra_scheduler::resources::PODS && n.spec.allocatable.get(i) == 0 {
                continue;
            }
            prop_assert!(
                used.get(i) <= n.spec.allocatable.get(i),
                "node {cluster}/{node} over-committed with pipelined pods on {}",
                w.names.name(i)
            );
        }
    }
    Ok(())
}

pub(crate) fn check_invariants(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    // 1. No node over-committed, on any resource.
    let mut added: BTreeMap<(String, String), Resources> = BTreeMap::new();
    for b in &d.binds {
        let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
        added
            .entry((b.cluster.clone(), b.node.clone()))
            .or_default()
            .add(&t.spec.shape.request);
    }
    for ((cluster, node), req) in &added {
        let n = w.nodes.get(w.node_id(cluster, node).unwrap()).unwrap();
        let total = n.used.plus(req);
        for i in 0..MAX_RESOURCES {
            if i == tephra_scheduler::resources::PODS && n.spec.allocatable.get(i) == 0 {
                continue;
            }
            prop_assert!(
                total.get(i) <= n.spec.allocatable.get(i),
                "node {cluster}/{node} over-committed on {}: {} > {}",
                w.names.name(i),
                total.get(i),
                n.spec.allocatable.get(i)
            );
        }
    }
    // 2-4. Gangs whole, in one cluster unless splittable, where their policy allows.
    let mut by_job: BTreeMap<&str, Vec<&tephra_scheduler::decisions::Bind>> = BTreeMap::new();
    for b in &d.binds {
        by_job.entry(b.job.as_str()).or_default().push(b);
    }
    for (job, binds) in &by_job {
        let j = w.jobs.get(w.job_id(job).unwrap()).unwrap();
        let g = j.group.as_ref().unwrap();
        let ready_before = j
            .tasks
            .iter()
            .filter(|t| w.tasks.get(**t).unwrap().spec.status.is_ready())
            .count();
        prop_assert!(
            binds.len() + ready_before >= g.min_member as usize,
            "job {job} partly bound: {} of {}",
            binds.len(),
            g.min_member
        );
        for (role, min) in &g.min_task_member {
            let n = binds.iter().filter(|b| &b.role == role).count();
            prop_assert!(
                n >= *min as usize,
                "job {job} role {role} below its minimum"
            );
        }
        let clusters: BTreeSet<&str> = binds.iter().map(|b| b.cluster.as_str()).collect();
        prop_assert!(
            g.policy.splittable || clusters.len() == 1,
            "job {job} split across {clusters:?}"
        );
        for cname in clusters {
            let cl = w.clusters.get(w.cluster_id(cname).unwrap()).unwrap();
            prop_assert!(
                plugins::clusteraffinity_allows(&g.policy, cl).is_ok(),
                "job {job} placed on excluded cluster {cname}"
            );
            for t in &cl.taints {
                prop_assert!(
                    t.effect == TaintEffect::PreferNoSchedule
                        || tolerated(&g.policy.tolerations, t),
                    "job {job} placed on tainted cluster {cname}"
                );
            }
        }
    }
    // 5. No host port given twice on one node, counting what runs there.
    check_ports(c, d)?;
    // 6. No pod bound where its volumes cannot be used.
    check_volumes(c, d)?;
    // 7. No pod bound where its devices are not, no device given to two claims.
    check_devices(c, d)?;
    // 8. A claim is deallocated only if allocated and held by nobody but its pod, and not
    // used in the same session.
    check_deallocations(c, d)?;
    // 6. Every job still waiting has an explanation: from this session, or, for a job an
    // earlier session parked as never placeable or let rest as refused by the votes, from that
    // session (checked here when parked; a resting job's refusal was an event when it was
    // said, and it stays unchanged until the job wakes).
    let bound: BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    for job in &d.park.jobs {
        prop_assert!(
            d.event_for(job).is_some(),
            "job {job} parked without an explanation"
        );
    }
    for (id, j) in w.jobs.iter() {
        if w.parked.contains(&id) || w.resting.contains(&id) {
            continue;
        }
        let waiting = j
            .tasks
            .iter()
            .any(|t| w.tasks.get(*t).unwrap().spec.status == TaskStatus::Pending);
        if waiting && !bound.contains(j.key.as_str()) {
            prop_assert!(
                d.event_for(&j.key).is_some(),
                "job {} waits without an explanation",
                j.key
            );
        }
    }
    Ok(())
}

/// Where each pod is once `d`'s binds are applied (pods that hold a node, less those evicted).
fn placed_after(c: &Cache, d: &Decisions) -> Vec<(String, String, String)> {
    let w = c.world();
    let evicted: BTreeSet<&str> = d.evictions.iter().map(|e| e.task.as_str()).collect();
    let mut out: Vec<(String, String, String)> = w
        .tasks
        .iter()
        .filter(|(_, t)| t.spec.status.holds_node() && !evicted.contains(t.key.as_str()))
        .filter_map(|(_, t)| {
            let (cl, n) = t.spec.placement.clone()?;
            Some((t.key.clone(), cl, n))
        })
        .collect();
    out.extend(
        d.binds
            .iter()
            .map(|b| (b.task.clone(), b.cluster.clone(), b.node.clone())),
    );
    out
}

/// Every bound pod's claims are served on its node: a bound claim's volume, or what the
/// session gave the claim (a volume there, or provisioning there); no volume given to two
/// claims.
pub(crate) fn check_volumes(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut given: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    let mut volumes: BTreeMap<(String, String), String> = BTreeMap::new();
    for p in &d.prebinds {
        for v in &p.volumes {
            let slot = (p.cluster.clone(), v.claim.clone());
            if let Some(before) = given.insert(slot.clone(), v.volume.clone()) {
                prop_assert_eq!(&before, &v.volume, "claim {:?} given two things", slot);
            }
            if let Some(pv) = &v.volume
                && let Some(other) =
                    volumes.insert((p.cluster.clone(), pv.clone()), v.claim.clone())
            {
                prop_assert_eq!(&other, &v.claim, "volume {} given to two claims", pv);
            }
        }
    }
    for b in &d.binds {
        let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
        let n = w
            .nodes
            .get(w.node_id(&b.cluster, &b.node).unwrap())
            .unwrap();
        let st = &w.storage[&b.cluster];
        for name in &t.spec.shape.rules.claims {
            let key = format!("default/{name}");
            let claim = st.claims.get(&key).unwrap();
            let volume = if claim.bound {
                claim.volume.clone()
            } else {
                given
                    .get(&(b.cluster.clone(), key.clone()))
                    .cloned()
                    .flatten()
            };
            let pv = volume.and_then(|v| st.volumes.get(&v));
            prop_assert!(
                pv.is_some_and(|pv| pv.node_allows(&n.spec.labels)),
                "pod {} bound to {}/{} where its claim {key} has no volume",
                b.task,
                b.cluster,
                b.node
            );
        }
    }
    Ok(())
}

/// Every bound pod's ResourceClaims are allocated devices its node reaches, and no device is
/// allocated to two claims.
pub(crate) fn check_devices(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut allocations: BTreeMap<(String, String), tephra_scheduler::model::ClaimAllocation> =
        BTreeMap::new();
    for p in &d.prebinds {
        for b in &p.devices {
            if let Some(a) = &b.allocation {
                let slot = (p.cluster.clone(), b.claim.clone());
                if let Some(before) = allocations.insert(slot.clone(), a.clone()) {
                    prop_assert_eq!(&before, a, "claim {:?} allocated twice", slot);
                }
            }
        }
    }
    let mut held: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for ((cluster, claim), a) in &allocations {
        for dev in &a.devices {
            let k = (cluster.clone(), dev.pool.clone(), dev.device.clone());
            if let Some(other) = held.insert(k.clone(), claim.clone()) {
                prop_assert!(false, "device {k:?} allocated to {other} and {claim}");
            }
        }
    }
    for b in &d.binds {
        let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
        let n = w
            .nodes
            .get(w.node_id(&b.cluster, &b.node).unwrap())
            .unwrap();
        for pc in &t.spec.shape.rules.device_claims {
            let key = format!("default/{}", pc.claim.clone().unwrap());
            let a = allocations
                .get(&(b.cluster.clone(), key.clone()))
                .cloned()
                .or_else(|| w.dra[&b.cluster].claims[&key].allocation.clone());
            prop_assert!(
                a.is_some_and(|a| a.nodes.reach(&n.spec.name, &n.spec.labels)),
                "pod {} bound to {}/{} where its claim {key} has no devices",
                b.task,
                b.cluster,
                b.node
            );
        }
    }
    Ok(())
}

/// Every ResourceClaim deallocated was allocated, at the version the cache holds, and reserved
/// for nobody but the pod it keeps back (a waiting pod, not bound this session); no pod bound or
/// PreBind written this session uses it.
pub(crate) fn check_deallocations(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    for x in &d.deallocations {
        let claim = &w.dra[&x.cluster].claims[&x.claim];
        let pod = x.task.rsplit('/').next().unwrap_or_default();
        prop_assert!(claim.allocation.is_some(), "{x:?}: not allocated");
        prop_assert_eq!(&claim.resource_version, &x.resource_version);
        prop_assert!(
            claim.reserved_for.iter().all(|p| p == pod),
            "{:?}: reserved for {:?}",
            x,
            claim.reserved_for
        );
        for p in d.prebinds.iter().filter(|p| p.cluster == x.cluster) {
            prop_assert!(
                p.devices.iter().all(|b| b.claim != x.claim),
                "{:?} deallocated and written for {} in one session",
                x,
                p.task
            );
        }
        for b in d.binds.iter().filter(|b| b.cluster == x.cluster) {
            let t = w.tasks.get(w.task_id(&b.task).unwrap()).unwrap();
            let uses = t.spec.shape.rules.device_claims.iter().any(|pc| {
                pc.claim
                    .as_ref()
                    .is_some_and(|n| format!("default/{n}") == x.claim)
            });
            prop_assert!(!uses, "{:?} deallocated while {} binds with it", x, b.task);
        }
    }
    Ok(())
}

pub(crate) fn check_ports(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    let w = c.world();
    let mut held: BTreeMap<(String, String), Vec<(String, HostPort)>> = BTreeMap::new();
    for (task, cluster, node) in placed_after(c, d) {
        let t = w.tasks.get(w.task_id(&task).unwrap()).unwrap();
        for p in &t.spec.shape.rules.host_ports {
            let on = held.entry((cluster.clone(), node.clone())).or_default();
            if let Some((other, _)) = on.iter().find(|(_, q)| q.clashes(p)) {
                prop_assert!(
                    false,
                    "{task} and {other} both hold port {} on {cluster}/{node}",
                    p.port
                );
            }
            on.push((task.clone(), p.clone()));
        }
    }
    Ok(())
}

/// After a session that evicted nothing, every job's `DoNotSchedule` zone spread holds: its
/// pods per zone of each cluster differ by at most maxSkew.
pub(crate) fn check_spread(c: &Cache, d: &Decisions) -> Result<(), TestCaseError> {
    if !d.evictions.is_empty() {
        return Ok(());
    }
    let w = c.world();
    // (job, cluster) -> (maxSkew, zone -> pods), with every zone of the cluster present.
    type Zones = BTreeMap<String, u32>;
    let mut counts: BTreeMap<(String, String), (u32, Zones)> = BTreeMap::new();
    let zones_of = |cluster: &str| -> BTreeSet<String> {
        w.nodes
            .iter()
            .filter(|(_, n)| n.spec.cluster == cluster)
            .filter_map(|(_, n)| n.spec.labels.get(ZONE).cloned())
            .collect()
    };
    for (task, cluster, node) in placed_after(c, d) {
        let t = w.tasks.get(w.task_id(&task).unwrap()).unwrap();
        let Some(term) = t.spec.shape.rules.spread.iter().find(|s| s.is_hard()) else {
            continue;
        };
        let key = (t.spec.shape.rules.labels["app"].clone(), cluster.clone());
        let (_, zones) = counts.entry(key).or_insert_with(|| {
            let zones = zones_of(&cluster).into_iter().map(|z| (z, 0)).collect();
            (term.max_skew, zones)
        });
        let n = w.nodes.get(w.node_id(&cluster, &node).unwrap()).unwrap();
        *zones.entry(n.spec.labels[ZONE].clone()).or_insert(0) += 1;
    }
    for ((job, cluster), (max_skew, zones)) in &counts {
        let (min, max) = (zones.values().min().unwrap(), zones.values().max().unwrap());
        prop_assert!(
            max - min <= *max_skew,
            "job {job} spread over {cluster} as {zones:?}, beyond its maxSkew"
        );
    }
    Ok(())
}
