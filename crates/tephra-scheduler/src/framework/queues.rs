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
