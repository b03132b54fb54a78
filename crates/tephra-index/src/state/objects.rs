//! The watchers' objects taken into the state, kind by kind: each upsert or delete becomes
//! the cache's event, with what the runtime keeps beside it (declared pods and their copies,
//! PodGroups as observed and their policies, members, claims, bindings); (re)lists whose end
//! deletes what they no longer name; and what the cache refused, with why.

use std::sync::Arc;

use tephra_scheduler::cache::{DraChange, Event, StorageChange};
use tephra_scheduler::model::{JobPolicy, TaskStatus};

use super::{State, StateError, claims, durations};
use crate::convert::{self, dra_event, storage_event};
use crate::observed::{Change, Kind, Obj, Update};
use crate::writes::{DeclaredPod, GroupSeen};
use tephra_controllers::{dra, propagation, storage};

impl State {
    /// The declared pod `key` (fleet mode) waits to be placed again, if it is still declared.
    pub(super) fn declare_again(&mut self, key: &str) -> Result<(), StateError> {
        let Some(kept) = self.declared.pods.get(key) else {
            return Ok(());
        };
        let pod = kept.pod().map_err(|e| StateError::Declared {
            pod: key.to_string(),
            source: e,
        })?;
        let control = self.control.clone().unwrap_or_else(|| Arc::from(""));
        self.upsert(0, &control, Obj::Pod(Box::new(pod)))
    }

    /// Takes one watcher update into the cache. Returns the errors of objects it could not
    /// take (each leaves the cache as it was for that object).
    pub fn apply(&mut self, now: i64, update: Update) -> Vec<StateError> {
        let Update {
            cluster,
            kind,
            change,
        } = update;
        let mut errors = Vec::new();
        let member_kind =
            matches!(kind, Kind::Node | Kind::Pod) && self.control.as_deref() != Some(&*cluster);
        if member_kind {
            let reachable = !matches!(change, Change::Failed);
            if let Err(e) = self.set_reachable(&cluster, reachable) {
                errors.push(e);
            }
        }
        match change {
            Change::Failed | Change::Reachable => {}
            Change::Apply(obj) => {
                self.intake.seen(&cluster, kind, obj.key());
                if let Err(e) = self.upsert(now, &cluster, obj) {
                    errors.push(e);
                }
            }
            Change::Delete(obj) => {
                let key = obj.key();
                self.intake.gone(&cluster, kind, &key);
                if let Err(e) = self.delete(&cluster, kind, &key) {
                    errors.push(e);
                }
            }
            Change::ListStart => self.intake.list_start(cluster, kind),
            Change::Listed(obj) => errors.extend(self.listed(now, &cluster, kind, obj)),
            Change::ListDone => errors.extend(self.list_done(cluster, kind)),
            Change::Relisted(objs) => {
                self.intake.list_start(Arc::clone(&cluster), kind);
                for obj in objs {
                    errors.extend(self.listed(now, &cluster, kind, obj));
                }
                errors.extend(self.list_done(cluster, kind));
            }
        }
        errors
    }

    /// One object of a (re)list in progress: remembered as listed and known, and taken in.
    fn listed(&mut self, now: i64, cluster: &Arc<str>, kind: Kind, obj: Obj) -> Option<StateError> {
        self.intake.listed(cluster, kind, obj.key());
        self.upsert(now, cluster, obj).err()
    }

    /// A (re)list is complete: what the cache knew of `kind` in `cluster` that the list did
    /// not name is deleted.
    fn list_done(&mut self, cluster: Arc<str>, kind: Kind) -> Vec<StateError> {
        let gone = self.intake.list_done(Arc::clone(&cluster), kind);
        let mut errors = Vec::new();
        for key in &gone {
            if let Err(e) = self.delete(&cluster, kind, key) {
                errors.push(e);
            }
        }
        let declared_pods = kind == Kind::Pod && self.control.as_deref() == Some(&*cluster);
        self.intake.synced(Arc::clone(&cluster), kind);
        // Listed without a device configuration: MIG-mode GPUs are shared as any other.
        if kind == Kind::DeviceConfig
            && self.cache.world().mig.is_none()
            && let Err(e) = self.cache.apply(Event::MigGeometries(Default::default()))
        {
            errors.push(e.into());
        }
        if kind == Kind::HyperNode
            && let Err(e) = self.cache.apply(Event::HyperNodesListed {
                cluster: cluster.to_string(),
            })
        {
            errors.push(e.into());
        }
        // Pods held back for this kind may be placed now that it is listed.
        for spec in self.held.released(&self.intake, &cluster) {
            if let Err(e) = self.cache.apply(Event::PodUpsert(spec)) {
                errors.push(e.into());
            }
        }
        if declared_pods {
            self.judge_copies();
        }
        errors
    }

