//! Nominations: pods of gangs past their SLA that a session reserved room for (placed without
//! binding, or held as the node frees up) and the node, kept until the next session so that
//! the room stays theirs, as kube-scheduler keeps a preemptor's `nominatedNodeName`. Each session's decisions replace the
//! whole set; a pod that is deleted loses its nomination at once.

use std::collections::BTreeMap;

use super::world::World;
use crate::decisions::Bind;
use crate::model::Id;

/// The nominations `binds` make (pod and node by name; unknown ones are skipped), which
/// replace the world's.
pub(super) fn of<'a>(world: &World, binds: impl Iterator<Item = &'a Bind>) -> BTreeMap<Id, Id> {
    binds
        .filter_map(|b| Some((world.task_id(&b.task)?, world.node_id(&b.cluster, &b.node)?)))
        .collect()
}
