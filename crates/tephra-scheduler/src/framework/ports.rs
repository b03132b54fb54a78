//! Which host ports each node has given out, for the `predicates` plugin's `NodePorts` check:
//! built when a session opens from the pods the cache knows to hold ports
//! ([`World::port_holders`](crate::cache::World)), and kept current from session events, so that
//! two pods of one gang never get the same port of one node.
//!
//! A terminating pod still holds its ports until it is gone, as the kubelet sees it: a pod
//! evicted in the session keeps them for the rest of it.

use super::view::View;
use crate::hash::HashMap;
use crate::model::ports::ports_clash;
use crate::model::{HostPort, Id, TaskStatus};

/// Host ports in use, by node.
#[derive(Clone, Debug, Default)]
pub struct PortIndex {
    by_node: HashMap<Id, Vec<(Id, Vec<HostPort>)>>,
}

fn on_node(status: TaskStatus) -> bool {
    status.holds_node() || status == TaskStatus::Pipelined
}

impl PortIndex {
    /// The ports held on every node, as `view`'s session opens.
    pub fn build(view: &View) -> Self {
        let mut index = Self::default();
        for &task in &view.snap.port_holders {
            if on_node(view.status(task)) {
                index.placed(view, task);
            }
        }
        index
    }

    /// A pod was placed on its node in the session.
    pub fn placed(&mut self, view: &View, task: Id) {
        let (Some(t), Some(node)) = (view.task(task), view.task_node(task)) else {
            return;
        };
        let ports = &t.spec.shape.rules.host_ports;
        if ports.is_empty() {
            return;
        }
        let list = self.by_node.entry(node).or_default();
        list.retain(|(id, _)| *id != task);
        list.push((task, ports.clone()));
    }

    /// A pod left its node in the session. Only an allocation undone gives its ports back: an
    /// evicted pod holds them until it is gone.
    pub fn removed(&mut self, view: &View, task: Id) {
        if !matches!(
            view.status(task),
            TaskStatus::Allocated | TaskStatus::Pipelined
        ) {
            return;
        }
        let Some(node) = view.task_node(task) else {
            return;
        };
        if let Some(list) = self.by_node.get_mut(&node) {
            list.retain(|(id, _)| *id != task);
            if list.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// Whether `ports` clash with a port already given out on `node`.
    pub fn clash(&self, node: Id, ports: &[HostPort]) -> bool {
        !ports.is_empty()
            && self
                .by_node
                .get(&node)
                .is_some_and(|list| list.iter().any(|(_, held)| ports_clash(ports, held)))
    }
}
