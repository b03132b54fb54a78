//! The scheduler's picture of the world between sessions: the core [`Cache`] fed by the
//! watchers' updates, plus what the runtime knows that the API servers do not show yet: binds
//! it issued whose pods still look pending (assumed, as kube-scheduler assumes a pod), and when
//! each PodGroup entered its phase; in fleet mode, the pods declared on the control plane, the
//! members and their reachability, and the PropagationPolicies. No IO: the run loop feeds it
//! updates and write results.
//!
//! `State` coordinates; its parts keep their own state and rules: the watchers' bookkeeping
//! (`intake.rs`), the pods declared on the control plane (`declared.rs`), the claims declared
//! there (`claims.rs`), the bindings' per-cluster status (`aggregated.rs`) and pods waiting for
//! a PodGroup that does not exist (`strays.rs`), HyperNodes' status (`hypernodes.rs`), and how
//! long pods run, for expected starts (`durations.rs`). `State` itself is in three files: this one
//! (its fields, what it tells the run loop, and what follows a session, in the core's words:
//! [`Cache::take`]), `objects.rs` (each watched object taken in, kind by kind) and `copies.rs`
//! (members' copies that count for no job: orphans and failover ghosts, graceful eviction).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tephra_api::Cluster as ApiCluster;
use tephra_scheduler::cache::{Cache, CacheError, Event};
use tephra_scheduler::model::{Cluster, GroupPhase, JobPolicy, TaskStatus};
use tephra_scheduler::{Decisions, SchedulerConfig, Step};

mod aggregated;
mod claims;

mod copies;
mod declared;
pub mod durations;
pub mod held;
mod hypernodes;
mod incarnations;
mod intake;
mod objects;

mod strays;
mod unschedulable;

