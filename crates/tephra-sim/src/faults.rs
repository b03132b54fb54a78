//! Faults, as they happen to a member (its truth): a cluster cut off (`unreachable`: its API
//! server does not answer, its pods run on unheard), a cluster whose `/readyz` answers not ok
//! (`notready`: its pods run and report), nodes down, and recovery. What the control plane
//! makes of a cluster fault is the failover chain's to decide ([`crate::members`],
//! [`crate::failover`]), never this file's.
//!
//! A node that goes down is the member's own business: its kubelet stops, its pods fail, and a
//! gang that lost a pod is restarted whole (its pods go back to Pending and its PodGroup to
//! Inqueue), as Volcano's default policy restarts a Job whose pod is evicted: [`Faults`] says
//! which nodes went down, and the executor evicts the gangs on them.

use std::collections::BTreeMap;

use tephra_scheduler::cache::Event;
use tephra_scheduler::model::NodeSpec;

use crate::ctx::Ctx;
use crate::error::SimError;
use crate::failover::book::Book;
use crate::members::fleet::Fleet;
use crate::record::Record;
use crate::scenario::{FaultDef, FaultKind};

/// The faults of a run: the scenario's, and those drawn from its seed.
pub(crate) struct Faults {
    defs: Vec<FaultDef>,
    /// The record of each fault begun (by its index): its index in failover's records.
    record_of: BTreeMap<usize, usize>,
}

/// What a fault changed, for the other parts to follow.
pub(crate) enum Change {
    /// The member's truth changed: the control plane follows.
    Member(String),
    /// Nodes of a cluster went down (the fault's record): the gangs on them restart.
    Nodes {
        cluster: String,
        nodes: Vec<String>,
        record: usize,
    },
    Nothing,
}

/// The cache and the checker take a node's readiness.
fn set_node_ready(ctx: &mut Ctx, cluster: &str, node: &str, ready: bool) -> Result<(), SimError> {
    let Some(id) = ctx.cache.world().node_id(cluster, node) else {
        return Ok(());
    };
    let Some(spec) = ctx.cache.world().nodes.get(id).map(|n| n.spec.clone()) else {
        return Ok(());
    };
    ctx.checker.node_ready(cluster, node, ready);
    ctx.apply(Event::NodeUpsert(NodeSpec { ready, ..spec }))
}

/// Changes the count of faults of `kind` in force on member `cluster` by `delta`.
fn member_fault(fleet: &mut Fleet, cluster: &str, kind: FaultKind, delta: i32) {
    if let Some(m) = fleet.members.get_mut(cluster) {
        let n = match kind {
            FaultKind::Unreachable => &mut m.unreachable,
            FaultKind::Notready => &mut m.notready,
            _ => return,
        };
        *n = n.saturating_add_signed(delta);
    }
}

fn kind_name(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Unreachable => "unreachable",
        FaultKind::Notready => "notready",
        FaultKind::NodeDown => "node-down",
        FaultKind::Recover => "recover",
    }
}

impl Faults {
    pub(crate) fn new(defs: Vec<FaultDef>) -> Self {
        Self {
            defs,
            record_of: BTreeMap::new(),
        }
    }

    /// When each fault begins, in ms, by index.
    pub(crate) fn starts(&self) -> Vec<i64> {
        self.defs.iter().map(|f| f.at.0).collect()
    }

    /// Whether fault `i` is a `recover`: it only ends things.
    pub(crate) fn recovers(&self, i: usize) -> bool {
        self.defs[i].kind == FaultKind::Recover
    }

    fn nodes(&self, fleet: &Fleet, i: usize) -> Vec<String> {
        let f = &self.defs[i];
        let all: Vec<String> = fleet
            .nodes
            .get(&f.cluster)
            .map(|ns| ns.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        match (&f.node, f.count) {
            (Some(n), _) => all.into_iter().filter(|x| x == n).collect(),
            (None, Some(c)) => all.into_iter().take(c).collect(),
            (None, None) => Vec::new(),
        }
    }

    /// Fault `i` begins (`begin`) or ends; a `recover` fault only ends things, bringing its
    /// scope back. Its record opens or closes, and what changed is returned for the other
    /// parts to follow.
    pub(crate) fn happen(
        &mut self,
        i: usize,
        begin: bool,
        ctx: &mut Ctx,
        fleet: &mut Fleet,
        book: &mut Book,
        out: &mut dyn FnMut(&Record),
    ) -> Result<Change, SimError> {
        let f = self.defs[i].clone();
        let kind = kind_name(f.kind);
        if !begin || f.kind == FaultKind::Recover {
            out(&Record::fault("recover", ctx.now, &f.cluster, None, kind));
            if let Some(r) = self.record_of.get(&i).copied() {
                book.fault_closed(ctx.now, r);
            }
            match f.kind {
                FaultKind::NodeDown => {
                    for n in self.nodes(fleet, i) {
                        let key = (f.cluster.clone(), n.clone());
                        let left = fleet
                            .down_nodes
                            .get(&key)
                            .copied()
                            .unwrap_or(1)
                            .saturating_sub(1);
                        if left == 0 {
                            fleet.down_nodes.remove(&key);
                            set_node_ready(ctx, &f.cluster, &n, true)?;
                        } else {
                            fleet.down_nodes.insert(key, left);
                        }
                    }
                }
                FaultKind::Recover => {
                    if let Some(m) = fleet.members.get_mut(&f.cluster) {
                        m.unreachable = 0;
                        m.notready = 0;
                    }
                    let downs: Vec<String> = fleet
                        .down_nodes
                        .keys()
                        .filter(|(c, _)| *c == f.cluster)
                        .map(|(_, n)| n.clone())
                        .collect();
                    for n in downs {
                        fleet.down_nodes.remove(&(f.cluster.clone(), n.clone()));
                        set_node_ready(ctx, &f.cluster, &n, true)?;
                    }
                    // The faults it ended are over.
                    let open: Vec<usize> = self
                        .record_of
                        .iter()
                        .filter(|(fi, _)| self.defs[**fi].cluster == f.cluster)
                        .map(|(_, r)| *r)
                        .collect();
                    for r in open {
                        book.fault_closed(ctx.now, r);
                    }
                    return Ok(Change::Member(f.cluster));
                }
                kind => {
                    member_fault(fleet, &f.cluster, kind, -1);
                    return Ok(Change::Member(f.cluster));
                }
            }
            return Ok(Change::Nothing);
        }
        let record = book.fault_opened(fleet, ctx.now, &f.cluster, kind);
        self.record_of.insert(i, record);
        match f.kind {
            FaultKind::Unreachable | FaultKind::Notready => {
                out(&Record::fault("fault", ctx.now, &f.cluster, None, kind));
                member_fault(fleet, &f.cluster, f.kind, 1);
                Ok(Change::Member(f.cluster))
            }
            FaultKind::NodeDown => {
                let nodes = self.nodes(fleet, i);
                for n in &nodes {
                    out(&Record::fault("fault", ctx.now, &f.cluster, Some(n), kind));
                    *fleet
                        .down_nodes
                        .entry((f.cluster.clone(), n.clone()))
                        .or_insert(0) += 1;
                    set_node_ready(ctx, &f.cluster, n, false)?;
                }
                Ok(Change::Nodes {
                    cluster: f.cluster,
                    nodes,
                    record,
                })
            }
            FaultKind::Recover => Ok(Change::Nothing),
        }
    }

    /// When fault `i`, begun now, ends, if it has a duration.
    pub(crate) fn ends_at(&self, i: usize, now: i64) -> Option<i64> {
        self.defs[i].duration.map(|d| now + d.0)
    }
}
