//! Plugins, one file each, with Volcano's names and arguments, plus tephra's GPU and
//! cluster-level plugins.

mod binpack;
mod capacity;
mod clusteraffinity;
mod clusterresource;
mod clustertaint;
mod conformance;
mod cost;
mod drf;
mod gang;
mod gpupack;
mod nodeorder;
mod overcommit;
mod predicates;
mod priority;
mod proportion;
mod sla;
mod spread;

use crate::config::{ArgValue, Args, PluginConfig};
use crate::framework::Plugin;

pub use clusteraffinity::allows as clusteraffinity_allows;
pub use spread::group_key;

/// Plugins tephra provides.
pub const KNOWN: &[&str] = &[
    "gang",
    "priority",
    "conformance",
    "predicates",
    "nodeorder",
    "binpack",
    "drf",
    "proportion",
    "capacity",
    "overcommit",
    "sla",
    "gpupack",
    "clusteraffinity",
    "clustertaint",
    "spread",
    "clusterresource",
    "cost",
];

/// An argument error: (key, reason).
pub type ArgError = (String, String);

/// Reads a plugin's arguments, refusing unknown keys.
pub(crate) struct ArgReader<'a> {
    args: &'a Args,
    allowed: &'a [&'a str],
    prefixes: &'a [&'a str],
}

impl<'a> ArgReader<'a> {
    pub(crate) fn new(
        args: &'a Args,
        allowed: &'a [&'a str],
        prefixes: &'a [&'a str],
    ) -> Result<Self, ArgError> {
        for key in args.keys() {
            let ok = allowed.contains(&key.as_str())
                || prefixes
                    .iter()
                    .any(|p| key.starts_with(p) && key.len() > p.len());
            if !ok {
                let mut known: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
                known.extend(prefixes.iter().map(|p| format!("{p}<name>")));
                let list = if known.is_empty() {
                    "this plugin takes no arguments".to_string()
                } else {
                    format!("known: {}", known.join(", "))
                };
                return Err((key.clone(), format!("unknown argument ({list})")));
            }
        }
        Ok(Self {
            args,
            allowed,
            prefixes,
        })
    }

    pub(crate) fn f64_or(&self, key: &str, default: f64) -> Result<f64, ArgError> {
        debug_assert!(self.allowed.contains(&key) || !self.prefixes.is_empty());
        match self.args.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| {
                    (
                        key.to_string(),
                        format!("must be a non-negative number, got {:?}", v.as_string()),
                    )
                }),
        }
    }

    pub(crate) fn string(&self, key: &str) -> Option<String> {
        self.args.get(key).map(ArgValue::as_string)
    }

    pub(crate) fn with_prefix(&self, prefix: &str) -> Vec<(String, &'a ArgValue)> {
        self.args
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(prefix).map(|rest| (rest.to_string(), v)))
            .collect()
    }
}

/// Builds a plugin instance from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgError> {
    let a = &cfg.arguments;
    Ok(match cfg.name.as_str() {
        "gang" => Box::new(gang::Gang::new(a)?),
        "priority" => Box::new(priority::Priority::new(a)?),
        "conformance" => Box::new(conformance::Conformance::new(a)?),
        "predicates" => Box::new(predicates::Predicates::new(a)?),
        "nodeorder" => Box::new(nodeorder::NodeOrder::new(a)?),
        "binpack" => Box::new(binpack::Binpack::new(a)?),
        "drf" => Box::new(drf::Drf::new(a, &cfg.enables)?),
        "proportion" => Box::new(proportion::Proportion::new(a)?),
        "capacity" => Box::new(capacity::Capacity::new(a)?),
        "overcommit" => Box::new(overcommit::Overcommit::new(a)?),
        "sla" => Box::new(sla::Sla::new(a)?),
        "gpupack" => Box::new(gpupack::GpuPack::new(a)?),
        "clusteraffinity" => Box::new(clusteraffinity::ClusterAffinity::new(a)?),
        "clustertaint" => Box::new(clustertaint::ClusterTaint::new(a)?),
        "spread" => Box::new(spread::Spread::new(a)?),
        "clusterresource" => Box::new(clusterresource::ClusterResource::new(a)?),
        "cost" => Box::new(cost::Cost::new(a)?),
        other => return Err(("name".into(), format!("unknown plugin {other:?}"))),
    })
}

/// Allocatable of a node with the pod slot defaulted to 110, as kubelet does.
pub(crate) fn allocatable(node: &crate::model::Node) -> crate::resources::Resources {
    let mut a = node.spec.allocatable;
    if a.get(crate::resources::PODS) == 0 {
        a.set(crate::resources::PODS, 110);
    }
    a
}

/// A victim queue as reclaim sees it: what it holds, the share above which it may give
/// resources back, and the floor it never drops below (0 on a resource: not contended).
pub(crate) struct VictimQueue {
    pub allocated: crate::resources::Resources,
    pub above: crate::resources::Resources,
    pub floor: crate::resources::Resources,
}

/// Whether evicting `victims` is fair to their queues: each victim may go only while its queue
/// holds more than `above` of something the victim frees, and the queue stays at or above its
/// `floor` of everything the victim frees, so shares converge instead of swinging back and
/// forth.
pub(crate) fn victims_keep_floors(
    view: &crate::framework::View,
    victims: &[crate::model::Id],
    queue: impl Fn(&str) -> Option<VictimQueue>,
) -> Option<bool> {
    use crate::resources::{MAX_RESOURCES, PODS, Resources};
    let mut left: std::collections::BTreeMap<String, (Resources, VictimQueue)> =
        std::collections::BTreeMap::new();
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
pub(crate) fn queue_parents(
    view: &crate::framework::View,
) -> std::collections::BTreeMap<String, Option<String>> {
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
pub(crate) fn ancestry(parent: impl Fn(&str) -> Option<String>, queue: &str) -> Vec<String> {
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
pub(crate) fn order_in_tree(
    a: &[String],
    b: &[String],
    share: impl Fn(&str) -> f64,
) -> std::cmp::Ordering {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return share(x).total_cmp(&share(y));
        }
    }
    match (a.first(), b.first()) {
        (Some(x), Some(y)) => share(x).total_cmp(&share(y)),
        _ => std::cmp::Ordering::Equal,
    }
}
