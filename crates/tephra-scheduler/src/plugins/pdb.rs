//! `pdb`: never evict a pod below a PodDisruptionBudget, as Volcano's `pdb` plugin. Preempt and
//! reclaim may take a pod that a budget covers only while the budget still allows a disruption
//! (its `status.disruptionsAllowed`), and each eviction chosen in the session uses one up, so
//! that several victims of one budget are not all taken at once; an eviction that is undone
//! gives it back. A pod the budget lists as already being disrupted does not count again. A
//! budget with an empty or missing selector covers no pod, as in Volcano. (Unlike Volcano, a pod
//! without labels, which no budget can cover, may be a victim.)

use std::collections::BTreeMap;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{Plugin, SessionEvents, VictimFilter};
use crate::framework::view::View;
use crate::model::{Id, Task};

/// The `pdb` plugin.
pub struct Pdb {
    /// Disruptions each budget still allows in this session, by `namespace/name`.
    remaining: BTreeMap<String, i32>,
}

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Pdb {
        remaining: BTreeMap::new(),
    }))
}

/// The budgets that cover `task` (and do not already count it as disrupted).
fn budgets<'a>(view: &View<'a>, task: &'a Task) -> impl Iterator<Item = &'a String> + 'a {
    let shape = &task.spec.shape;
    let pod = task.key.rsplit('/').next().unwrap_or_default();
    view.snap.pdbs.iter().filter_map(move |(key, p)| {
        let covers = p.namespace == shape.namespace
            && p.selector
                .as_ref()
                .is_some_and(|s| !(s.match_labels.is_empty() && s.expressions.is_empty()))
            && p.selector
                .as_ref()
                .is_some_and(|s| s.matches(&shape.rules.labels))
            && !p.disrupted_pods.contains(pod);
        covers.then_some(key)
    })
}

impl Pdb {
    fn adjust(&mut self, view: &View, task: Id, delta: i32) {
        let Some(t) = view.task(task) else { return };
        // Only pods that held their node when the session opened are evictions (new
        // allocations of waiting pods are not).
        if !t.spec.status.holds_node() {
            return;
        }
        for key in budgets(view, t) {
            if let Some(left) = self.remaining.get_mut(key) {
                *left += delta;
            }
        }
    }
}

impl Plugin for Pdb {
    fn name(&self) -> &'static str {
        "pdb"
    }

    fn victim_filter(&self) -> Option<&dyn VictimFilter> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Pdb {
    fn opened(&mut self, view: &View) {
        self.remaining = view
            .snap
            .pdbs
            .iter()
            .map(|(k, p)| (k.clone(), p.disruptions_allowed))
            .collect();
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        self.adjust(view, task, -1);
    }

    fn allocated(&mut self, view: &View, task: Id) {
        self.adjust(view, task, 1);
    }
}

impl VictimFilter for Pdb {
    fn allows(&self, view: &View, victim: Id) -> bool {
        self.allows_together(view, &[victim])
    }

    fn allows_together(&self, view: &View, victims: &[Id]) -> bool {
        let mut used: BTreeMap<&String, i32> = BTreeMap::new();
        for &v in victims {
            let Some(t) = view.task(v) else {
                return false;
            };
            for key in budgets(view, t) {
                *used.entry(key).or_insert(0) += 1;
            }
        }
        used.iter()
            .all(|(key, n)| self.remaining.get(*key).is_some_and(|left| left >= n))
    }
}
