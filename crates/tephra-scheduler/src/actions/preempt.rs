//! `preempt`: within a queue, a waiting gang of higher priority evicts running work of lower
//! priority to fit, gang-aware (see `victims`). The preemptor is pipelined onto what is freed
//! in the same statement, which commits only if its gang then fits.

use crate::model::{GroupPhase, Id};
use crate::placement::SearchArgs;
use crate::session::Session;

use super::victims::{make_room, victim};

pub(super) fn execute(ssn: &mut Session, search: &SearchArgs) {
    run(ssn, search, Mode::Preempt);
}

/// Which rule picks victims.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Same queue, lower priority.
    Preempt,
    /// Other reclaimable queues above their deserved share.
    Reclaim,
}

/// A running job, as a possible victim.
struct Running {
    job: Id,
    queue: String,
    priority: i32,
    created: i64,
    cluster: Id,
    /// What its placed tasks hold.
    held: crate::resources::Resources,
}

fn running_jobs(ssn: &Session) -> Vec<Running> {
    let mut out = Vec::new();
    for (id, j) in ssn.snap.jobs.iter() {
        let Some(g) = &j.group else { continue };
        if !matches!(
            ssn.state.phase(&ssn.snap, id),
            Some(GroupPhase::Running | GroupPhase::Unknown)
        ) {
            continue;
        }
        let cluster = j.tasks.iter().find_map(|t| {
            let s = ssn.state.status(&ssn.snap, *t);
            if s.holds_node() {
                ssn.state
                    .task_node(&ssn.snap, *t)
                    .and_then(|n| ssn.snap.nodes.get(n))
                    .map(|n| n.cluster)
            } else {
                None
            }
        });
        let Some(cluster) = cluster else { continue };
        let mut held = crate::resources::Resources::ZERO;
        for &t in &j.tasks {
            if ssn.state.status(&ssn.snap, t).holds_node()
                && let Some(task) = ssn.snap.tasks.get(t)
            {
                held.add(&task.spec.shape.request);
            }
        }
        out.push(Running {
            held,
            job: id,
            queue: g.queue.clone(),
            priority: ssn.snap.job_priority(j),
            created: g.created,
            cluster,
        });
    }
    // Lowest priority first, then the most recently started.
    out.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.created.cmp(&a.created))
            .then(a.job.cmp(&b.job))
    });
    out
}

/// The most victim jobs looked at for one preemptor in one cluster.
const MAX_VICTIM_JOBS: usize = 64;

/// After this many preemptors of one queue found no room, the queue's others wait for the
/// next session: later jobs rarely fit where earlier ones did not, and the search is costly.
const MAX_FAILURES_PER_QUEUE: usize = 4;

pub(super) fn run(ssn: &mut Session, search: &SearchArgs, mode: Mode) {
    let starving = super::jobs_by_queue(ssn, |ssn, job| {
        matches!(
            ssn.state.phase(&ssn.snap, job),
            Some(GroupPhase::Inqueue | GroupPhase::Running | GroupPhase::Unknown)
        ) && super::allocate::has_pending(ssn, job)
            && !ssn.job_ready(job)
    });
    if starving.is_empty() {
        return;
    }
    let running = running_jobs(ssn);
    if running.is_empty() {
        return;
    }
    ssn.state.making_room = true;
    let mut queues: Vec<String> = starving.keys().cloned().collect();
    queues.sort_by(|a, b| ssn.queue_order(a, b).then_with(|| a.cmp(b)));
    for queue in queues {
        if mode == Mode::Reclaim && ssn.overused(&queue) {
            continue;
        }
        let mut failures = 0usize;
        for &job in starving.get(&queue).map(Vec::as_slice).unwrap_or_default() {
            if failures >= MAX_FAILURES_PER_QUEUE {
                break;
            }
            if ssn.job_ready(job) || ssn.job_valid(job).is_err() {
                continue;
            }
            if mode == Mode::Reclaim && !ssn.may_reclaim(job) {
                continue;
            }
            let priority = ssn.view().job_priority(job);
            let key = ssn
                .snap
                .jobs
                .get(job)
                .map(|j| j.key.clone())
                .unwrap_or_default();
            let (candidates, _) = super::allocate::candidate_clusters(ssn, job);
            let mut made_room = false;
            let mut tried = false;
            let (need, _) = crate::placement::job_needs(&ssn.view(), job);
            for cluster in candidates.into_iter().take(search.max_clusters) {
                // Only victims holding something the gang is short of here can help.
                let free = ssn.state.cluster_future_idle[cluster as usize];
                let scarce: Vec<usize> = (0..crate::resources::MAX_RESOURCES)
                    .filter(|&r| need.get(r) > free.get(r))
                    .collect();
                let victims: Vec<_> = running
                    .iter()
                    .filter(|r| r.cluster == cluster && r.job != job)
                    // (When nothing is short here, a queue limit is what blocks: any victim of
                    // the right queue may help.)
                    .filter(|r| scarce.is_empty() || scarce.iter().any(|&s| r.held.get(s) > 0))
                    .filter(|r| match mode {
                        Mode::Preempt => r.queue == queue && r.priority < priority,
                        Mode::Reclaim => {
                            r.queue != queue
                                && ssn.snap.queues.get(&r.queue).is_some_and(|q| q.reclaimable)
                        }
                    })
                    .filter_map(|r| victim(ssn, r.job, cluster))
                    .take(MAX_VICTIM_JOBS)
                    .collect();
                if victims.is_empty() {
                    continue;
                }
                tried = true;
                let reason = match mode {
                    Mode::Preempt => {
                        format!("preempted by {key} (priority {priority}) in queue {queue}")
                    }
                    Mode::Reclaim => format!(
                        "reclaimed by {key} for queue {queue}, which is below its deserved share"
                    ),
                };
                let allowed = |ssn: &Session, tasks: &[Id]| match mode {
                    Mode::Preempt => true,
                    Mode::Reclaim => ssn.reclaimable(tasks),
                };
                if let Some(n) = make_room(ssn, job, cluster, &victims, &reason, search, &allowed) {
                    let note = ssn.note(job);
                    let verb = if mode == Mode::Preempt {
                        "preempting"
                    } else {
                        "reclaiming"
                    };
                    let msg = note.message.clone().unwrap_or_default();
                    note.message = Some(format!("{msg} ({verb} {n} task(s))"));
                    made_room = true;
                    break;
                }
            }
            if tried && !made_room {
                failures += 1;
            }
        }
    }
    ssn.state.making_room = false;
}
