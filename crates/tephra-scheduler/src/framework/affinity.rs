//! Where the pods that inter-pod affinity terms select are, by topology domain: the index the
//! `predicates` plugin (required terms) and `nodeorder` (preferred terms) keep for a session.
//!
//! Only the terms of pods waiting in the session are indexed, so a session without such terms
//! pays nothing. The owning plugin builds the index when the session opens and keeps it current
//! from its session events ([`AffinityIndex::placed`], [`AffinityIndex::removed`]), so that the
//! replicas of one gang placed in the same session see each other.

use super::view::View;
use crate::hash::HashMap;
use crate::model::{Id, Labels, PodTerm, TaskShape, TaskStatus};

/// Which terms a plugin indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terms {
    /// Required affinity and anti-affinity (predicates).
    Required,
    /// Preferred affinity and anti-affinity (node scores).
    Preferred,
}

/// A term as written by a pod in a namespace (the namespace scopes `Namespaces::Own`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TermKey {
    namespace: String,
    term: PodTerm,
}

/// An anti-affinity term of a pod already on a node: it keeps matching pods out of its domain.
#[derive(Clone, Debug)]
struct PlacedAnti {
    task: Id,
    key: TermKey,
    domain: String,
}

/// The index: per term, how many selected pods each topology domain holds.
#[derive(Clone, Debug, Default)]
pub struct AffinityIndex {
    terms: HashMap<TermKey, HashMap<String, u32>>,
    placed_anti: Vec<PlacedAnti>,
    with_anti: bool,
}

fn on_node(status: TaskStatus) -> bool {
    status.holds_node() || status == TaskStatus::Pipelined
}

fn terms_of(shape: &TaskShape, which: Terms) -> Vec<&PodTerm> {
    let r = &shape.rules;
    match which {
        Terms::Required => r.affinity.iter().chain(&r.anti_affinity).collect(),
        Terms::Preferred => r
            .preferred_affinity
            .iter()
            .chain(&r.preferred_anti_affinity)
            .map(|w| &w.term)
            .collect(),
    }
}

impl AffinityIndex {
    /// Builds the index for the pods waiting in `view`'s session. With [`Terms::Required`] it
    /// also keeps the required anti-affinity of pods already placed, which constrains newcomers.
    pub fn build(view: &View, which: Terms) -> Self {
        let mut index = Self {
            with_anti: which == Terms::Required,
            ..Self::default()
        };
        // Only pods with terms can add one: the cache keeps them apart, so a backlog without
        // such terms costs nothing here.
        for &t in &view.snap.affine {
            let Some(task) = view.task(t) else { continue };
            if view.status(t) != TaskStatus::Pending || !view.snap.has_work(task.job) {
                continue;
            }
            for term in terms_of(&task.spec.shape, which) {
                index
                    .terms
                    .entry(TermKey {
                        namespace: task.spec.shape.namespace.clone(),
                        term: term.clone(),
                    })
                    .or_default();
            }
        }
        if !index.terms.is_empty() {
            for (id, _) in view.snap.tasks.iter() {
                if on_node(view.status(id)) {
                    index.count_in(view, id, 1);
                }
            }
        }
        if index.with_anti {
            for &id in &view.snap.repelling {
                if on_node(view.status(id)) {
                    index.repel_from(view, id);
                }
            }
        }
        index
    }

    /// Whether nothing is indexed (no waiting pod has such terms, no placed pod repels).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.placed_anti.is_empty()
    }

    fn domain(view: &View, node: Id, key: &str) -> Option<String> {
        view.node(node)?.spec.labels.get(key).cloned()
    }

    fn count_in(&mut self, view: &View, task: Id, delta: i32) {
        let (Some(t), Some(node)) = (view.task(task), view.task_node(task)) else {
            return;
        };
        let shape = &t.spec.shape;
        for (key, domains) in &mut self.terms {
            if !key
                .term
                .selects(&key.namespace, &shape.namespace, &shape.rules.labels)
            {
                continue;
            }
            let Some(d) = Self::domain(view, node, &key.term.topology_key) else {
                continue;
            };
            let count = domains.entry(d).or_insert(0);
            *count = count.saturating_add_signed(delta);
        }
    }

    fn repel_from(&mut self, view: &View, task: Id) {
        let (Some(t), Some(node)) = (view.task(task), view.task_node(task)) else {
            return;
        };
        let shape = &t.spec.shape;
        for term in &shape.rules.anti_affinity {
            if let Some(domain) = Self::domain(view, node, &term.topology_key) {
                self.placed_anti.push(PlacedAnti {
                    task,
                    key: TermKey {
                        namespace: shape.namespace.clone(),
                        term: term.clone(),
                    },
                    domain,
                });
            }
        }
    }

    /// A pod was placed on its node in the session.
    pub fn placed(&mut self, view: &View, task: Id) {
        self.count_in(view, task, 1);
        if self.with_anti {
            self.repel_from(view, task);
        }
    }

    /// A pod left its node in the session (an allocation undone, an eviction).
    pub fn removed(&mut self, view: &View, task: Id) {
        self.count_in(view, task, -1);
        self.placed_anti.retain(|a| a.task != task);
    }

    /// How many pods `term` (written by a pod in `namespace`) selects in the topology domain of
    /// `node`, or `None` when the node has no such domain (lacks the topology label).
    pub fn count(&self, view: &View, namespace: &str, term: &PodTerm, node: Id) -> Option<u32> {
        let d = Self::domain(view, node, &term.topology_key)?;
        let key = TermKey {
            namespace: namespace.to_string(),
            term: term.clone(),
        };
        Some(
            self.terms
                .get(&key)
                .and_then(|m| m.get(&d))
                .copied()
                .unwrap_or(0),
        )
    }

    /// How many pods `term` selects anywhere.
    pub fn total(&self, namespace: &str, term: &PodTerm) -> u32 {
        let key = TermKey {
            namespace: namespace.to_string(),
            term: term.clone(),
        };
        self.terms.get(&key).map_or(0, |m| m.values().sum())
    }

    /// Whether a placed pod's required anti-affinity keeps a pod with `labels` in `namespace`
    /// off `node`.
    pub fn repelled(&self, view: &View, namespace: &str, labels: &Labels, node: Id) -> bool {
        self.placed_anti.iter().any(|a| {
            a.key.term.selects(&a.key.namespace, namespace, labels)
                && Self::domain(view, node, &a.key.term.topology_key).as_deref()
                    == Some(a.domain.as_str())
        })
    }
}
