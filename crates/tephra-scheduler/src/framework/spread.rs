//! Pod topology spread, counted: for each constraint a waiting pod carries, how many of the pods
//! it selects each topology domain of a cluster holds, and the emptiest domain. The `predicates`
//! plugin keeps one for `DoNotSchedule` constraints (a filter), `nodeorder` one for
//! `ScheduleAnyway` (a score).
//!
//! As kube-scheduler's `PodTopologySpread` counts them: only nodes the pod could use are domains
//! (its node selector and required affinity under `nodeAffinityPolicy: Honor`, its tolerations
//! under `nodeTaintsPolicy: Honor`), a node must carry every topology key of the pod's
//! constraints to be one, and the pods counted are those of the pod's namespace that the
//! selector picks on such nodes, terminating pods excepted. Domains are per cluster: a zone of
//! one member is not the same zone as another member's of the same name.
//!
//! Nothing is counted until a pod with constraints is checked, so sessions without any pay
//! nothing. Counts are then kept current from session events, so the replicas of one gang see
//! each other as they are placed.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::view::View;
use crate::hash::HashMap;
use crate::model::{
    Id, Labels, Node, Requirement, SelectorOp, SpreadTerm, TaintEffect, Task, TaskShape,
    TaskStatus, Toleration, affinity_matches, selector_matches, tolerated,
};

/// Which of a pod's constraints an index counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `DoNotSchedule`: the filter.
    Hard,
    /// `ScheduleAnyway`: the score.
    Soft,
}

/// Why a node breaks a filter constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breach {
    /// The node lacks a topology key of the pod's constraints: it is no domain at all.
    MissingLabel,
    /// Placing the pod there would make the skew larger than allowed.
    Skew,
}

/// One constraint as one pod carries it: what is counted and which nodes are domains.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EntryKey {
    namespace: String,
    term: SpreadTerm,
    node_selector: Option<Labels>,
    affinity: Option<Vec<Vec<Requirement>>>,
    tolerations: Option<Vec<Toleration>>,
    /// Every topology key of the pod's constraints of this kind: a domain node carries all.
    keys: Vec<String>,
}

impl EntryKey {
    fn of(task: &Task, term: &SpreadTerm, keys: &[String]) -> Self {
        let shape = &task.spec.shape;
        Self {
            namespace: shape.namespace.clone(),
            term: term.clone(),
            node_selector: term
                .honor_node_affinity
                .then(|| shape.node_selector.clone()),
            affinity: term.honor_node_affinity.then(|| shape.affinity.clone()),
            tolerations: term.honor_taints.then(|| shape.tolerations.clone()),
            keys: keys.to_vec(),
        }
    }

    /// Whether `node` is a domain node for this constraint.
    fn counts_on(&self, node: &Node) -> bool {
        let labels = &node.spec.labels;
        self.keys.iter().all(|k| labels.contains_key(k))
            && self
                .node_selector
                .as_ref()
                .is_none_or(|s| selector_matches(s, labels))
            && self
                .affinity
                .as_ref()
                .is_none_or(|a| affinity_matches(a, labels))
            && self.tolerations.as_ref().is_none_or(|t| {
                node.spec
                    .taints
                    .iter()
                    .filter(|taint| taint.effect != TaintEffect::PreferNoSchedule)
                    .all(|taint| tolerated(t, taint))
            })
    }

    fn selects(&self, task: &Task) -> bool {
        task.spec.shape.namespace == self.namespace
            && self.term.selects(&task.spec.shape.rules.labels)
    }

    /// A label pair every pod the selector picks carries, to find them by.
    fn route(&self) -> Option<(String, String)> {
        let s = self.term.selector.as_ref()?;
        if let Some((k, v)) = s.match_labels.iter().next() {
            return Some((k.clone(), v.clone()));
        }
        s.expressions
            .iter()
            .find(|r| r.op == SelectorOp::In && r.values.len() == 1)
            .map(|r| (r.key.clone(), r.values[0].clone()))
    }
}