use crate::convert::{self, ConvertError};
use crate::observed::{Kind, Obj};
use crate::writes::{DeclaredPod, GroupSeen};

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
    /// Pods declared on the control plane, their members' copies and what was reported.
    declared: declared::DeclaredPods,
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
    /// Kubernetes PodGroups (the Workload API front end), by `namespace/name`: their decided
    /// status and observed conditions. A key here is a gang of that front end.
    kube_groups: HashMap<String, crate::workload::KubeGroup>,
    /// The clusters each job (`namespace/podgroup`) is being evicted from (its binding's
    /// graceful-eviction tasks).
    evicting: HashMap<String, BTreeSet<String>>,
    /// Copies set aside in a cluster a job is evicted from: (cluster, pod key) → ghost name
    /// and the job.
    ghosts: HashMap<(String, String), (String, String)>,
    /// The ResourceBindings, by job.
    bindings: HashMap<String, Arc<tephra_api::ResourceBinding>>,
    /// The PodGroup each job's binding was last written for.
    incarnations: incarnations::Incarnations,
    /// The bindings' aggregated statuses.
    aggregation: aggregated::Aggregation,
    /// The node each pending pod is nominated to, as last written: pod key → (cluster, node).
    nominated: HashMap<String, (String, String)>,
    /// When the deletion of each set-aside copy was last asked for (ms).
    purged: HashMap<(String, String), i64>,
    /// Claims declared on the control plane, and the members that have their own copies.
    declared_claims: claims::Declared,
    /// Members' copies of declared pods, and those whose declared pod is gone.
    copies: copies::Copies,
    /// Pods that name a PodGroup that does not exist.
    strays: strays::Strays,
    /// What each pending pod was last told about why it waits.
    told: unschedulable::Told,
    hypernodes: hypernodes::HyperNodes,
    /// How long pods run, for the expected-start forecast.
    durations: durations::Durations,
    /// Pods held back until the kinds they depend on are listed.
    held: held::Held,
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
            declared: declared::DeclaredPods::default(),
            members: HashMap::new(),
            recounted: Vec::new(),
            partial: HashMap::new(),
            policies: std::collections::BTreeMap::new(),
            group_objects: HashMap::new(),
            kube_groups: HashMap::new(),
            evicting: HashMap::new(),
            ghosts: HashMap::new(),
            bindings: HashMap::new(),
            incarnations: incarnations::Incarnations::default(),
            aggregation: aggregated::Aggregation::default(),
            purged: HashMap::new(),
            nominated: HashMap::new(),
            declared_claims: claims::Declared::default(),
            copies: copies::Copies::default(),
            strays: strays::Strays::default(),
            told: unschedulable::Told::default(),
            hypernodes: hypernodes::HyperNodes::default(),
            durations: durations::Durations::default(),
            held: held::Held::default(),
        }
    }

    /// Sessions may run before every kind is listed (one cluster, `--members local`): a
    /// pending pod whose placement reads a kind not listed yet in its cluster (volumes for its
    /// claims, DRA objects for its device claims) is held back behind a gate of tephra's own
    /// until that kind is listed there ([`held`]); a gang with a `networkTopology` waits in a
    /// cluster until its HyperNodes are listed there (the PodGroup may come after its pods, so
    /// this is the core's, by job, not a gate on pods). Off by default: a runner that turns it
    /// on starts sessions once the other kinds are listed.
    pub fn defer_listing(&mut self) {
        self.held.on = true;
        if let Err(e) = self.cache.apply(Event::HyperNodesDeferred) {
            tracing::warn!(error = %e, "HyperNodes not deferred");
        }
    }

    /// How many pods wait for a kind to be listed before they may be placed.
    pub fn held_back(&self) -> usize {
        self.held.len()
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

    /// Discovers HyperNodes from these node labels too (lowest tier first), in every member.
    pub fn discover_topology_from(&mut self, labels: Vec<String>) {
        self.cache.discover_topology_from(labels);
    }

    /// The fleet's tiers above its clusters, lowest first (`--fleet-tiers`): `region`, `zone`,
    /// `provider` (the Cluster's fields) or a cluster label.
    pub fn set_fleet_tiers(&mut self, keys: &[String]) {
        self.cache.set_fleet_tiers(
            keys.iter()
                .map(|k| tephra_scheduler::model::topology::FleetKey::parse(k))
                .collect(),
        );
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
    pub fn member_endpoints(
        &self,
    ) -> std::collections::BTreeMap<String, crate::endpoint::Endpoint> {
        self.members
            .iter()
            .filter_map(|(name, (obj, _))| {
                Some((name.clone(), crate::endpoint::Endpoint::of(obj.as_ref()?)?))
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

    /// The Volcano Job PodGroup `job` (`namespace/name`) was made for: its controller owner
    /// of that kind.
    pub fn owner_job(&self, job: &str) -> Option<String> {
        let g = self.group_objects.get(job)?;
        g.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| {
                o.kind == "Job"
                    && o.api_version.starts_with("batch.volcano.sh/")
                    && o.controller == Some(true)
            })
            .map(|o| o.name.clone())
    }

    /// Each PodGroup made for a Volcano Job (`namespace/podgroup`), with the Job's key
    /// (`namespace/job`): the names users gave.
    pub fn user_keys(&self) -> std::collections::HashMap<String, String> {
        self.group_objects
            .keys()
            .filter_map(|k| {
                let job = self.owner_job(k)?;
                let ns = k.split_once('/').map_or("default", |(ns, _)| ns);
                Some((k.clone(), format!("{ns}/{job}")))
            })
            .collect()
    }

    /// What the web UI shows of the fleet, as this replica (`role`) holds it.
    pub fn view(&self, role: &str) -> crate::view::FleetView {
        let condition = |job: &str| {
            let g = self.group_objects.get(job)?;
            let c = g.status.as_ref()?.conditions.iter().find(|c| {
                c.type_ == tephra_api::scheduling::PodGroupConditionType::Unschedulable
                    && c.status == "True"
            })?;
            Some((c.reason.clone(), c.message.clone()))
        };
        let evicting = |job: &str| {
            self.evicting
                .get(job)
                .map(|c| c.iter().cloned().collect())
                .unwrap_or_default()
        };
        let owner_job = |job: &str| self.owner_job(job);
        let made_by = |job: &str| {
            let g = self.group_objects.get(job)?;
            let flow = g
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(tephra_api::flow::CREATED_BY_FLOW))
                .map(|v| {
                    format!(
                        "JobFlow {}",
                        v.split_once('.').map_or(v.as_str(), |(_, n)| n)
                    )
                });
            let cron = || {
                g.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(tephra_api::well_known::CREATED_BY_CRONJOB))
                    .map(|n| format!("CronJob {n}"))
            };
            flow.or_else(cron)
        };
        let extra = crate::view::Extra {
            condition: &condition,
            evicting: &evicting,
            job: &owner_job,
            owner: &made_by,
        };
        crate::view::build(self.cache.world(), role, &extra)
    }

    /// The HyperNode status writes due (`status.nodeCount` as the cache resolves it).
    pub fn hypernode_statuses(&mut self) -> Vec<crate::writes::Write> {
        self.hypernodes.writes(self.cache.world())
    }

    /// The writes that tell the pods that have waited `strays::GRACE_MS` for a PodGroup
    /// that does not exist, once each.
    pub fn stray_pods(&mut self, now_ms: i64) -> Vec<crate::writes::Write> {
        self.strays.writes(self.cache.world(), now_ms)
    }

    /// The `PodScheduled` False condition and `FailedScheduling` Event for each pending pod of
    /// a job `d` could not place, once per pod and reason (`unschedulable.rs`).
    pub fn unschedulable_pods(&mut self, d: &Decisions) -> Vec<crate::writes::Write> {
        let groups = &self.groups;
        let assumed = &self.assumed;
        self.told.writes(
            self.cache.world(),
            d,
            &|job| groups.get(job).cloned(),
            &|pod| assumed.contains_key(pod),
        )
    }

    /// The ResourceBinding status writes due for the jobs whose pods or binding changed since
    /// the last call, stamped `now` where a condition changes.
    pub fn aggregated_statuses(
        &mut self,
        now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    ) -> Vec<crate::writes::Write> {
        self.aggregation
            .statuses(self.cache.world(), &self.bindings, now)
    }

    /// The declared pod `key` (fleet mode), unless a member already has it.
    pub fn declared(&self, key: &str) -> Option<&DeclaredPod> {
        self.declared.unplaced(key)
    }

    /// The status writes for declared pods that [`State::apply`] found due.
    pub fn take_status_writes(&mut self) -> Vec<crate::writes::Write> {
        std::mem::take(&mut self.declared.status_writes)
    }

    /// How long pods run, as far as known.
    pub fn durations(&self) -> &durations::Durations {
        &self.durations
    }

    /// Every PodGroup (`namespace/name`) with its annotation `key`, if it has it, and the
    /// cluster that holds it.
    pub fn group_annotations<'a>(
        &'a self,
        key: &'a str,
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>, &'a Arc<str>)> + 'a {
        self.group_objects.iter().filter_map(move |(job, g)| {
            let cluster = &self.groups.get(job)?.cluster;
            let value = g
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str);
            Some((job.as_str(), value, cluster))
        })
    }

    /// The core cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Adds or changes a member cluster.
    pub fn upsert_cluster(&mut self, cluster: Cluster) -> Result<(), StateError> {
        let name = cluster.name.clone();
        self.cache.apply(Event::ClusterUpsert(cluster))?;
        self.declared_claims.seed(&mut self.cache, &name)
    }

    /// Whether a watcher of `kind` in `cluster` has delivered its first full list.
    pub fn is_synced(&self, cluster: &str, kind: Kind) -> bool {
        self.intake.is_synced(cluster, kind)
    }

    /// Whether the PodGroup `namespace/name` is Kubernetes' own (the Workload API front end).
    pub fn is_kube_group(&self, job: &str) -> bool {
        self.kube_groups.contains_key(job)
    }

    /// Whether any Kubernetes PodGroup is known (else no write needs looking at for one).
    pub fn has_kube_groups(&self) -> bool {
        !self.kube_groups.is_empty()
    }

    /// A status decided for the Kubernetes PodGroup `job`: Kubernetes has no field for it, so
    /// it is kept here and the group is read again with it (as the watch's echo of a Volcano
    /// PodGroup's status would be); what the API is told is the condition it implies, when it
    /// implies a new one (see `crate::workload`).
    pub fn kube_group_decided(
        &mut self,
        now: i64,
        job: &str,
        status: tephra_api::PodGroupStatus,
        stamp: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    ) -> Option<crate::writes::Write> {
        // A PodGroup none of whose pods is tephra's is another scheduler's (kube-scheduler's
        // own gangs): its condition is theirs to write.
        let seen = self.kube_groups.get_mut(job)?;
        let ours = seen.claimed;
        let condition = crate::workload::condition(&status, seen, stamp).filter(|_| ours);
        seen.decided = Some(status.clone());
        let conditions = condition.map(|c| {
            let all = crate::workload::with_condition(seen, c);
            // Remembered as written, so that the same condition is not written again before
            // the watch shows it.
            seen.conditions.clone_from(&all);
            all
        });
        let cluster = self.groups.get(job).map(|g| Arc::clone(&g.cluster));
        if let (Some(g), Some(cluster)) = (self.group_objects.get(job), &cluster) {
            let mut g = (**g).clone();
            g.status = Some(status);
            if let Err(e) = self.upsert(now, cluster, crate::observed::Obj::PodGroup(Box::new(g))) {
                tracing::warn!(job, error = %e, "a Kubernetes PodGroup's decided status not kept");
            }
        }
        let (namespace, name) = job.split_once('/')?;
        Some(crate::writes::Write::KubeGroupConditions {
            cluster: cluster?.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            conditions: conditions?,
        })
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
}

/// What follows a session: its decisions taken into the cache at once (binds assumed,
/// evictions releasing, new phases), counts to report, bind failures and the deadline of gangs
/// they leave short, nominations, and the ResourceBindings of placed jobs.
impl State {
    /// A ResourceBinding write for every job that got binds in `d`: every placed task of the
    /// job, with its cluster and node; one written for an earlier PodGroup of the job is
    /// replaced (see `incarnations.rs`).
    pub fn bindings(&mut self, d: &Decisions) -> Vec<crate::writes::Write> {
        let world = self.cache.world();
        let jobs: BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
        let mut out = Vec::new();
        for job in jobs {
            let Some(j) = world.job_id(job).and_then(|id| world.jobs.get(id)) else {
                continue;
            };
            if j.implicit {
                continue;
            }
            let placed: Vec<(String, String, String, String)> = j
                .tasks
                .iter()
                .filter_map(|&t| world.tasks.get(t))
                .filter_map(|t| {
                    let (c, n) = t.spec.placement.clone()?;
                    Some((t.key.clone(), t.spec.shape.role.clone(), c, n))
                })
                .collect();
            let uid = self.groups.get(job).and_then(|g| g.uid.clone());
            let stored = self
                .bindings
                .get(job)
                .and_then(|rb| rb.metadata.owner_references.as_ref()?.first())
                .map(|r| r.uid.as_str());
            let replaces = uid
                .as_deref()
                .is_some_and(|uid| self.incarnations.write(job, uid, stored));
            let kube = self.is_kube_group(job);
            out.push(crate::writes::resource_binding(
                job, uid, replaces, &placed, kube,
            ));
        }
        let groups = &self.groups;
        self.incarnations.sweep(&|job| groups.contains_key(job));
        out
    }

    /// `status.nominatedNodeName` writes for what `d` reserves (pods pipelined on room being
    /// freed, and room held for gangs): set when a pod's nomination is new or moved, cleared
    /// when it lapses while the pod still waits, and once the pod is bound. Pods that no member
    /// holds yet (declared on the control plane) are not nominated.
    pub fn nominations(&mut self, d: &Decisions) -> Vec<crate::writes::Write> {
        use std::collections::HashMap;
        let now: HashMap<&str, (&str, &str)> = d
            .pipelined
            .iter()
            .chain(d.nominations())
            .filter(|b| {
                !self.declared.pods.contains_key(&b.task)
                    || self.declared.mirrored.contains(&b.task)
            })
            .map(|b| (b.task.as_str(), (b.cluster.as_str(), b.node.as_str())))
            .collect();
        let split = |key: &str| {
            let (ns, name) = key.split_once('/').unwrap_or(("default", key));
            (ns.to_string(), name.to_string())
        };
        let mut out = Vec::new();
        for (key, (cluster, node)) in &now {
            let fresh = (cluster.to_string(), node.to_string());
            if self.nominated.get(*key) == Some(&fresh) {
                continue;
            }
            let (namespace, name) = split(key);
            out.push(crate::writes::Write::Nominate {
                cluster: fresh.0.clone(),
                namespace,
                name,
                node: Some(fresh.1.clone()),
            });
            self.nominated.insert(key.to_string(), fresh);
        }
        let lapsed: Vec<String> = self
            .nominated
            .keys()
            .filter(|k| !now.contains_key(k.as_str()))
            .cloned()
            .collect();
        for key in lapsed {
            let Some((cluster, _)) = self.nominated.remove(&key) else {
                continue;
            };
            if self.task(&key).is_none() {
                continue;
            }
            let (namespace, name) = split(&key);
            out.push(crate::writes::Write::Nominate {
                cluster,
                namespace,
                name,
                node: None,
            });
        }
        out
    }

    /// Runs one session at `now` and takes its decisions into the cache at once, as the
    /// writes will make them true ([`tephra_scheduler::Cache::take`]): bound pods hold their
    /// nodes (`Binding`, assumed until the watchers show them bound), evicted pods are
    /// releasing, PodGroups are in their new phase.
    pub fn session(
        &mut self,
        config: Arc<SchedulerConfig>,
        now: i64,
        id: u64,
        observe: &mut dyn FnMut(Step<'_>, bool),
    ) -> Decisions {
        let d =
            tephra_scheduler::schedule_observed(self.cache.snapshot(), config, now, id, observe);
        self.recount();
        // A refusal leaves the cache as observed; the next session decides again.
        match self.cache.take(&d, TaskStatus::Binding) {
            Ok(taken) => {
                for (job, phase) in taken.phases {
                    self.phases.insert(job, (phase, now));
                }
            }
            Err(e) => tracing::warn!(error = %e, "a session's decisions not taken into the cache"),
        }
        for b in &d.binds {
            self.assumed
                .insert(b.task.clone(), (b.cluster.clone(), b.node.clone()));
        }
        d
    }

    /// Jobs whose pods changed since the last session, with their running, succeeded and
    /// failed counts where they differ from what their PodGroup's status says.
    fn recount(&mut self) {
        let world = self.cache.world();
        let mut fresh = Vec::new();
        for &id in &world.changed_jobs {
            let Some(job) = world.jobs.get(id) else {
                continue;
            };
            if self.bindings.contains_key(&job.key) {
                self.aggregation.touch(job.key.clone());
            }
            let Some(seen) = self.groups.get(&job.key) else {
                continue;
            };
            let mut counts = [0i32; 3];
            for t in job.tasks.iter().filter_map(|&t| world.tasks.get(t)) {
                match t.spec.status {
                    TaskStatus::Running => counts[0] += 1,
                    TaskStatus::Succeeded => counts[1] += 1,
                    TaskStatus::Failed => counts[2] += 1,
                    _ => {}
                }
            }
            let s = &seen.status;
            if counts != [s.running, s.succeeded, s.failed] {
                fresh.push((job.key.clone(), counts));
            }
        }
        self.recounted = fresh;
    }

    /// The counts [`State::session`] found changed, for the planner.
    pub fn recounted(&self) -> &[(String, [i32; 3])] {
        &self.recounted
    }

    fn task(&self, key: &str) -> Option<tephra_scheduler::model::PodSpec> {
        self.cache.task(key).cloned()
    }

    fn set_task(&mut self, key: &str, status: TaskStatus, placement: Option<(String, String)>) {
        // The pod is known to the cache, so the upsert cannot name an unknown cluster.
        let _ = self.cache.set_task(key, status, placement);
    }

    /// The scheduler configuration changed: jobs set aside as never placeable are tried again.
    pub fn config_changed(&mut self) {
        self.cache.unpark_all();
    }

    /// A bind failed at `now`: the pod is pending again, for the next session to place, the
    /// allocations its claims were assumed to be given are free again, and its gang is watched until it is whole again or its deadline passes.
    pub fn bind_failed(&mut self, pod: &str, now: i64) {
        // What its claims were to be allocated was not written, or the watchers will say so.
        if let Err(e) = self.cache.unassume_claims(pod) {
            tracing::warn!(pod, error = %e, "a failed bind's claims not given back in the cache");
        }
        if self.assumed.remove(pod).is_some()
            && let Some(t) = self.task(pod)
            && t.status == TaskStatus::Binding
        {
            self.set_task(pod, TaskStatus::Pending, None);
            if let Some(group) = &t.group {
                self.partial
                    .entry(format!("{}/{group}", t.namespace))
                    .or_insert(now);
            }
        }
    }

    /// Gangs left partly bound by failed binds for longer than `deadline` seconds: each job
    /// with the pods that hold a node, to evict whole so that the gang is placed again. A gang
    /// that reached its minimum again, or is gone, is forgotten.
    pub fn expired_gangs(
        &mut self,
        now: i64,
        deadline: i64,
    ) -> Vec<(String, Vec<(String, String)>)> {
        let world = self.cache.world();
        let mut expired = Vec::new();
        self.partial.retain(|job, since| {
            let Some(j) = world.job_id(job).and_then(|id| world.jobs.get(id)) else {
                return false;
            };
            if j.tally.ready >= i32::try_from(j.min_member()).unwrap_or(i32::MAX) {
                return false;
            }
            if now - *since < deadline {
                return true;
            }
            let held: Vec<(String, String)> = j
                .tasks
                .iter()
                .filter_map(|&t| world.tasks.get(t))
                .filter(|t| {
                    matches!(
                        t.spec.status,
                        TaskStatus::Binding | TaskStatus::Bound | TaskStatus::Running
                    )
                })
                .filter_map(|t| Some((t.key.clone(), t.spec.placement.clone()?.0)))
                .collect();
            expired.push((job.clone(), held));
            false
        });
        for (_, held) in &expired {
            for (task, _) in held {
                if let Some(t) = self.task(task) {
                    // Binding too: the gang is evicted whole, bound or not yet.
                    let at = t.placement.clone();
                    self.set_task(task, TaskStatus::Releasing, at);
                }
            }
        }
        expired
    }
}
