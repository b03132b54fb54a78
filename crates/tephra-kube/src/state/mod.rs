//! The scheduler's picture of the world between sessions: the core [`Cache`] fed by the
//! watchers' updates, plus what the runtime knows that the API servers do not show yet: binds
//! it issued whose pods still look pending (assumed, as kube-scheduler assumes a pod), and when
//! each PodGroup entered its phase; in fleet mode, the pods declared on the control plane, the
//! members and their reachability, and the PropagationPolicies. No IO: the run loop feeds it
//! updates and write results. What follows a session is in `decided.rs`; failover (a job's
//! copies in a cluster it is evicted from) in `evicted.rs`; the bindings' per-cluster status
//! in `aggregated.rs`; the pods declared on the control plane in `declared.rs`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use tephra_api::Cluster as ApiCluster;
use tephra_controllers::dra;
use tephra_scheduler::cache::{Cache, CacheError, DraChange, Event, StorageChange};
use tephra_scheduler::model::{Cluster, GroupPhase, JobPolicy, TaskStatus};

mod aggregated;
mod claims;
mod decided;
mod declared;
mod evicted;
mod intake;
mod orphans;
mod strays;

use crate::convert::{self, ConvertError, dra_event, storage_event};
use crate::watch::{Change, Kind, Obj, Update};
use crate::writes::{DeclaredPod, GroupSeen};
use tephra_controllers::propagation;
use tephra_controllers::storage;