/// The domains of one cluster for one constraint, with how many selected pods each holds.
#[derive(Clone, Debug, Default)]
struct Domains {
    counts: HashMap<String, u32>,
    /// How many domains hold each count: the emptiest is the first key.
    by_count: BTreeMap<u32, u32>,
}

impl Domains {
    fn add_domain(&mut self, value: &str) {
        if !self.counts.contains_key(value) {
            self.counts.insert(value.to_string(), 0);
            *self.by_count.entry(0).or_insert(0) += 1;
        }
    }

    fn shift(&mut self, value: &str, delta: i32) {
        let Some(c) = self.counts.get_mut(value) else {
            return;
        };
        let old = *c;
        let new = old.saturating_add_signed(delta);
        if old == new {
            return;
        }
        *c = new;
        if let Some(n) = self.by_count.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                self.by_count.remove(&old);
            }
        }
        *self.by_count.entry(new).or_insert(0) += 1;
    }

    /// The emptiest domain's count; 0 with fewer domains than `min_domains`.
    fn min(&self, min_domains: u32) -> u32 {
        if (self.counts.len() as u64) < u64::from(min_domains) {
            return 0;
        }
        self.by_count.keys().next().copied().unwrap_or(0)
    }

    fn max(&self) -> u32 {
        self.by_count.keys().next_back().copied().unwrap_or(0)
    }
}

/// One constraint's domains, per cluster (indexed by cluster id), counted when first asked.
#[derive(Clone, Debug)]
struct Entry {
    key: EntryKey,
    clusters: Vec<Option<Domains>>,
}

#[derive(Clone, Debug, Default)]
struct Inner {
    built: bool,
    /// Pods on nodes, not terminating, by namespace and label pair; and by namespace.
    by_label: HashMap<(String, String, String), BTreeSet<Id>>,
    by_namespace: HashMap<String, BTreeSet<Id>>,
    /// Each distinct constraint once, by the number it was given when first seen: the checks
    /// index by number, so a check never hashes a key.
    ids: HashMap<EntryKey, usize>,
    entries: Vec<Entry>,
    /// Entries by namespace and the label pair they are found by; those with none by namespace.
    routes: HashMap<(String, String, String), Vec<usize>>,
    unrouted: HashMap<String, Vec<usize>>,
}

impl Inner {
    /// The number of `key`'s entry, registering it (and its route) when new.
    fn intern(&mut self, key: EntryKey) -> usize {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.entries.len();
        let ns = key.namespace.clone();
        match key.route() {
            Some((k, v)) => self.routes.entry((ns, k, v)).or_default().push(id),
            None => self.unrouted.entry(ns).or_default().push(id),
        }
        self.ids.insert(key.clone(), id);
        self.entries.push(Entry {
            key,
            clusters: Vec::new(),
        });
        id
    }
}

/// A shape and, for each of its constraints, the entry number and whether the constraint
/// selects the shape's own pods.
type LastShape = (Arc<TaskShape>, Arc<Vec<(usize, bool)>>);

/// Counts of selected pods per topology domain, for one kind of constraint.
#[derive(Clone, Debug)]
pub struct SpreadIndex {
    kind: Kind,
    inner: RefCell<Inner>,
    /// The entry keys of the last shape checked: the replicas of a role share it, and a scan
    /// checks one shape against many nodes.
    last: RefCell<Option<LastShape>>,
}

fn counted(status: TaskStatus) -> bool {
    // Terminating pods do not count, as in kube-scheduler.
    (status.holds_node() && status != TaskStatus::Releasing) || status == TaskStatus::Pipelined
}

