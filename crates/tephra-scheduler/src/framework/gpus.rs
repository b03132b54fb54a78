//! Shared GPUs in a session, as Volcano's `deviceshare` plugin places vGPU pods: which of a
//! node's registered GPUs ([`Gpu`]) each container of a pod takes ([`GpuState::choose`]), how
//! much of each is in use, and what the session gave each pod it placed, which becomes the
//! annotations written on the pod as it binds ([`GpuState::prebind`]).
//!
//! A GPU is in use by every pod holding its node that was given it ([`PodSpec::gpus`]): a slot
//! of its split count, its memory, its cores. A container takes `number` different GPUs, each
//! with a free slot, the memory it asks (the whole card when it names none) and its cores
//! (100: the card alone); the pod's type, UUID and mode annotations, the GPU's health and the
//! PodGroup spread policy rule GPUs out. GPUs are tried in the configured order: binpack (most
//! memory used first), spread (fewest pods first), or, as Volcano does unconfigured, the last
//! registered first. A placement pipelined onto room being released may use the GPUs of pods
//! evicted this session; a placement on free room may not.
//!
//! With the node lock (`deviceshare.NodeLockEnable`), binding a vGPU pod takes the node's lock
//! until the device plugin has allocated that pod's GPUs: a node whose lock stands (taken less
//! than [`LOCK_EXPIRY`] ago) takes no vGPU pod, and a session places at most one vGPU pod on
//! each node. The device plugin tells the pods bound to a node apart only by their GPU count and
//! the second they were placed; one pod at a time is what makes its choice the scheduler's.
//!
//! [`PodSpec::gpus`]: crate::model::PodSpec::gpus

use std::sync::Arc;

use super::fit::{GpuUnfit, Unfit};
use crate::cache::Snapshot;
use crate::hash::HashMap;
use crate::model::mig;
use crate::model::vgpu::{FULL_CORES, Gpu, GpuAsk, Grant, Grants, LOCK_EXPIRY};
use crate::model::{Id, Labels, Task, TaskShape};

/// In which order a node's GPUs are tried (`deviceshare.SchedulePolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// The last registered GPU first (Volcano without a policy).
    #[default]
    Unset,
    /// The GPU with the most memory in use first: slices pack onto few cards.
    Binpack,
    /// The GPU with the fewest pods first: slices spread over the cards.
    Spread,
}

/// How the session shares GPUs: the `deviceshare` plugin's arguments.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuConfig {
    /// `deviceshare.VGPUEnable`: pods that ask for vGPU resources are placed at all.
    pub enabled: bool,
    /// `deviceshare.SchedulePolicy`.
    pub policy: Policy,
    /// `deviceshare.ScheduleWeight`: the node score is the policy's score times this (0: off).
    pub weight: f64,
    /// `deviceshare.NodeLockEnable`: binding a vGPU pod takes its node's lock.
    pub node_lock: bool,
    /// `deviceshare.GPUSharingEnable`: gpushare pods that limit `volcano.sh/gpu-memory` are
    /// placed at all.
    pub share_memory: bool,
    /// `deviceshare.GPUNumberEnable`: gpushare pods that limit `volcano.sh/gpu-number` are.
    pub share_number: bool,
    /// `deviceshare.GPUExclusiveRules`: each a set of labels; pods carrying all of one rule's
    /// labels never share a GPU with another pod matching that rule.
    pub exclusive: Arc<[Labels]>,
}

impl GpuConfig {
    /// The exclusion rules a pod with `labels` matches, by index.
    fn rules_of(&self, labels: &Labels) -> Vec<usize> {
        self.exclusive
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.iter().all(|(k, v)| labels.get(k) == Some(v)))
            .map(|(i, _)| i)
            .collect()
    }
}

/// Pods, MiB and cores on one GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Amount {
    pods: u32,
    memory: u64,
    cores: u32,
}

