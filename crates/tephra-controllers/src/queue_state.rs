//! Volcano's queue controller, as one pure pass per Queue: its `status.state` under the
//! `OpenQueue` and `CloseQueue` commands, and the counts of its PodGroups by phase.
//!
//! - Close: a queue with PodGroups is Closing (it admits nothing new, its jobs run on); without
//!   any it is Closed. A Closing queue becomes Closed when its last PodGroup goes.
//! - Open: Open, unless its parent is Closing or Closed (the parent must open first).
//! - The hierarchy: a queue whose parent closes is closed too and marked
//!   `volcano.sh/closed-by-parent: "true"`; when the parent opens again, the queues it closed
//!   open with it. `root` is never closed.
//! - No command: the state stands (an empty state is Open), except Closing, which settles.

use tephra_api::scheduling::{PodGroupPhase, QueueState};
use tephra_api::{PodGroup, Queue};

/// The annotation marking a queue closed because its parent closed.
pub const CLOSED_BY_PARENT: &str = "volcano.sh/closed-by-parent";
/// The root queue's name.
pub const ROOT: &str = "root";

/// A command to a queue (`bus.volcano.sh` Command actions `OpenQueue` and `CloseQueue`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueCommand {
    /// `OpenQueue`.
    Open,
    /// `CloseQueue`.
    Close,
}

impl QueueCommand {
    /// The command a Command's `action` names, if it is a queue's.
    pub fn parse(action: &str) -> Option<Self> {
        match action {
            "OpenQueue" => Some(Self::Open),
            "CloseQueue" => Some(Self::Close),
            _ => None,
        }
    }

    /// Volcano's action name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "OpenQueue",
            Self::Close => "CloseQueue",
        }
    }
}

/// What one pass looks at.
#[derive(Clone, Copy, Debug)]
pub struct QueueObserved<'a> {
    /// The queue.
    pub queue: &'a Queue,
    /// Its parent, when it names one that exists (`root` included).
    pub parent: Option<&'a Queue>,
    /// The PodGroups in the queue.
    pub podgroups: &'a [&'a PodGroup],
    /// A command to carry out, taken from the API.
    pub command: Option<QueueCommand>,
}

/// PodGroups by phase, as `status` counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCounts {
    /// Pending.
    pub pending: i32,
    /// Inqueue.
    pub inqueue: i32,
    /// Running.
    pub running: i32,
    /// Unknown.
    pub unknown: i32,
    /// Completed.
    pub completed: i32,
}

impl PhaseCounts {
    /// Counts `podgroups` by their status phase (a PodGroup with no phase yet counts nowhere,
    /// as in Volcano).
    pub fn of(podgroups: &[&PodGroup]) -> Self {
        let mut c = Self::default();
        for pg in podgroups {
            match pg.status.as_ref().and_then(|s| s.phase) {
                Some(PodGroupPhase::Pending) => c.pending += 1,
                Some(PodGroupPhase::Inqueue) => c.inqueue += 1,
                Some(PodGroupPhase::Running) => c.running += 1,
                Some(PodGroupPhase::Unknown) => c.unknown += 1,
                Some(PodGroupPhase::Completed) => c.completed += 1,
                None => {}
            }
        }
        c
    }

    /// The counts a queue's status holds now.
    pub fn stored(q: &Queue) -> Self {
        q.status.as_ref().map_or_else(Self::default, |s| Self {
            pending: s.pending,
            inqueue: s.inqueue,
            running: s.running,
            unknown: s.unknown,
            completed: s.completed,
        })
    }
}

/// What the pass decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOutcome {
    /// The queue's state after the pass.
    pub state: QueueState,
    /// Its PodGroups by phase.
    pub counts: PhaseCounts,
    /// Whether the status (state or counts) differs from what is stored.
    pub status_changed: bool,
    /// A new value for the `volcano.sh/closed-by-parent` annotation.
    pub closed_by_parent: Option<bool>,
    /// An Event to record: (warning, reason, message).
    pub event: Option<(bool, &'static str, String)>,
}

