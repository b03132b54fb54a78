//! Nominations: pods of gangs past their SLA that a session reserved room for (placed without
//! binding, or held as the node frees up) and the node, kept until the next session so that
//! the room stays theirs, as kube-scheduler keeps a preemptor's `nominatedNodeName`. Each session's decisions replace the
//! whole set; a pod that is deleted loses its nomination at once.

use std::collections::BTreeMap;

use super::world::World;
use crate::decisions::Bind;
use crate::model::Id;

impl World {
    /// Replaces every nomination with `binds` (pod and node by name; unknown ones are skipped).
    pub(super) fn nominate<'a>(&mut self, binds: impl Iterator<Item = &'a Bind>) {
        let mut next = BTreeMap::new();
        for b in binds {
            if let (Some(task), Some(node)) =
                (self.task_id(&b.task), self.node_id(&b.cluster, &b.node))
            {
                next.insert(task, node);
            }
        }
        self.nominated = next;
    }

    /// Drops a deleted pod's nomination.
    pub(super) fn forget_nomination(&mut self, task: Id) {
        self.nominated.remove(&task);
    }
}
