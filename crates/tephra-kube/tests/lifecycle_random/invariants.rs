//! What the random lifecycle test checks of the world: at every step ([`World::always`]) and
//! at quiescence ([`World::settled`]), with the helpers that read the fleet for them.

use super::*;

impl World {
    /// Requests a second the fleet's API servers answer over three seconds while the test
    /// itself is quiet.
    pub(crate) async fn quiet_rate(&self) -> f64 {
        let served = || -> u64 { self.dev.servers().map(|s| s.api.requests_served()).sum() };
        let before = served();
        tokio::time::sleep(Duration::from_secs(3)).await;
        (served() - before) as f64 / 3.0
    }

    /// The copies in the members that answer: (member, pod).
    pub(crate) async fn copies(&self) -> Vec<(String, Pod)> {
        let mut out = Vec::new();
        for m in MEMBERS.iter().filter(|m| !self.down.contains(**m)) {
            let pods: Api<Pod> = Api::namespaced(self.dev.client(m).await.unwrap(), "default");
            if let Ok(list) = pods.list(&ListParams::default()).await {
                out.extend(list.items.into_iter().map(|p| (m.to_string(), p)));
            }
        }
        out
    }

    /// What must hold at every moment. Returns the first violation.
    pub(crate) async fn always(&self) -> Result<(), String> {
        // No request of a component refused by the chart's roles (the administrator's are
        // never refused).
        let denied: Vec<String> = self
            .dev
            .servers()
            .flat_map(|s| {
                let api = s.api.clone();
                api.access
                    .entries()
                    .into_iter()
                    .filter(|(a, _)| !a.allowed)
                    .map(move |(a, n)| {
                        format!(
                            "{}: {} {} {}/{} in {:?} (x{n})",
                            api.name, a.user, a.verb, a.group, a.resource, a.namespace
                        )
                    })
            })
            .collect();
        if !denied.is_empty() {
            return Err(format!(
                "requests the chart's roles refused:\n{}",
                denied.join("\n")
            ));
        }
        let copies = self.copies().await;
        // No node over-committed: what its pods ask of CPU and GPUs fits what it has.
        let mut used: BTreeMap<(String, String), (i64, i64)> = BTreeMap::new();
        for (m, p) in &copies {
            let s = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(s, Some("Succeeded" | "Failed")) {
                continue;
            }
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            let u = used.entry((m.clone(), node)).or_default();
            for c in &p.spec.as_ref().unwrap().containers {
                let r = c.resources.as_ref().and_then(|r| r.requests.as_ref());
                u.0 += quantity(r.and_then(|r| r.get("cpu")));
                u.1 += quantity(r.and_then(|r| r.get("nvidia.com/gpu"))) / 1000;
            }
        }
        for ((m, node), (cpu, gpu)) in &used {
            let gpus = match m.as_str() {
                "east" => 2,
                "west" => 8,
                _ => 4,
            };
            if *cpu > 16_000 || *gpu > gpus {
                return Err(format!("{m}/{node} over-committed: {cpu}m CPU, {gpu} GPUs"));
            }
        }
        // No kubelet refused a pod for want of room (the scheduler over-committed it).
        for (m, p) in &copies {
            let reason = p.status.as_ref().and_then(|s| s.reason.clone());
            if reason.as_deref().is_some_and(|r| r.starts_with("OutOf")) {
                return Err(format!(
                    "{m}: the kubelet refused {:?}: {reason:?}",
                    p.metadata.name
                ));
            }
        }
        // At most one copy of each declared pod.
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (m, p) in &copies {
            let name = p.metadata.name.clone().unwrap_or_default();
            if let Some(other) = seen.insert(name.clone(), m.clone()) {
                return Err(format!("{name} has copies in {other} and {m}"));
            }
        }
        // Nothing placed on a node after it was cordoned.
        for (m, p) in &copies {
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            let Some(since) = self.cordoned.get(&(m.clone(), node.clone())) else {
                continue;
            };
            let created = p
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_second());
            if created > since + CORDON_GRACE_S {
                return Err(format!(
                    "{m}: {:?} placed on {node}, cordoned {}s before",
                    p.metadata.name,
                    created - since
                ));
            }
        }
        // A Job created while its queue is closed does not run until it opens.
        for name in self.closed.iter().flatten() {
            let prefix = format!("{name}-");
            if copies.iter().any(|(_, p)| of_job(p, &prefix)) {
                return Err(format!("job {name}, created in a closed queue, runs"));
            }
        }
        // At most one scheduler replica leads.
        let leading = self
            .scheds
            .iter()
            .filter(|s| s.leadership.is_leader())
            .count();
        if leading > 1 {
            return Err(format!("{leading} scheduler replicas lead at once"));
        }
        // No Job lost.
        let jobs = self.jobs_api().list(&ListParams::default()).await.unwrap();
        let have: BTreeSet<String> = jobs
            .items
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect();
        for j in self.jobs.keys() {
            if !have.contains(j) {
                return Err(format!("job {j} is lost"));
            }
        }
        Ok(())
    }

    /// What must hold once the world has settled (every member answering).
    pub(crate) async fn settled(&self) -> Result<(), String> {
        self.always().await?;
        let declared: Api<Pod> = Api::namespaced(self.cp.clone(), "default");
        let declared: BTreeMap<String, Pod> = declared
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
            .collect();
        let copies = self.copies().await;
        for (m, p) in &copies {
            let name = p.metadata.name.clone().unwrap_or_default();
            let a = p.metadata.annotations.clone().unwrap_or_default();
            if !a.contains_key(PLANNED_CLUSTER) {
                continue;
            }
            let owner = declared.get(&name);
            let uid_ok = owner.is_some_and(|d| {
                a.get(DECLARED_UID)
                    .is_none_or(|u| d.metadata.uid.as_ref() == Some(u))
            });
            if !uid_ok {
                return Err(format!("{m}: copy {name} outlives its declared pod"));
            }
        }
        for (name, e) in &self.jobs {
            let prefix = format!("{name}-");
            let mine: Vec<&Pod> = copies
                .iter()
                .filter(|(_, p)| of_job(p, &prefix))
                .map(|(_, p)| p)
                .collect();
            let j = self.jobs_api().get(name).await.unwrap();
            let phase = j.status.and_then(|s| s.state.phase);
            if e.suspended {
                if !mine.is_empty() || phase != Some(JobPhase::Aborted) {
                    return Err(format!(
                        "suspended job {name}: {} copies, phase {phase:?}",
                        mine.len()
                    ));
                }
                continue;
            }
            let bound = mine
                .iter()
                .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                .count();
            if bound != 0 && bound != e.replicas as usize {
                // A disturbed gang may wait for room, but must say so on its PodGroup.
                if e.disturbed && self.says_why(name).await {
                    continue;
                }
                return Err(format!(
                    "job {name} partly bound: {bound} of {}; {}",
                    e.replicas,
                    self.explain(name).await
                ));
            }
            if bound == e.replicas as usize && phase != Some(JobPhase::Running) {
                return Err(format!("job {name} runs whole but is {phase:?}"));
            }
        }
        for name in &self.deleted {
            let prefix = format!("{name}-");
            if copies.iter().any(|(_, p)| of_job(p, &prefix)) {
                return Err(format!("deleted job {name} left copies behind"));
            }
            let rbs: Api<ResourceBinding> = Api::namespaced(self.cp.clone(), "default");
            let left = rbs
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .any(|rb| rb.spec.resource.name.starts_with(&prefix));
            if left {
                return Err(format!("deleted job {name} left its ResourceBinding"));
            }
        }
        self.dependency_copies_owned().await
    }

    /// Every ConfigMap and Service copied into a member is owned by pod copies that exist
    /// there, and none is left of a deleted Job.
    async fn dependency_copies_owned(&self) -> Result<(), String> {
        use k8s_openapi::api::core::v1::{ConfigMap, Service};
        let copied = ListParams::default().labels("tephra.io/source=control-plane");
        for m in MEMBERS {
            let client = self.dev.client(m).await.unwrap();
            let pods: BTreeSet<String> = Api::<Pod>::namespaced(client.clone(), "default")
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|p| p.metadata.uid)
                .collect();
            let mut metas: Vec<(
                String,
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            )> = Vec::new();
            for c in Api::<ConfigMap>::namespaced(client.clone(), "default")
                .list(&copied)
                .await
                .unwrap()
                .items
            {
                metas.push(("ConfigMap".into(), c.metadata));
            }
            for s in Api::<Service>::namespaced(client.clone(), "default")
                .list(&copied)
                .await
                .unwrap()
                .items
            {
                metas.push(("Service".into(), s.metadata));
            }
            for (kind, meta) in metas {
                let name = meta.name.clone().unwrap_or_default();
                let owners: Vec<String> = meta
                    .owner_references
                    .iter()
                    .flatten()
                    .map(|o| o.uid.clone())
                    .collect();
                if owners.is_empty() || owners.iter().any(|u| !pods.contains(u)) {
                    return Err(format!(
                        "{m}: {kind} copy {name} is not owned by pod copies there: {owners:?}"
                    ));
                }
                let job = name.trim_end_matches("-svc");
                if self.deleted.contains(job) {
                    return Err(format!("{m}: deleted job {job} left its {kind} {name}"));
                }
            }
        }
        Ok(())
    }

    /// The job's PodGroups (`<job>-<uid>`).
    async fn groups_of(&self, job: &str) -> Vec<tephra_api::PodGroup> {
        let pgs: Api<tephra_api::PodGroup> = Api::namespaced(self.cp.clone(), "default");
        let prefix = format!("{job}-");
        pgs.list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|g| {
                g.metadata
                    .name
                    .as_deref()
                    .unwrap_or("")
                    .starts_with(&prefix)
            })
            .collect()
    }

    /// Whether the job's PodGroup says why part of it waits (an Unschedulable condition).
    async fn says_why(&self, job: &str) -> bool {
        self.groups_of(job).await.into_iter().any(|g| {
            g.status.is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == tephra_api::scheduling::PodGroupConditionType::Unschedulable
                        && c.status == "True"
                })
            })
        })
    }

    /// The job's PodGroup status and its declared pods' conditions, for a failure message.
    async fn explain(&self, job: &str) -> String {
        let prefix = format!("{job}-");
        let groups: Vec<String> = self
            .groups_of(job)
            .await
            .into_iter()
            .map(|g| format!("{:?}", g.status))
            .collect();
        let pods: Api<Pod> = Api::namespaced(self.cp.clone(), "default");
        let declared: Vec<String> = pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| of_job(p, &prefix))
            .map(|p| {
                let s = p.status.unwrap_or_default();
                format!(
                    "{:?} {:?} {:?}",
                    p.metadata.name,
                    s.phase,
                    s.conditions
                        .unwrap_or_default()
                        .into_iter()
                        .map(|c| c.message)
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        format!("podgroups {groups:?}; declared pods {declared:?}")
    }
}