impl Amount {
    /// Adds (`sign` 1) or takes away (-1) one grant.
    fn step(&mut self, g: &Grant, sign: i64) {
        if sign > 0 {
            self.pods += 1;
            self.memory += g.memory;
            self.cores += g.cores;
        } else {
            self.pods = self.pods.saturating_sub(1);
            self.memory = self.memory.saturating_sub(g.memory);
            self.cores = self.cores.saturating_sub(g.cores);
        }
    }
}

/// What is in use of one GPU.
#[derive(Clone, Debug, Default, PartialEq)]
struct Use {
    held: Amount,
    /// The part held by pods being evicted.
    releasing: Amount,
    /// The jobs of the pods on it (for the PodGroup spread policy).
    jobs: Vec<Id>,
    /// Its MIG instances in use (dynamic MIG): (group, position).
    mig: Vec<(String, u32)>,
    /// The part of `mig` held by pods being evicted.
    mig_releasing: Vec<(String, u32)>,
    /// The exclusion rules its pods match, one entry per pod and rule.
    rules: Vec<usize>,
    /// The part of `rules` of pods being evicted.
    rules_releasing: Vec<usize>,
}

/// Adds (`sign` 1) or takes away (-1) one pod's exclusion rules.
fn step_rules(list: &mut Vec<usize>, rules: &[usize], sign: i64) {
    for r in rules {
        if sign > 0 {
            list.push(*r);
        } else if let Some(i) = list.iter().position(|x| x == r) {
            list.swap_remove(i);
        }
    }
}

/// Adds (`sign` 1) or takes away (-1) the MIG instance `grant` names, if it names one.
fn step_mig(list: &mut Vec<(String, u32)>, grant: &Grant, sign: i64) {
    let Some((_, group, position)) = mig::parse_instance_id(&grant.uuid) else {
        return;
    };
    if sign > 0 {
        list.push((group.to_string(), position));
    } else if let Some(i) = list.iter().position(|(g, p)| g == group && *p == position) {
        list.swap_remove(i);
    }
}

impl Use {
    /// Whether a pod matching one of `rules` must keep off this GPU: another pod on it
    /// matches one of them (one that is leaving does not count, with `future`).
    fn excludes(&self, rules: &[usize], future: bool) -> bool {
        rules.iter().any(|r| {
            let on = self.rules.iter().filter(|x| *x == r).count();
            let leaving = if future {
                self.rules_releasing.iter().filter(|x| *x == r).count()
            } else {
                0
            };
            on > leaving
        })
    }

    /// The MIG instances in use, or in use once releasing pods are gone (`future`).
    fn mig_seen(&self, future: bool) -> Vec<(String, u32)> {
        let mut out = self.mig.clone();
        if future {
            for r in &self.mig_releasing {
                if let Some(i) = out.iter().position(|x| x == r) {
                    out.swap_remove(i);
                }
            }
        }
        out
    }

    /// (pods, memory, cores) in use, or in use once releasing pods are gone (`future`).
    fn seen(&self, future: bool) -> (u32, u64, u32) {
        let (h, r) = (self.held, self.releasing);
        if future {
            (
                h.pods.saturating_sub(r.pods),
                h.memory.saturating_sub(r.memory),
                h.cores.saturating_sub(r.cores),
            )
        } else {
            (h.pods, h.memory, h.cores)
        }
    }
}

/// Shared GPUs in one session.
#[derive(Clone, Debug, Default)]
pub struct GpuState {
    /// How GPUs are shared.
    pub config: GpuConfig,
    /// What is in use, per node slot that has any use (in its GPUs' order).
    used: HashMap<Id, Vec<Use>>,
    /// What the session gave each pod it placed, with the node.
    given: HashMap<Id, (Id, Arc<Grants>)>,
    /// How many of those pods each node has.
    given_on: HashMap<Id, u32>,
    /// The session's time (Unix seconds): whether a node lock still stands.
    pub now: i64,
}