fn state_of(q: &Queue) -> QueueState {
    q.status
        .as_ref()
        .and_then(|s| s.state)
        .unwrap_or(QueueState::Open)
}

fn name_of(q: &Queue) -> &str {
    q.metadata.name.as_deref().unwrap_or_default()
}

fn closed_by_parent(q: &Queue) -> bool {
    q.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CLOSED_BY_PARENT))
        .is_some_and(|v| v == "true")
}

fn shut(s: QueueState) -> bool {
    matches!(s, QueueState::Closed | QueueState::Closing)
}

/// One pass of the queue controller over one Queue.
pub fn reconcile(o: &QueueObserved<'_>) -> QueueOutcome {
    let name = name_of(o.queue);
    let now = state_of(o.queue);
    let has_groups = !o.podgroups.is_empty();
    let closed = if has_groups {
        QueueState::Closing
    } else {
        QueueState::Closed
    };
    let parent_shut = o.parent.is_some_and(|p| shut(state_of(p)));
    let mut marker = None;
    let mut event = None;
    // The hierarchy speaks first when no one asked for anything.
    let command = match o.command {
        Some(c) => Some(c),
        None if name != ROOT && parent_shut && !shut(now) => {
            marker = Some(true);
            Some(QueueCommand::Close)
        }
        None if !parent_shut && shut(now) && closed_by_parent(o.queue) => Some(QueueCommand::Open),
        None => None,
    };
    let state = match command {
        Some(QueueCommand::Open) if parent_shut => {
            event = Some((
                true,
                QueueCommand::Open.as_str(),
                format!(
                    "cannot open queue {name}: its parent {} is {:?}; open the parent first",
                    o.parent.map(name_of).unwrap_or_default(),
                    o.parent.map(state_of).unwrap_or(QueueState::Closed),
                ),
            ));
            now
        }
        Some(QueueCommand::Open) => {
            if closed_by_parent(o.queue) {
                marker = Some(false);
            }
            if now != QueueState::Open {
                event = Some((false, "OpenQueue", "Open queue succeed".into()));
            }
            QueueState::Open
        }
        Some(QueueCommand::Close) if name == ROOT => {
            event = Some((
                true,
                QueueCommand::Close.as_str(),
                "the root queue cannot be closed".into(),
            ));
            now
        }
        Some(QueueCommand::Close) => {
            let next = if now == QueueState::Closed {
                QueueState::Closed
            } else {
                closed
            };
            if next != now {
                event = Some((false, "CloseQueue", "Close queue succeed".into()));
            }
            next
        }
        None if now == QueueState::Closing => closed,
        None => now,
    };
    let counts = PhaseCounts::of(o.podgroups);
    let status_changed = o.queue.status.as_ref().and_then(|s| s.state) != Some(state)
        || counts != PhaseCounts::stored(o.queue);
    QueueOutcome {
        state,
        counts,
        status_changed,
        closed_by_parent: marker.filter(|m| *m != closed_by_parent(o.queue)),
        event,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;
    use tephra_api::scheduling::{PodGroupStatus, QueueStatus};

    fn queue(name: &str, state: Option<QueueState>, parent: Option<&str>) -> Queue {
        let mut q: Queue = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "spec": {"weight": 1}}))
        .expect("queue");
        q.spec.parent = parent.map(String::from);
        q.status = state.map(|s| QueueStatus {
            state: Some(s),
            ..QueueStatus::default()
        });
        q
    }

    fn pg(phase: PodGroupPhase) -> PodGroup {
        let mut pg: PodGroup = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 1}}))
        .expect("pg");
        pg.status = Some(PodGroupStatus {
            phase: Some(phase),
            ..PodGroupStatus::default()
        });
        pg
    }

    fn run(
        q: &Queue,
        parent: Option<&Queue>,
        pgs: &[&PodGroup],
        c: Option<QueueCommand>,
    ) -> QueueOutcome {
        reconcile(&QueueObserved {
            queue: q,
            parent,
            podgroups: pgs,
            command: c,
        })
    }

    #[test]
    fn closing_a_queue_with_jobs_leaves_it_closing_until_they_go() {
        let running = pg(PodGroupPhase::Running);
        let q = queue("ml", None, None);
        let out = run(&q, None, &[&running], Some(QueueCommand::Close));
        assert_eq!(out.state, QueueState::Closing);
        assert_eq!(out.counts.running, 1);
        assert!(out.status_changed);
        let q = queue("ml", Some(QueueState::Closing), None);
        assert_eq!(run(&q, None, &[&running], None).state, QueueState::Closing);
        assert_eq!(run(&q, None, &[], None).state, QueueState::Closed);
    }

    #[test]
    fn closing_an_empty_queue_closes_it_and_opening_opens_it() {
        let q = queue("ml", Some(QueueState::Open), None);
        assert_eq!(
            run(&q, None, &[], Some(QueueCommand::Close)).state,
            QueueState::Closed
        );
        let q = queue("ml", Some(QueueState::Closed), None);
        let out = run(&q, None, &[], Some(QueueCommand::Open));
        assert_eq!(out.state, QueueState::Open);
        assert_eq!(out.event.map(|e| e.1), Some("OpenQueue"));
    }

    #[test]
    fn without_a_command_the_state_stands_and_an_empty_state_is_open() {
        let pending = pg(PodGroupPhase::Pending);
        for s in [None, Some(QueueState::Open), Some(QueueState::Closed)] {
            let q = queue("ml", s, None);
            let out = run(&q, None, &[&pending], None);
            assert_eq!(out.state, s.unwrap_or(QueueState::Open));
            assert_eq!(out.event, None);
        }
    }

    #[test]
    fn a_queue_closes_with_its_parent_and_reopens_with_it() {
        let closed_parent = queue("org", Some(QueueState::Closed), None);
        let child = queue("team", Some(QueueState::Open), Some("org"));
        let out = run(&child, Some(&closed_parent), &[], None);
        assert_eq!(out.state, QueueState::Closed);
        assert_eq!(out.closed_by_parent, Some(true));
        let mut child = queue("team", Some(QueueState::Closed), Some("org"));
        child.metadata.annotations =
            Some([(CLOSED_BY_PARENT.to_string(), "true".to_string())].into());
        let open_parent = queue("org", Some(QueueState::Open), None);
        let out = run(&child, Some(&open_parent), &[], None);
        assert_eq!(out.state, QueueState::Open);
        assert_eq!(out.closed_by_parent, Some(false));
    }

    #[test]
    fn a_queue_closed_by_hand_stays_closed_when_its_parent_opens() {
        let open_parent = queue("org", Some(QueueState::Open), None);
        let child = queue("team", Some(QueueState::Closed), Some("org"));
        assert_eq!(
            run(&child, Some(&open_parent), &[], None).state,
            QueueState::Closed
        );
    }

    #[test]
    fn a_queue_under_a_closed_parent_cannot_be_opened_and_root_cannot_be_closed() {
        let closed_parent = queue("org", Some(QueueState::Closing), None);
        let child = queue("team", Some(QueueState::Closed), Some("org"));
        let out = run(&child, Some(&closed_parent), &[], Some(QueueCommand::Open));
        assert_eq!(out.state, QueueState::Closed);
        let (warning, _, message) = out.event.expect("event");
        assert!(
            warning && message.contains("open the parent first"),
            "{message}"
        );
        let root = queue(ROOT, Some(QueueState::Open), None);
        let out = run(&root, None, &[], Some(QueueCommand::Close));
        assert_eq!(out.state, QueueState::Open);
        assert!(out.event.expect("event").0);
    }

    #[test]
    fn counts_follow_the_podgroups_phases_and_an_unchanged_status_is_not_rewritten() {
        let a = pg(PodGroupPhase::Inqueue);
        let b = pg(PodGroupPhase::Completed);
        let mut q = queue("ml", Some(QueueState::Open), None);
        let out = run(&q, None, &[&a, &b], None);
        assert_eq!((out.counts.inqueue, out.counts.completed), (1, 1));
        assert!(out.status_changed);
        if let Some(s) = q.status.as_mut() {
            s.inqueue = 1;
            s.completed = 1;
        }
        assert!(!run(&q, None, &[&a, &b], None).status_changed);
    }
}