impl SpreadIndex {
    /// An empty index for `kind`'s constraints.
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            inner: RefCell::new(Inner::default()),
            last: RefCell::new(None),
        }
    }

    /// The entry number of each of `task`'s constraints of this kind, in order, and whether
    /// the constraint selects `task` itself.
    fn entry_keys(&self, task: &Task) -> Arc<Vec<(usize, bool)>> {
        let shape = &task.spec.shape;
        if let Some((s, keys)) = self.last.borrow().as_ref()
            && Arc::ptr_eq(s, shape)
        {
            return Arc::clone(keys);
        }
        let topology = self.keys(task);
        let mut inner = self.inner.borrow_mut();
        let own = &shape.rules.labels;
        let keys: Arc<Vec<(usize, bool)>> = Arc::new(
            self.terms(task)
                .map(|t| {
                    (
                        inner.intern(EntryKey::of(task, t, &topology)),
                        t.selects(own),
                    )
                })
                .collect(),
        );
        drop(inner);
        *self.last.borrow_mut() = Some((Arc::clone(shape), Arc::clone(&keys)));
        keys
    }

    fn terms<'t>(&self, task: &'t Task) -> impl Iterator<Item = &'t SpreadTerm> {
        let hard = self.kind == Kind::Hard;
        task.spec
            .shape
            .rules
            .spread
            .iter()
            .filter(move |t| t.is_hard() == hard)
    }

    fn keys(&self, task: &Task) -> Vec<String> {
        let mut keys: Vec<String> = self.terms(task).map(|t| t.topology_key.clone()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Whether `task` has constraints of this index's kind.
    pub fn applies(&self, task: &Task) -> bool {
        self.terms(task).next().is_some()
    }

    /// A pod was placed on its node in the session.
    pub fn placed(&mut self, view: &View, task: Id) {
        self.count(view, task, 1);
    }

    /// A pod left its node in the session, or was evicted (terminating pods do not count).
    pub fn removed(&mut self, view: &View, task: Id) {
        self.count(view, task, -1);
    }

    fn count(&mut self, view: &View, task: Id, delta: i32) {
        let inner = self.inner.get_mut();
        if !inner.built {
            return;
        }
        let (Some(t), Some(node)) = (view.task(task), view.task_node(task)) else {
            return;
        };
        let Some(n) = view.node(node) else { return };
        let ns = &t.spec.shape.namespace;
        let labels = &t.spec.shape.rules.labels;
        for (k, v) in labels {
            let key = (ns.clone(), k.clone(), v.clone());
            let set = inner.by_label.entry(key).or_default();
            if delta > 0 {
                set.insert(task);
            } else {
                set.remove(&task);
            }
        }
        let set = inner.by_namespace.entry(ns.clone()).or_default();
        if delta > 0 {
            set.insert(task);
        } else {
            set.remove(&task);
        }
        let mut ids: Vec<usize> = inner
            .unrouted
            .get(ns)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        for (k, v) in labels {
            if let Some(list) = inner.routes.get(&(ns.clone(), k.clone(), v.clone())) {
                ids.extend(list);
            }
        }
        for id in ids {
            let Some(entry) = inner.entries.get_mut(id) else {
                continue;
            };
            let Some(Some(d)) = entry.clusters.get_mut(n.cluster as usize) else {
                continue;
            };
            let key = &entry.key;
            if !key.selects(t) || !key.counts_on(n) {
                continue;
            }
            if let Some(value) = n.spec.labels.get(&key.term.topology_key) {
                d.shift(value, delta);
            }
        }
    }

    /// Indexes every pod on a node by namespace and labels, once per session.
    fn build(inner: &mut Inner, view: &View) {
        inner.built = true;
        for (id, t) in view.snap.tasks.iter() {
            if !counted(view.status(id)) {
                continue;
            }
            let ns = &t.spec.shape.namespace;
            for (k, v) in &t.spec.shape.rules.labels {
                inner
                    .by_label
                    .entry((ns.clone(), k.clone(), v.clone()))
                    .or_default()
                    .insert(id);
            }
            inner.by_namespace.entry(ns.clone()).or_default().insert(id);
        }
    }

    /// Runs `f` on the term and the domains of `cluster` for entry `id`, counting them first
    /// if needed.
    fn with_domains<R>(
        &self,
        view: &View,
        id: usize,
        cluster: Id,
        f: impl FnOnce(&SpreadTerm, &Domains) -> R,
    ) -> Option<R> {
        let mut inner = self.inner.borrow_mut();
        if !inner.built {
            Self::build(&mut inner, view);
        }
        let slot = cluster as usize;
        let counted_already = inner
            .entries
            .get(id)
            .is_some_and(|e| matches!(e.clusters.get(slot), Some(Some(_))));
        if !counted_already {
            let key = &inner.entries.get(id)?.key;
            let d = Self::domains(&inner, view, key, cluster);
            let e = inner.entries.get_mut(id)?;
            if e.clusters.len() <= slot {
                e.clusters.resize(slot + 1, None);
            }
            e.clusters[slot] = Some(d);
        }
        let e = inner.entries.get(id)?;
        let d = e.clusters.get(slot)?.as_ref()?;
        Some(f(&e.key.term, d))
    }

    /// Counts the domains of `cluster` for `key` from the pods indexed.
    fn domains(inner: &Inner, view: &View, key: &EntryKey, cluster: Id) -> Domains {
        let mut d = Domains::default();
        let nodes = view
            .snap
            .cluster_nodes
            .get(cluster as usize)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for &n in nodes {
            let Some(node) = view.node(n) else { continue };
            if key.counts_on(node)
                && let Some(v) = node.spec.labels.get(&key.term.topology_key)
            {
                d.add_domain(v);
            }
        }
        let candidates = match key.route() {
            Some((k, v)) => inner.by_label.get(&(key.namespace.clone(), k, v)),
            None => inner.by_namespace.get(&key.namespace),
        };
        for &id in candidates.into_iter().flatten() {
            let (Some(t), Some(node)) = (view.task(id), view.task_node(id)) else {
                continue;
            };
            let Some(n) = view.node(node) else { continue };
            if n.cluster != cluster || !key.selects(t) || !key.counts_on(n) {
                continue;
            }
            if let Some(v) = n.spec.labels.get(&key.term.topology_key) {
                d.shift(v, 1);
            }
        }
        d
    }

    /// The filter: whether placing `task` on `node` keeps every `DoNotSchedule` constraint.
    pub fn check(&self, view: &View, task: &Task, node: Id) -> Result<(), Breach> {
        let Some(n) = view.node(node) else {
            return Ok(());
        };
        let keys = self.entry_keys(task);
        // A node that is no domain fails first, whatever the counts: after a skew, the other
        // constraints' keys are still looked for.
        let mut skewed = false;
        for (term, &(id, own)) in self.terms(task).zip(keys.iter()) {
            let Some(value) = n.spec.labels.get(&term.topology_key) else {
                return Err(Breach::MissingLabel);
            };
            if skewed {
                continue;
            }
            let skew = self.with_domains(view, id, n.cluster, |term, d| {
                let here = d.counts.get(value).copied().unwrap_or(0);
                i64::from(here) + i64::from(own) - i64::from(d.min(term.min_domains))
            });
            skewed = skew.is_some_and(|skew| skew > i64::from(term.max_skew));
        }
        if skewed { Err(Breach::Skew) } else { Ok(()) }
    }

    /// The score, 0–100: how well placing `task` on `node` keeps its `ScheduleAnyway`
    /// constraints, averaged over them; a node that is no domain scores 0.
    pub fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        let Some(n) = view.node(node) else {
            return 0.0;
        };
        let keys = self.entry_keys(task);
        if keys.is_empty()
            || self
                .terms(task)
                .any(|t| !n.spec.labels.contains_key(&t.topology_key))
        {
            return 0.0;
        }
        let mut sum = 0.0;
        let mut terms = 0u32;
        for (term, &(id, _)) in self.terms(task).zip(keys.iter()) {
            let Some(value) = n.spec.labels.get(&term.topology_key) else {
                return 0.0;
            };
            sum += self
                .with_domains(view, id, n.cluster, |_, d| {
                    let here = d.counts.get(value).copied().unwrap_or(0);
                    let (min, max) = (d.min(1), d.max());
                    if max <= min {
                        100.0
                    } else {
                        100.0 * f64::from(max - here.min(max)) / f64::from(max - min)
                    }
                })
                .unwrap_or(0.0);
            terms += 1;
        }
        sum / f64::from(terms.max(1))
    }
}