/// The position of the GPU a grant names among `gpus`: its UUID, or (a MIG slice) a UUID that
/// contains the GPU's.
fn position(gpus: &[Gpu], grant: &Grant) -> Option<usize> {
    let exact = gpus.iter().position(|g| g.uuid == grant.uuid);
    if exact.is_some() || crate::model::vgpu::share_index(&grant.uuid).is_some() {
        return exact;
    }
    gpus.iter().position(|g| grant.uuid.contains(&g.uuid))
}

impl GpuState {
    /// Nothing in use, shared as `config` says.
    pub fn with(config: GpuConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The pods holding shared GPUs as a session opens on `snap`: each with its node, its
    /// GPUs, and whether it is leaving.
    fn holders(snap: &Snapshot) -> impl Iterator<Item = (&Task, Id, &Arc<Grants>, bool)> {
        snap.gpu_users.iter().filter_map(|&task| {
            let t = snap.tasks.get(task)?;
            let (node, grants) = (t.node?, t.spec.gpus.as_ref()?);
            let releasing = t.spec.status == crate::model::TaskStatus::Releasing;
            t.spec
                .status
                .holds_node()
                .then_some((t, node, grants, releasing))
        })
    }

    /// The GPUs in use as a session opens on `snap`: those given to every pod holding a node.
    pub fn open(snap: &Snapshot) -> Self {
        let mut s = Self::default();
        for (t, node, grants, releasing) in Self::holders(snap) {
            s.each_use(snap, node, grants, |u, g| {
                u.held.step(g, 1);
                step_mig(&mut u.mig, g, 1);
                u.jobs.push(t.job);
                if releasing {
                    u.releasing.step(g, 1);
                    step_mig(&mut u.mig_releasing, g, 1);
                }
            });
        }
        s
    }

    /// Sets how GPUs are shared, counting the exclusion rules of the pods holding GPUs as the
    /// session opens on `snap`.
    pub fn configure(&mut self, snap: &Snapshot, config: GpuConfig) {
        self.config = config;
        if self.config.exclusive.is_empty() {
            return;
        }
        for (t, node, grants, releasing) in Self::holders(snap) {
            let rules = self.config.rules_of(&t.spec.shape.rules.labels);
            self.each_gpu(snap, node, grants, |u| {
                step_rules(&mut u.rules, &rules, 1);
                if releasing {
                    step_rules(&mut u.rules_releasing, &rules, 1);
                }
            });
        }
    }

    /// Calls `f` once with the use of each GPU of `node` that `grants` name (however many of
    /// the pod's containers share it).
    fn each_gpu(
        &mut self,
        snap: &Snapshot,
        node: Id,
        grants: &Grants,
        mut f: impl FnMut(&mut Use),
    ) {
        let Some(n) = snap.nodes.get(node) else {
            return;
        };
        let mut seen: Vec<usize> = grants
            .all()
            .filter_map(|g| position(&n.spec.gpus, g))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        if seen.is_empty() {
            return;
        }
        let used = self
            .used
            .entry(node)
            .or_insert_with(|| vec![Use::default(); n.spec.gpus.len()]);
        for i in seen {
            if let Some(u) = used.get_mut(i) {
                f(u);
            }
        }
    }

    /// Calls `f` with the use of each GPU of `node` that `grants` name.
    fn each_use(
        &mut self,
        snap: &Snapshot,
        node: Id,
        grants: &Grants,
        mut f: impl FnMut(&mut Use, &Grant),
    ) {
        let Some(n) = snap.nodes.get(node) else {
            return;
        };
        let gpus = &n.spec.gpus;
        if gpus.is_empty() {
            return;
        }
        let used = self
            .used
            .entry(node)
            .or_insert_with(|| vec![Use::default(); gpus.len()]);
        for g in grants.all() {
            if let Some(u) = position(gpus, g).and_then(|i| used.get_mut(i)) {
                f(u, g);
            }
        }
    }

    /// The GPUs a pod of `ask` (of `job`, matching the exclusion `rules`) would take on
    /// `node`, and the policy's score for them; `None` when they do not fit. With `future`,
    /// what pods evicted this session hold counts as free; with `empty`, nothing counts as
    /// used. A GPU another pod matching one of `rules` holds is not taken. On a GPU in dynamic MIG mode
    /// whose model has geometries, a container takes a MIG instance (`model::mig`) instead of a
    /// slice.
    pub fn choose(
        &self,
        snap: &Snapshot,
        ask: &GpuAsk,
        (job, rules): (Option<Id>, &[usize]),
        node: Id,
        future: bool,
        empty: bool,
    ) -> Option<(Grants, f64)> {
        let gpus = &snap.nodes.get(node)?.spec.gpus;
        let used = self.used.get(&node).filter(|_| !empty);
        let mut seen: Vec<(u32, u64, u32)> = (0..gpus.len())
            .map(|i| {
                used.and_then(|u| u.get(i))
                    .map_or((0, 0, 0), |u| u.seen(future))
            })
            .collect();
        // Each MIG GPU's geometries and the instances in use on it. Until the device
        // configuration is read, a MIG GPU takes nothing; without geometries for its model it
        // is shared as any other.
        let geometries: Vec<Option<&[mig::MigGeometry]>> = gpus
            .iter()
            .map(|g| match (&snap.mig, g.mig) {
                (_, false) => None,
                (Some(known), true) => known.of(&g.model),
                (None, true) => Some(&[][..]),
            })
            .collect();
        let mut instances: Vec<Vec<(String, u32)>> = (0..gpus.len())
            .map(|i| {
                used.and_then(|u| u.get(i))
                    .map_or_else(Vec::new, |u| u.mig_seen(future))
            })
            .collect();
        let mut out = Grants(vec![Vec::new(); ask.containers as usize]);
        let mut score = 0.0;
        for c in &ask.asks {
            if c.number as usize > gpus.len() {
                return None;
            }
            let mut order: Vec<usize> = (0..gpus.len()).collect();
            // gpushare takes the card of the lowest index that has room, whatever the policy.
            match self.config.policy {
                _ if ask.share => {}
                Policy::Unset => order.reverse(),
                Policy::Binpack => order.sort_by_key(|&i| std::cmp::Reverse(seen[i].1)),
                Policy::Spread => order.sort_by_key(|&i| seen[i].0),
            }
            let mut taken = 0;
            for i in order {
                if taken == c.number {
                    break;
                }
                let g = &gpus[i];
                let (pods, memory, cores) = seen[i];
                let mine = |jobs: &[Id]| job.is_some_and(|j| jobs.contains(&j));
                let spread_out =
                    ask.group_spread && used.and_then(|u| u.get(i)).is_some_and(|u| mine(&u.jobs));
                let excluded = !rules.is_empty()
                    && used
                        .and_then(|u| u.get(i))
                        .is_some_and(|u| u.excludes(rules, future));
                let is_mig = geometries[i].is_some();
                let mode_ok = ask
                    .mode
                    .as_deref()
                    .is_none_or(|m| (m == mig::MODE) == is_mig);
                let want = c.memory_on(g);
                if !mode_ok
                    || !ask.accepts(g)
                    || pods >= g.split
                    || spread_out
                    || excluded
                    || cores + c.cores > FULL_CORES
                    || (c.cores == FULL_CORES && pods > 0)
                    || (cores == FULL_CORES && c.cores == 0)
                {
                    continue;
                }
                // The memory it takes: a MIG instance's, or what it asks.
                let (uuid, took) = match geometries[i] {
                    Some(geometries) => {
                        let Some((group, position, instance_memory)) =
                            mig::pick(geometries, &instances[i], want)
                        else {
                            continue;
                        };
                        instances[i].push((group.clone(), position));
                        (mig::instance_id(&g.uuid, &group, position), instance_memory)
                    }
                    None => {
                        if g.memory.saturating_sub(memory) < want {
                            continue;
                        }
                        (g.uuid.clone(), want)
                    }
                };
                let idle_before = pods == 0;
                seen[i] = (pods + 1, memory + took, cores + c.cores);
                score += match self.config.policy {
                    Policy::Binpack if g.memory > 0 => 100.0 * seen[i].1 as f64 / g.memory as f64,
                    Policy::Spread if idle_before => 100.0,
                    _ => 0.0,
                };
                if let Some(slot) = out.0.get_mut(c.index as usize) {
                    slot.push(Grant {
                        uuid,
                        memory: took,
                        cores: c.cores,
                    });
                }
                taken += 1;
            }
            if taken < c.number {
                return None;
            }
        }
        Some((out, score))
    }

    /// Whether the shared GPUs `shape` asks for let a pod of `job` onto `node`, counting what
    /// pods evicted this session hold as free; with `empty`, whether they ever could.
    pub fn check(
        &self,
        snap: &Snapshot,
        shape: &TaskShape,
        job: Option<Id>,
        node: Id,
        empty: bool,
    ) -> Result<(), Unfit> {
        let Some(ask) = shape.rules.gpus.as_deref() else {
            return Ok(());
        };
        if ask.share {
            let memory = ask.asks.iter().any(|a| a.memory > 0);
            if memory && !self.config.share_memory {
                return Err(Unfit::Gpu(GpuUnfit::ShareOff(
                    "deviceshare.GPUSharingEnable",
                )));
            }
            if !memory && !self.config.share_number {
                return Err(Unfit::Gpu(GpuUnfit::ShareOff(
                    "deviceshare.GPUNumberEnable",
                )));
            }
        } else if !self.config.enabled {
            return Err(Unfit::Gpu(GpuUnfit::Off));
        }
        let Some(n) = snap.nodes.get(node).filter(|n| !n.spec.gpus.is_empty()) else {
            return Err(Unfit::Gpu(GpuUnfit::NotRegistered));
        };
        // A lock passes: never a reason to give up on the node. gpushare takes no lock.
        if !empty && !ask.share && self.locked(n.spec.gpu_lock, node) {
            return Err(Unfit::Gpu(GpuUnfit::Locked));
        }
        let rules = self.config.rules_of(&shape.rules.labels);
        match self.choose(snap, ask, (job, &rules), node, true, empty) {
            Some(_) => Ok(()),
            None => Err(Unfit::Gpu(GpuUnfit::NotEnough)),
        }
    }

    /// Whether the node lock keeps vGPU pods off `node` (whose lock was taken at `lock`): it
    /// stands, or a pod placed there this session will take it.
    fn locked(&self, lock: Option<i64>, node: Id) -> bool {
        self.config.node_lock
            && (lock.is_some_and(|at| self.now.saturating_sub(at) < LOCK_EXPIRY)
                || self.given_on.get(&node).is_some_and(|k| *k > 0))
    }

    /// Whether binding `task` on `node` takes the node's lock (vGPU pods only).
    pub fn takes_lock(&self, task: Id) -> bool {
        self.config.node_lock
            && self
                .given
                .get(&task)
                .is_some_and(|(_, g)| g.share_indices().is_none())
    }

    /// Whether `task`'s GPUs fit `node` without what is being released (a placement that
    /// needs that is pipelined).
    pub fn fits_now(&self, snap: &Snapshot, task: &Task, node: Id) -> bool {
        match task.spec.shape.rules.gpus.as_deref() {
            None => true,
            Some(ask) => {
                let rules = self.config.rules_of(&task.spec.shape.rules.labels);
                self.choose(snap, ask, (Some(task.job), &rules), node, false, false)
                    .is_some()
            }
        }
    }

    /// The node score of `task` on `node` under the configured policy and weight (0 when
    /// scoring is off or the pod takes no shared GPU).
    pub fn score(&self, snap: &Snapshot, task: &Task, node: Id) -> f64 {
        if self.config.weight <= 0.0 || self.config.policy == Policy::Unset {
            return 0.0;
        }
        let Some(ask) = task.spec.shape.rules.gpus.as_deref() else {
            return 0.0;
        };
        let rules = self.config.rules_of(&task.spec.shape.rules.labels);
        self.choose(snap, ask, (Some(task.job), &rules), node, false, false)
            .map_or(0.0, |(_, s)| (s + 0.5).floor() * self.config.weight)
    }

    /// Places (`sign` 1) `task` on `node`, giving it GPUs (counting released ones when
    /// `pipelined`), or takes back (-1) what the session gave it.
    pub fn place(&mut self, snap: &Snapshot, task: Id, node: Id, sign: i32, pipelined: bool) {
        let Some(t) = snap.tasks.get(task) else {
            return;
        };
        if sign < 0 {
            if let Some((n, grants)) = self.given.remove(&task) {
                if grants.share_indices().is_none()
                    && let Some(k) = self.given_on.get_mut(&n)
                {
                    *k = k.saturating_sub(1);
                }
                let job = t.job;
                let rules = self.config.rules_of(&t.spec.shape.rules.labels);
                self.each_gpu(snap, n, &grants, |u| step_rules(&mut u.rules, &rules, -1));
                self.each_use(snap, n, &grants, |u, g| {
                    u.held.step(g, -1);
                    step_mig(&mut u.mig, g, -1);
                    if let Some(i) = u.jobs.iter().position(|j| *j == job) {
                        u.jobs.swap_remove(i);
                    }
                });
            }
            return;
        }
        let Some(ask) = t.spec.shape.rules.gpus.as_deref() else {
            return;
        };
        let rules = self.config.rules_of(&t.spec.shape.rules.labels);
        let who = (Some(t.job), rules.as_slice());
        let chosen = self.choose(snap, ask, who, node, false, false).or_else(|| {
            pipelined
                .then(|| self.choose(snap, ask, who, node, true, false))
                .flatten()
        });
        if let Some((grants, _)) = chosen {
            self.each_gpu(snap, node, &grants, |u| step_rules(&mut u.rules, &rules, 1));
            self.each_use(snap, node, &grants, |u, g| {
                u.held.step(g, 1);
                step_mig(&mut u.mig, g, 1);
                u.jobs.push(t.job);
            });
            // Only vGPU pods take the node lock, so only they keep others off this session.
            if !ask.share {
                *self.given_on.entry(node).or_default() += 1;
            }
            self.given.insert(task, (node, Arc::new(grants)));
        }
    }

    /// `task`, evicted this session (`sign` 1) or no longer (-1), releases its GPUs on `node`:
    /// a pod pipelined onto the room it leaves may take them.
    pub fn evict(&mut self, snap: &Snapshot, task: Id, node: Id, sign: i64) {
        let Some(t) = snap.tasks.get(task) else {
            return;
        };
        let Some(grants) = t.spec.gpus.clone() else {
            return;
        };
        let rules = self.config.rules_of(&t.spec.shape.rules.labels);
        self.each_gpu(snap, node, &grants, |u| {
            step_rules(&mut u.rules_releasing, &rules, sign);
        });
        self.each_use(snap, node, &grants, |u, g| {
            u.releasing.step(g, sign);
            step_mig(&mut u.mig_releasing, g, sign);
        });
    }

    /// What the session gave `task` on `node`, to write on the pod as it binds.
    pub fn prebind(&self, task: Id, node: Id) -> Option<Arc<Grants>> {
        self.given
            .get(&task)
            .filter(|(n, _)| *n == node)
            .map(|(_, g)| Arc::clone(g))
    }
}