    /// A pod of tephra's names the Kubernetes PodGroup of its `group`: from now on that is
    /// one of tephra's gangs, read into the cache if it was kept aside (see `crate::workload`).
    fn claim_kube_group(&mut self, now: i64, pod: &tephra_scheduler::model::PodSpec) {
        if self.kube_groups.is_empty() {
            return;
        }
        let Some(group) = pod.group.as_deref() else {
            return;
        };
        let key = format!("{}/{group}", pod.namespace);
        let Some(seen) = self.kube_groups.get_mut(&key) else {
            return;
        };
        if seen.claimed {
            return;
        }
        seen.claimed = true;
        if let Some((cluster, g)) = seen.unclaimed.take()
            && let Err(e) = self.upsert_inner(now, &cluster, Obj::KubePodGroup(g))
        {
            tracing::warn!(group = %key, error = %e, "a Kubernetes PodGroup named by a pod of tephra's not read");
        }
    }

    fn refuse(&mut self, what: String, e: StateError) -> StateError {
        self.intake.refuse(what, e.to_string());
        e
    }

    /// The queue of `pod`'s PodGroup, as the cache holds it (empty when not known yet).
    fn queue_of(&self, pod: &tephra_scheduler::model::PodSpec) -> String {
        durations::queue_of(self.cache.world(), pod).to_string()
    }

    pub(super) fn upsert(
        &mut self,
        now: i64,
        cluster: &Arc<str>,
        obj: Obj,
    ) -> Result<(), StateError> {
        let label = format!("{:?} {}", obj.kind(), obj.key());
        let result = self.upsert_inner(now, cluster, obj);
        match result {
            Ok(()) => {
                self.intake.accepted(&label);
                Ok(())
            }
            Err(e) => Err(self.refuse(label, e)),
        }
    }

