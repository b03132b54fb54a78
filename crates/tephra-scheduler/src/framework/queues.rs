//! Queue trees and queue shares, for the plugins that divide the fleet between queues
//! (proportion, capacity, hierarchical drf): each queue's parent, a queue's ancestry, the order
//! of two queues of a tree, and whether a set of victims leaves their queues what they may keep.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::view::View;
use crate::model::Id;
use crate::resources::{MAX_RESOURCES, PODS, Resources};

/// A victim queue as reclaim sees it: what it holds, the share above which it may give
/// resources back, and the floor it never drops below (0 on a resource: not contended).
pub struct VictimQueue {
    /// What the queue holds.
    pub allocated: Resources,
    /// The share above which it may give resources back.
    pub above: Resources,
    /// The share it never drops below (0 on a resource: not contended).
    pub floor: Resources,
}

/// Whether evicting `victims` is fair to their queues: each victim may go only while its queue
/// holds more than `above` of something the victim frees, and the queue stays at or above its
/// `floor` of everything the victim frees, so shares converge instead of swinging back and
/// forth.
pub fn victims_keep_floors(
    view: &View,
    victims: &[Id],
    queue: impl Fn(&str) -> Option<VictimQueue>,
) -> Option<bool> {
    let mut left: BTreeMap<String, (Resources, VictimQueue)> = BTreeMap::new();
    for &t in victims {
        let task = view.task(t)?;
        let name = view.job(task.job)?.queue().to_string();
        if !left.contains_key(&name) {
            let q = queue(&name)?;
            left.insert(name.clone(), (q.allocated, q));
        }
        let (alloc, q) = left.get_mut(&name)?;
        let req = &task.spec.shape.request;
        let after = alloc.minus(req);
        let requested = || (0..MAX_RESOURCES).filter(|&r| r != PODS && req.0[r] > 0);
        if !requested().any(|r| alloc.0[r] > q.above.0[r])
            || requested().any(|r| after.0[r] < q.floor.0[r])
        {
            return Some(false);
        }
        *alloc = after;
    }
    Some(true)
}

/// The parent of each queue in the queue tree: its `parent`, or `root` when it names none
/// (and a root queue exists).
pub fn queue_parents(view: &View) -> std::collections::BTreeMap<String, Option<String>> {
    let root = tephra_api::defaults::ROOT_QUEUE;
    let has_root = view.snap.queues.contains_key(root);
    view.snap
        .queues
        .iter()
        .map(|(name, q)| {
            let parent = match &q.parent {
                Some(p) if !p.is_empty() && p != name => Some(p.clone()),
                _ if has_root && name != root => Some(root.to_string()),
                _ => None,
            };
            (name.clone(), parent)
        })
        .collect()
}

/// What is wrong with a queue's place in the queue tree. A queue in a cycle, or under a
/// parent that does not exist, admits nothing new until it is fixed (Volcano's webhook refuses
/// both; with no webhook, the scheduler refuses to guess where the queue belongs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeProblem {
    /// The chain of `spec.parent` from the queue up to a queue that does not exist (last).
    Missing(Vec<String>),
    /// The chain of `spec.parent` from the queue until it comes back to a queue on it (last).
    Cycle(Vec<String>),
}

impl std::fmt::Display for TreeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing(chain) if chain.len() == 2 => write!(
                f,
                "queue {}: spec.parent {:?} does not exist",
                chain[0], chain[1]
            ),
            Self::Missing(chain) => write!(
                f,
                "queue {}: spec.parent leads to {:?}, which does not exist ({})",
                chain[0],
                chain.last().map_or("", String::as_str),
                chain.join(" → ")
            ),
            Self::Cycle(chain) => write!(
                f,
                "queue {}: spec.parent makes a cycle ({})",
                chain[0],
                chain.join(" → ")
            ),
        }
    }
}

/// Whether `name`'s ancestry through `spec.parent` is broken. `parent_of(q)` is `None` when `q`
/// does not exist and `Some(parent)` when it does; `root` is always there, as Volcano makes it.
pub fn tree_problem(
    name: &str,
    parent_of: impl Fn(&str) -> Option<Option<String>>,
) -> Option<TreeProblem> {
    let root = tephra_api::defaults::ROOT_QUEUE;
    let mut chain = vec![name.to_string()];
    let mut cur = parent_of(name)?;
    while let Some(p) = cur.filter(|p| !p.is_empty() && p != root) {
        let seen = chain.contains(&p);
        chain.push(p.clone());
        if seen {
            return Some(TreeProblem::Cycle(chain));
        }
        match parent_of(&p) {
            None => return Some(TreeProblem::Missing(chain)),
            Some(next) => cur = next,
        }
    }
    None
}

/// A queue and its ancestors, leaf first; a cycle is cut where it closes.
pub fn ancestry(parent: impl Fn(&str) -> Option<String>, queue: &str) -> Vec<String> {
    let mut out = vec![queue.to_string()];
    let mut cur = queue.to_string();
    while let Some(p) = parent(&cur) {
        if out.contains(&p) || out.len() > 64 {
            break;
        }
        out.push(p.clone());
        cur = p;
    }
    out
}

/// Orders two queues of a tree: the children of their closest common ancestor are compared by
/// `share` (lower first), then the queues themselves.
pub fn order_in_tree(a: &[String], b: &[String], share: impl Fn(&str) -> f64) -> Ordering {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return share(x).total_cmp(&share(y));
        }
    }
    match (a.first(), b.first()) {
        (Some(x), Some(y)) => share(x).total_cmp(&share(y)),
        _ => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(edges: &[(&str, Option<&str>)]) -> impl Fn(&str) -> Option<Option<String>> {
        let map: BTreeMap<String, Option<String>> = edges
            .iter()
            .map(|(q, p)| (q.to_string(), p.map(str::to_string)))
            .collect();
        move |q| map.get(q).cloned()
    }

    #[test]
    fn a_queue_under_root_or_under_queues_that_exist_has_no_problem() {
        let t = tree(&[("a", None), ("b", Some("a")), ("c", Some("root"))]);
        assert_eq!(tree_problem("b", &t), None);
        assert_eq!(tree_problem("c", &t), None);
        assert_eq!(
            tree_problem("nope", &t),
            None,
            "a missing queue is another matter"
        );
    }

    #[test]
    fn a_missing_parent_or_ancestor_and_a_cycle_are_named_with_the_chain() {
        let t = tree(&[
            ("a", Some("gone")),
            ("b", Some("a")),
            ("x", Some("y")),
            ("y", Some("x")),
            ("z", Some("x")),
        ]);
        assert_eq!(
            tree_problem("a", &t).map(|p| p.to_string()).as_deref(),
            Some("queue a: spec.parent \"gone\" does not exist")
        );
        assert_eq!(
            tree_problem("b", &t).map(|p| p.to_string()).as_deref(),
            Some("queue b: spec.parent leads to \"gone\", which does not exist (b → a → gone)")
        );
        assert_eq!(
            tree_problem("x", &t),
            Some(TreeProblem::Cycle(vec!["x".into(), "y".into(), "x".into()]))
        );
        assert!(matches!(tree_problem("z", &t), Some(TreeProblem::Cycle(_))));
    }
}