/// Why an update was not taken into the cache. The cache is unchanged for that object.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The object could not be read.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// The cache refused the event.
    #[error("{0}")]
    Cache(#[from] CacheError),
    /// The PropagationPolicy that selects a PodGroup cannot be read.
    #[error("propagationpolicy {policy}: {source}")]
    Policy {
        /// `namespace/name`.
        policy: String,
        /// Why.
        source: tephra_controllers::pod::UnknownValue,
    },
    /// A storage object could not be read.
    #[error(transparent)]
    Storage(#[from] tephra_controllers::storage::StorageError),
    /// A DRA object could not be read.
    #[error(transparent)]
    Dra(#[from] tephra_controllers::dra::DraError),
    /// A declared pod could not be kept as JSON or read back.
    #[error("declared pod {pod}: {source}")]
    Declared {
        /// `namespace/name`.
        pod: String,
        /// Why.
        source: serde_json::Error,
    },
}

/// The state loop's world.
pub struct State {
    cache: Cache,
    ours: Vec<String>,
    default_queue: String,
    assumed: HashMap<String, (String, String)>,
    phases: HashMap<String, (GroupPhase, i64)>,
    groups: HashMap<String, GroupSeen>,
    /// What the watchers told, and what the cache refused.
    intake: intake::Intake,
    /// The cluster whose pods are declared for placement in a member (fleet mode).
    control: Option<Arc<str>>,
    /// `--members both`: the cluster every PodGroup's pods live in (the scheduler's own),
    /// which its gang is bound in.
    home: Option<Arc<str>>,
    /// Pods declared on the control plane, by key.
    declared: HashMap<String, DeclaredPod>,
    /// Keys of pods some member has: the member's copy is the one that counts.
    mirrored: HashSet<String>,
    /// Members: the Cluster object (none for `local`) and whether its watchers reach it.
    members: HashMap<String, (Option<Arc<ApiCluster>>, bool)>,
    /// Jobs whose pod counts changed in the last session.
    recounted: Vec<(String, [i32; 3])>,
    /// Gangs left below their minimum by failed binds, since when.
    partial: HashMap<String, i64>,
    /// PropagationPolicies by `namespace/name`.
    policies: std::collections::BTreeMap<String, Arc<tephra_api::PropagationPolicy>>,
    /// PodGroups as last observed, to apply a changed policy to them.
    group_objects: HashMap<String, Arc<tephra_api::PodGroup>>,
    /// What was last reported on each declared pod: phase and `cluster/node`.
    aggregated: HashMap<String, (String, String)>,
    /// Declared pods' status writes not handed out yet.
    status_writes: Vec<crate::writes::Write>,
    /// The clusters each job (`namespace/podgroup`) is being evicted from (its binding's
    /// graceful-eviction tasks).
    evicting: HashMap<String, BTreeSet<String>>,
    /// Copies set aside in a cluster a job is evicted from: (cluster, pod key) → ghost name
    /// and the job.
    ghosts: HashMap<(String, String), (String, String)>,
    /// The ResourceBindings, by job.
    bindings: HashMap<String, Arc<tephra_api::ResourceBinding>>,
    /// Jobs whose pods or binding changed since their aggregated status was last looked at.
    touched: HashSet<String>,
    /// The aggregated status last written per job.
    aggregated_written: HashMap<String, aggregated::Written>,
    /// The node each pending pod is nominated to, as last written: pod key → (cluster, node).
    nominated: HashMap<String, (String, String)>,
    /// When the deletion of each set-aside copy was last asked for (ms).
    purged: HashMap<(String, String), i64>,
    /// Claims declared on the control plane, and the members that have their own copies.
    declared_claims: claims::Declared,
    /// Members' copies of declared pods, and those whose declared pod is gone.
    copies: orphans::Copies,
    /// Pods that name a PodGroup that does not exist.
    strays: strays::Strays,
}

impl State {
    /// An empty world that places pods whose `schedulerName` is one of `ours`; PodGroups that
    /// name no queue (or `default`) go to `default_queue`.
    pub fn new(ours: Vec<String>, default_queue: String) -> Self {
        Self {
            cache: Cache::new(),
            ours,
            default_queue,
            assumed: HashMap::new(),
            phases: HashMap::new(),
            groups: HashMap::new(),
            intake: intake::Intake::default(),
            control: None,
            home: None,
            declared: HashMap::new(),
            mirrored: HashSet::new(),
            members: HashMap::new(),
            recounted: Vec::new(),
            partial: HashMap::new(),
            policies: std::collections::BTreeMap::new(),
            group_objects: HashMap::new(),
            aggregated: HashMap::new(),
            status_writes: Vec::new(),
            evicting: HashMap::new(),
            ghosts: HashMap::new(),
            bindings: HashMap::new(),
            touched: HashSet::new(),
            aggregated_written: HashMap::new(),
            purged: HashMap::new(),
            nominated: HashMap::new(),
            declared_claims: claims::Declared::default(),
            copies: orphans::Copies::default(),
            strays: strays::Strays::default(),
        }
    }

    /// `--members both`: PodGroups' pods are not declared but live in `home`, the scheduler's
    /// own cluster, so each gang is placed there (other members' nodes still count).
    pub fn pin_groups_to(&mut self, home: Arc<str>) {
        // Pods without a PodGroup too: their implicit jobs stay at home.
        self.cache.set_implicit_policy(Arc::new(JobPolicy {
            cluster_names: vec![home.to_string()],
            ..JobPolicy::default()
        }));
        self.home = Some(home);
    }

    /// Fleet mode: pods of `control` are declared there and placed in a member.
    pub fn declare_from(&mut self, control: Arc<str>) {
        self.control = Some(control);
    }

    /// Whether a Cluster's `tephra.io/member-scheduler-name` can name its copies' scheduler: a
    /// DNS-1123 subdomain, and not one of tephra's own names (the copy would look like a pod of
    /// tephra's to place). Otherwise `default-scheduler` is used, with a warning.
    fn member_scheduler_name_ok(&self, cluster: &str, name: &str) -> bool {
        let dns = tephra_api::names::is_dns1123_subdomain(name);
        let ours = self.ours.iter().any(|o| o == name);
        if !dns || ours {
            tracing::warn!(
                cluster,
                name,
                why = if ours {
                    "it is one of tephra's own scheduler names"
                } else {
                    "not a DNS-1123 subdomain"
                },
                "tephra.io/member-scheduler-name ignored; copies use default-scheduler"
            );
        }
        dns && !ours
    }

    /// What a copy of `job`'s pod in `cluster` needs when that member binds through its own
    /// kube-scheduler and tephra's extender (`bindingMode: Extender`); `None` for Direct.
    pub fn extender_plan(&self, cluster: &str, job: &str) -> Option<crate::writes::ExtenderPlan> {
        let (c, _) = self.members.get(cluster)?;
        let c = c.as_ref()?;
        if c.spec.binding_mode != Some(tephra_api::cluster::BindingMode::Extender) {
            return None;
        }
        let g = self.group_objects.get(job)?;
        let scheduler = c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(tephra_api::well_known::MEMBER_SCHEDULER_NAME))
            .filter(|s| self.member_scheduler_name_ok(cluster, s))
            .cloned()
            .unwrap_or_else(|| tephra_api::well_known::MEMBER_SCHEDULER.into());
        Some(crate::writes::ExtenderPlan {
            scheduler,
            min_member: g.spec.min_member.unwrap_or(1),
            min_task_member: g.spec.min_task_member.clone(),
        })
    }

    /// The endpoints of the members that come from Cluster objects.
    pub fn member_endpoints(&self) -> std::collections::BTreeMap<String, crate::clients::Endpoint> {
        self.members
            .iter()
            .filter_map(|(name, (obj, _))| {
                Some((name.clone(), crate::clients::Endpoint::of(obj.as_ref()?)?))
            })
            .collect()
    }

    /// Adds the local cluster as member `name`.
    pub fn add_local(&mut self, name: &str) -> Result<(), StateError> {
        self.members.insert(name.to_string(), (None, true));
        self.upsert_cluster(Cluster::named(name))
    }

    fn member_model(&self, name: &str) -> Option<Cluster> {
        let (obj, reachable) = self.members.get(name)?;
        Some(match obj {
            Some(c) => convert::cluster(c, *reachable),
            None => Cluster {
                ready: *reachable,
                ..Cluster::named(name)
            },
        })
    }

    /// Applies the policies again to every PodGroup of `namespace` (a policy there changed).
    fn reselect(&mut self, now: i64, namespace: &str) -> Result<(), StateError> {
        let groups: Vec<Arc<tephra_api::PodGroup>> = self
            .group_objects
            .iter()
            .filter(|(k, _)| k.split_once('/').is_some_and(|(ns, _)| ns == namespace))
            .map(|(_, g)| Arc::clone(g))
            .collect();
        let mut first = Ok(());
        for g in groups {
            let cluster = self
                .groups
                .get(&convert::key(&g.metadata))
                .map(|s| Arc::clone(&s.cluster))
                .unwrap_or_else(|| Arc::from(""));
            if let Err(e) = self.upsert(now, &cluster, Obj::PodGroup(Box::new((*g).clone())))
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    /// Records whether `cluster`'s watchers reach it; an unreachable member's nodes take no
    /// new pods, and its last known pods still count.
    fn set_reachable(&mut self, cluster: &str, reachable: bool) -> Result<(), StateError> {
        match self.members.get_mut(cluster) {
            Some((_, r)) if *r != reachable => *r = reachable,
            _ => return Ok(()),
        }
        if !reachable {
            tracing::warn!(cluster, "member unreachable: its nodes take no new pods");
        } else {
            tracing::info!(cluster, "member reachable again");
        }
        match self.member_model(cluster) {
            Some(c) => self.upsert_cluster(c),
            None => Ok(()),
        }
    }

    /// The core cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Adds or changes a member cluster.
    pub fn upsert_cluster(&mut self, cluster: Cluster) -> Result<(), StateError> {
        let name = cluster.name.clone();
        self.cache.apply(Event::ClusterUpsert(cluster))?;
        self.seed_declared(&name)
    }

    /// Whether a watcher of `kind` in `cluster` has delivered its first full list.
    pub fn is_synced(&self, cluster: &str, kind: Kind) -> bool {
        self.intake.is_synced(cluster, kind)
    }

    /// What the runtime knows of a PodGroup (`namespace/name`).
    pub fn group(&self, job: &str) -> Option<&GroupSeen> {
        self.groups.get(job)
    }

    /// Objects the cache refused, by `kind namespace/name`, with why.
    pub fn refused(&self) -> &HashMap<String, String> {
        self.intake.refused()
    }

    /// Pods bound by this scheduler that the watchers do not show bound yet.
    pub fn assumed(&self) -> usize {
        self.assumed.len()
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
        self.intake.synced(cluster, kind);
        if declared_pods {
            self.judge_copies();
        }
        errors
    }

    fn refuse(&mut self, what: String, e: StateError) -> StateError {
        self.intake.refuse(what, e.to_string());
        e
    }

    fn upsert(&mut self, now: i64, cluster: &Arc<str>, obj: Obj) -> Result<(), StateError> {
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
                return self.seed_declared(&name);
            }
            Obj::Pod(p) if self.control.as_deref() == Some(&**cluster) => {
                let key = convert::key(&p.metadata);
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
                self.declared.insert(key.clone(), kept);
                self.declared_changed(&key, p.metadata.uid.as_deref());
                // A copy in a member counts instead; an old copy (of a pod of the same name
                // before this one) is deleted first.
                if self.mirrored.contains(&key) || self.old_copy_left(&key) {
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
                    self.mirrored.insert(key.clone());
                    self.aggregate(&key, cluster, &p);
                }
                let Some(mut spec) = convert::pod(cluster, &p, &self.ours, self.cache.names_mut())?
                else {
                    // Another scheduler's pending pod: not ours, and it holds nothing yet.
                    if self.cache.world().task_id(&key).is_some() {
                        self.delete(cluster, Kind::Pod, &key)?;
                    }
                    return Ok(());
                };
                if spec.placement.is_some() {
                    self.assumed.remove(&key);
                } else if spec.status == TaskStatus::Pending
                    && let Some(at) = self.assumed.get(&key)
                {
                    // The bind is in flight: the pod keeps the node it was given.
                    spec.status = TaskStatus::Binding;
                    spec.placement = Some(at.clone());
                }
                Event::PodUpsert(spec)
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
                value: pc.value,
            },
            Obj::Pdb(p) => Event::PdbUpsert(convert::pdb(&p)?),
            Obj::Binding(rb) => return self.binding(now, &rb),
            Obj::Pvc(c) => {
                let claim = storage::claim(&c)?;
                let slot = format!("pvc:{}", claim.key());
                if self.control.as_deref() == Some(&**cluster) {
                    return self.declared_claim(&slot, Some(claims::DeclaredClaim::Volume(claim)));
                }
                self.member_claim(cluster, &slot, true)?;
                storage_event(cluster, StorageChange::ClaimUpsert(claim))
            }
            Obj::Pv(v) => storage_event(cluster, StorageChange::VolumeUpsert(storage::volume(&v)?)),
            Obj::StorageClass(c) => {
                storage_event(cluster, StorageChange::ClassUpsert(storage::class(&c)))
            }
            Obj::CsiNode(n) => storage_event(cluster, storage::attach_limits(&n)),
            Obj::DeviceClass(c) => dra_event(cluster, DraChange::ClassUpsert(dra::class(&c)?)),
            Obj::ResourceSlice(s) => dra_event(cluster, DraChange::SliceUpsert(dra::slice(&s))),
            Obj::ResourceClaim(c) => {
                let claim = dra::claim(&c)?;
                let slot = format!("rc:{}", claim.key());
                if self.control.as_deref() == Some(&**cluster) {
                    return self.declared_claim(&slot, Some(claims::DeclaredClaim::Device(claim)));
                }
                self.member_claim(cluster, &slot, true)?;
                dra_event(cluster, DraChange::ClaimUpsert(claim))
            }
        };
        Ok(self.cache.apply(event)?)
    }

    fn delete(&mut self, cluster: &str, kind: Kind, key: &str) -> Result<(), StateError> {
        let (namespace, name) = match key.split_once('/') {
            Some((ns, n)) => (ns.to_string(), n.to_string()),
            None => (String::new(), key.to_string()),
        };
        self.intake.forget_refusals(key);
        let event = match kind {
            Kind::Node => Event::NodeDelete {
                cluster: cluster.to_string(),
                name,
            },
            Kind::Pod if self.control.as_deref() == Some(cluster) => {
                self.declared.remove(key);
                self.aggregated.remove(key);
                self.declared_changed(key, None);
                if self.mirrored.contains(key) {
                    return Ok(());
                }
                self.assumed.remove(key);
                Event::PodDelete { namespace, name }
            }
            Kind::Pod => {
                let was_orphan = self.copy_gone(cluster, key);
                if self.ghost_gone(cluster, key)? {
                    // The old copy is gone: a new pod declared under its name may be placed.
                    if was_orphan && !self.mirrored.contains(key) && !self.old_copy_left(key) {
                        return self.declare_again(key);
                    }
                    return Ok(());
                }
                self.assumed.remove(key);
                self.mirrored.remove(key);
                if self.declared.contains_key(key) && self.aggregated.remove(key).is_some() {
                    self.status_writes.push(crate::writes::Write::DeclaredStatus {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        status: serde_json::json!({
                            "phase": "Pending",
                            "conditions": [{"type": "PodScheduled", "status": "False",
                                "reason": "MemberCopyGone",
                                "message": format!("its copy in member cluster {cluster} is gone; it waits to be placed again")}],
                        }),
                    });
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
            Kind::PodGroup => {
                self.group_objects.remove(key);
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
                    return self.declared_claim(&slot, None);
                }
                self.cache.apply(storage_event(
                    cluster,
                    StorageChange::ClaimDelete(key.to_string()),
                ))?;
                return self.member_claim(cluster, &slot, false);
            }
            Kind::Pv => storage_event(cluster, StorageChange::VolumeDelete(name)),
            Kind::StorageClass => storage_event(cluster, StorageChange::ClassDelete(name)),
            Kind::DeviceClass => dra_event(cluster, DraChange::ClassDelete(name)),
            Kind::ResourceSlice => dra_event(cluster, DraChange::SliceDelete(name)),
            Kind::ResourceClaim => {
                let slot = format!("rc:{key}");
                if self.control.as_deref() == Some(cluster) {
                    return self.declared_claim(&slot, None);
                }
                self.cache
                    .apply(dra_event(cluster, DraChange::ClaimDelete(key.to_string())))?;
                return self.member_claim(cluster, &slot, false);
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