    fn upsert_inner(&mut self, now: i64, cluster: &Arc<str>, obj: Obj) -> Result<(), StateError> {
        let event = match obj {
            Obj::Node(n) => Event::NodeUpsert(convert::node(cluster, &n, self.cache.names_mut())?),
            Obj::Cluster(c) => {
                let name = c.metadata.name.clone().unwrap_or_default();
                let reachable = self.members.get(&name).is_none_or(|(_, r)| *r);
                self.members
                    .insert(name.clone(), (Some(Arc::new(*c.clone())), reachable));
                self.cache
                    .apply(Event::ClusterUpsert(convert::cluster(&c, reachable)))?;
                return self.declared_claims.seed(&mut self.cache, &name);
            }
            Obj::Pod(p) if self.control.as_deref() == Some(&**cluster) => {
                let key = convert::key(&p.metadata);
                // Being deleted (bound to the virtual node, it waits for its copy to go): it
                // is gone for the scheduler, and its copy is an orphan.
                if p.metadata.deletion_timestamp.is_some() {
                    let known = self.declared.pods.contains_key(&key)
                        || self.cache.world().task_id(&key).is_some();
                    return match known {
                        true => self.delete(cluster, Kind::Pod, &key),
                        false => Ok(()),
                    };
                }
                let mut p = *p;
                // Kept until a member has the pod: only what its copy there needs.
                p.metadata.managed_fields = None;
                // Only which ResourceClaims its templates gave it stays of its status.
                p.status = p.status.and_then(|s| s.resource_claim_statuses).map(|c| {
                    k8s_openapi::api::core::v1::PodStatus {
                        resource_claim_statuses: Some(c),
                        ..Default::default()
                    }
                });
                let kept = DeclaredPod::new(&p).map_err(|e| StateError::Declared {
                    pod: key.clone(),
                    source: e,
                })?;
                self.declared.pods.insert(key.clone(), kept);
                let member = p.metadata.labels.as_ref();
                let member = member.and_then(|l| l.get(tephra_api::well_known::MEMBER));
                self.declared.label_seen(&key, member.map(String::as_str));
                self.declared_changed(&key, p.metadata.uid.as_deref());
                // A copy in a member counts instead; an old copy (of a pod of the same name
                // before this one) is deleted first.
                if self.declared.mirrored.contains(&key) || self.old_copy_left(&key) {
                    return Ok(());
                }
                let Some(mut spec) = convert::pod(cluster, &p, &self.ours, self.cache.names_mut())?
                else {
                    return Ok(());
                };
                // A declared pod runs nowhere until a member has it.
                spec.placement = None;
                if spec.status == TaskStatus::Bound {
                    spec.status = TaskStatus::Pending;
                }
                if let Some(at) = self.assumed.get(&key) {
                    spec.status = TaskStatus::Binding;
                    spec.placement = Some(at.clone());
                }
                self.claim_kube_group(now, &spec);
                let queue = self.queue_of(&spec);
                self.durations.pod_seen(now, &key, &p, &spec, &queue);
                Event::PodUpsert(spec)
            }
            Obj::Pod(p) => {
                let key = convert::key(&p.metadata);
                if self.control.is_some() {
                    self.copy_seen(cluster, &key, &p);
                }
                if self.control.is_some() && self.member_pod_of_evicted(cluster, &p)? {
                    return Ok(());
                }
                if self.control.is_some() {
                    self.declared.mirrored.insert(key.clone());
                    self.declared.aggregate(&key, cluster, &p);
                }
                let Some(mut spec) = convert::pod(cluster, &p, &self.ours, self.cache.names_mut())?
                else {
                    // Another scheduler's pending pod: not ours, and it holds nothing yet.
                    if self.cache.world().task_id(&key).is_some() {
                        self.delete(cluster, Kind::Pod, &key)?;
                    }
                    return Ok(());
                };
                // A pod made in a fleet's member (no copy of a declared pod) runs there.
                let copy = p
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(tephra_api::well_known::PLANNED_CLUSTER));
                if self.control.is_some() && !copy {
                    spec.lives_in = Some(cluster.to_string());
                }
                if spec.placement.is_some() {
                    self.assumed.remove(&key);
                } else if spec.status == TaskStatus::Pending
                    && let Some(at) = self.assumed.get(&key)
                {
                    // The bind is in flight: the pod keeps the node it was given.
                    spec.status = TaskStatus::Binding;
                    spec.placement = Some(at.clone());
                }
                self.claim_kube_group(now, &spec);
                let queue = self.queue_of(&spec);
                self.durations.pod_seen(now, &key, &p, &spec, &queue);
                // Held back while a kind it depends on is not listed yet.
                Event::PodUpsert(self.held.admit(&self.intake, cluster, &key, spec))
            }
            Obj::KubePodGroup(g) => {
                let key = convert::key(&g.metadata);
                let seen = self.kube_groups.entry(key.clone()).or_default();
                seen.conditions = g
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default();
                // Its pods say whose gang it is: a pod of tephra's seen before it names it
                // already (the cache holds a job of that name with tasks).
                seen.claimed = seen.claimed
                    || self
                        .cache
                        .world()
                        .job(&key)
                        .is_some_and(|j| !j.tasks.is_empty());
                if !seen.claimed {
                    seen.unclaimed = Some((Arc::clone(cluster), g));
                    return Ok(());
                }
                seen.unclaimed = None;
                let volcano = crate::workload::as_volcano(&g, Some(seen));
                return self.upsert_inner(now, cluster, Obj::PodGroup(Box::new(volcano)));
            }
            Obj::PodGroup(g) => {
                let key = convert::key(&g.metadata);
                let observed = convert::phase(g.status.as_ref().and_then(|s| s.phase));
                let since = match self.phases.get(&key) {
                    Some((p, since)) if *p == observed => Some(*since),
                    Some(_) => Some(now),
                    None => None,
                };
                let policy = match propagation::pick(self.policies.values().map(|p| &**p), &g) {
                    Some(pp) => {
                        propagation::job_policy(pp).map_err(|source| StateError::Policy {
                            policy: convert::key(&pp.metadata),
                            source,
                        })?
                    }
                    None => JobPolicy::default(),
                };
                let mut policy = policy;
                if let Some(away) = self.evicting.get(&key) {
                    // Failover: the gang is placed anywhere but where it is evicted from (never
                    // from home when it is pinned there: its pods exist nowhere else).
                    policy.exclude.extend(
                        away.iter()
                            .filter(|c| self.home.as_deref() != Some(c.as_str()))
                            .cloned(),
                    );
                }
                if let Some(home) = &self.home {
                    // Its pods exist only at home: a bind elsewhere would find no pod. A policy
                    // that names clusters but not home leaves the gang nowhere to go.
                    let named = policy.cluster_names.is_empty()
                        || policy.cluster_names.iter().any(|c| **c == **home);
                    if !named {
                        policy.exclude.push(home.to_string());
                    }
                    policy.cluster_names = vec![home.to_string()];
                }
                let mut spec =
                    convert::pod_group(&g, self.cache.names_mut(), since, Arc::new(policy))?;
                self.durations.group_seen(&key, &g.metadata);
                self.group_objects
                    .insert(key.clone(), Arc::new((*g).clone()));
                if spec.queue == tephra_api::defaults::DEFAULT_QUEUE {
                    spec.queue.clone_from(&self.default_queue);
                }
                self.phases
                    .insert(key.clone(), (spec.phase, spec.phase_since));
                self.groups.insert(
                    key,
                    GroupSeen {
                        uid: g.metadata.uid.clone(),
                        status: g.status.clone().unwrap_or_default(),
                        cluster: Arc::clone(cluster),
                    },
                );
                Event::PodGroupUpsert(spec)
            }
            Obj::Policy(pp) => {
                let key = convert::key(&pp.metadata);
                let ns = pp.metadata.namespace.clone().unwrap_or_default();
                tracing::debug!(policy = %key, "propagation policy");
                self.policies.insert(key, Arc::new(*pp));
                return self.reselect(now, &ns);
            }
            Obj::Queue(q) => {
                Event::QueueUpsert(Box::new(convert::queue(&q, self.cache.names_mut())?))
            }
            Obj::PriorityClass(pc) => Event::PriorityClassUpsert {
                name: pc.metadata.name.clone().unwrap_or_default(),
                value: pc.value.unwrap_or(0),
            },
            Obj::Pdb(p) => Event::PdbUpsert(convert::pdb(&p)?),
            Obj::Binding(rb) => return self.binding(now, &rb),
            Obj::Pvc(c) => {
                let claim = storage::claim(&c)?;
                let slot = format!("pvc:{}", claim.key());
                if self.control.as_deref() == Some(&**cluster) {
                    return self.declared_claims.changed(
                        &mut self.cache,
                        &slot,
                        Some(claims::DeclaredClaim::Volume(claim)),
                    );
                }
                self.declared_claims
                    .in_member(&mut self.cache, cluster, &slot, true)?;
                storage_event(cluster, StorageChange::ClaimUpsert(claim))
            }
            Obj::Pv(v) => storage_event(cluster, StorageChange::VolumeUpsert(storage::volume(&v)?)),
            Obj::StorageClass(c) => {
                storage_event(cluster, StorageChange::ClassUpsert(storage::class(&c)))
            }
            Obj::CsiNode(n) => storage_event(cluster, storage::attach_limits(&n)),
            Obj::DeviceClass(c) => dra_event(cluster, DraChange::ClassUpsert(dra::class(&c)?)),
            Obj::ResourceSlice(s) => dra_event(cluster, DraChange::SliceUpsert(dra::slice(&s))),
            Obj::DeviceConfig(cm) => Event::MigGeometries(convert::mig_geometries(&cm)?),
            Obj::HyperNode(h) => {
                let spec = tephra_controllers::topology::hypernode(cluster, &h)
                    .map_err(crate::convert::ConvertError::from)?;
                let shown = h.status.as_ref().and_then(|s| s.node_count);
                self.hypernodes.seen(cluster, &spec.name, shown);
                Event::HyperNodeUpsert(spec)
            }
            Obj::ResourceClaim(c) => {
                let claim = dra::claim(&c)?;
                let slot = format!("rc:{}", claim.key());
                if self.control.as_deref() == Some(&**cluster) {
                    return self.declared_claims.changed(
                        &mut self.cache,
                        &slot,
                        Some(claims::DeclaredClaim::Device(claim)),
                    );
                }
                self.declared_claims
                    .in_member(&mut self.cache, cluster, &slot, true)?;
                dra_event(cluster, DraChange::ClaimUpsert(claim))
            }
        };
        Ok(self.cache.apply(event)?)
    }

    pub(super) fn delete(
        &mut self,
        cluster: &str,
        kind: Kind,
        key: &str,
    ) -> Result<(), StateError> {
        let (namespace, name) = match key.split_once('/') {
            Some((ns, n)) => (ns.to_string(), n.to_string()),
            None => (String::new(), key.to_string()),
        };
        self.intake.forget_refusals(key);
        if kind == Kind::Pod {
            self.durations.pod_gone(key);
            self.held.forget(key);
        }
        let event = match kind {
            Kind::Node => Event::NodeDelete {
                cluster: cluster.to_string(),
                name,
            },
            Kind::Pod if self.control.as_deref() == Some(cluster) => {
                self.declared.forget(key);
                self.declared_changed(key, None);
                if self.declared.mirrored.contains(key) {
                    return Ok(());
                }
                self.assumed.remove(key);
                Event::PodDelete { namespace, name }
            }
            Kind::Pod => {
                let was_orphan = self.copy_gone(cluster, key);
                if self.ghost_gone(cluster, key)? {
                    // The old copy is gone: a new pod declared under its name may be placed.
                    if was_orphan
                        && !self.declared.mirrored.contains(key)
                        && !self.old_copy_left(key)
                    {
                        return self.declare_again(key);
                    }
                    return Ok(());
                }
                self.assumed.remove(key);
                self.declared.mirrored.remove(key);
                if self.declared.pods.contains_key(key) {
                    self.declared.waits_again(
                        key,
                        "MemberCopyGone",
                        format!("its copy in member cluster {cluster} is gone; it waits to be placed again"),
                    );
                }
                self.cache.apply(Event::PodDelete { namespace, name })?;
                // Still declared: the job wants it, so it is placed again.
                return self.declare_again(key);
            }
            Kind::Cluster => {
                self.members.remove(&name);
                Event::ClusterDelete(name)
            }
            Kind::Policy => {
                self.policies.remove(key);
                return self.reselect(0, &namespace);
            }
            Kind::KubePodGroup if self.kube_groups.get(key).is_some_and(|g| !g.claimed) => {
                // Nobody's gang to tephra: the cache never had it.
                self.kube_groups.remove(key);
                return Ok(());
            }
            Kind::PodGroup | Kind::KubePodGroup => {
                self.kube_groups.remove(key);
                self.group_objects.remove(key);
                self.durations.group_gone(key);
                self.phases.remove(key);
                self.groups.remove(key);
                Event::PodGroupDelete { namespace, name }
            }
            Kind::Queue => Event::QueueDelete(name),
            Kind::PriorityClass => Event::PriorityClassDelete(name),
            Kind::Pdb => Event::PdbDelete { namespace, name },
            Kind::Binding => return self.unbind(0, key),
            Kind::Pvc => {
                let slot = format!("pvc:{key}");
                if self.control.as_deref() == Some(cluster) {
                    return self.declared_claims.changed(&mut self.cache, &slot, None);
                }
                self.cache.apply(storage_event(
                    cluster,
                    StorageChange::ClaimDelete(key.to_string()),
                ))?;
                return self
                    .declared_claims
                    .in_member(&mut self.cache, cluster, &slot, false);
            }
            Kind::Pv => storage_event(cluster, StorageChange::VolumeDelete(name)),
            Kind::StorageClass => storage_event(cluster, StorageChange::ClassDelete(name)),
            Kind::DeviceClass => dra_event(cluster, DraChange::ClassDelete(name)),
            Kind::ResourceSlice => dra_event(cluster, DraChange::SliceDelete(name)),
            // No device configuration: no geometries (Volcano's defaults name none).
            Kind::DeviceConfig => Event::MigGeometries(Default::default()),
            Kind::HyperNode => {
                self.hypernodes.gone(cluster, &name);
                Event::HyperNodeDelete {
                    cluster: cluster.to_string(),
                    name,
                }
            }
            Kind::ResourceClaim => {
                let slot = format!("rc:{key}");
                if self.control.as_deref() == Some(cluster) {
                    return self.declared_claims.changed(&mut self.cache, &slot, None);
                }
                self.cache
                    .apply(dra_event(cluster, DraChange::ClaimDelete(key.to_string())))?;
                return self
                    .declared_claims
                    .in_member(&mut self.cache, cluster, &slot, false);
            }
            Kind::CsiNode => storage_event(
                cluster,
                StorageChange::AttachLimits {
                    node: name,
                    limits: Default::default(),
                },
            ),
        };
        Ok(self.cache.apply(event)?)
    }
}
