//! A simulation's agenda: the events that can fall due at an instant of the virtual clock
//! ([`Ev`]), kept in time order, those of one instant in the order they were put on it
//! ([`Agenda`]). The event loop (`engine.rs`) takes them one by one and hands each to the part
//! of the simulator it concerns.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One event on the agenda. Events of one instant run in the order they were put on it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ev {
    Fault(usize),
    FaultEnd(usize),
    /// The cluster status controller probes a member.
    Probe(String),
    /// The cluster controller looks at a member's taints again (a NoExecute taint or a
    /// toleration falls due).
    Taints(String),
    /// Graceful eviction looks at a job again.
    Eviction(String),
    /// An old copy's pod (job, ghost name) finished terminating.
    GhostGone(String, String),
    Released(String, u32),
    Finish(String, u32),
    Start(String, u32),
    JobWake(String),
    /// A scheduler timer falls due (an inqueue timeout, an SLA running out): a session runs, as
    /// the runtime's periodic one would.
    Timer,
    Arrival,
    Tick,
}

/// The events to come, in time order, and how many of them are work (not a session's tick or a
/// scheduler timer): with none, only timers are left.
#[derive(Default)]
pub(crate) struct Agenda {
    heap: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    seq: u64,
    work: usize,
}

impl Agenda {
    /// Puts `ev` on the agenda at `t` (ms), after what is there for `t` already.
    pub(crate) fn push(&mut self, t: i64, ev: Ev) {
        if !matches!(ev, Ev::Tick | Ev::Timer) {
            self.work += 1;
        }
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// The next event and when it falls due.
    pub(crate) fn pop(&mut self) -> Option<(i64, Ev)> {
        let Reverse((t, _, ev)) = self.heap.pop()?;
        if !matches!(ev, Ev::Tick | Ev::Timer) {
            self.work = self.work.saturating_sub(1);
        }
        Some((t, ev))
    }

    /// Whether nothing is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Whether nothing but ticks and timers is left.
    pub(crate) fn only_timers(&self) -> bool {
        self.work == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_in_time_order_and_one_instants_in_the_order_they_were_put() {
        let mut a = Agenda::default();
        a.push(20, Ev::Arrival);
        a.push(10, Ev::JobWake("b".into()));
        a.push(10, Ev::JobWake("a".into()));
        a.push(10, Ev::Tick);
        assert!(!a.only_timers());
        let order: Vec<(i64, Ev)> = std::iter::from_fn(|| a.pop()).collect();
        assert_eq!(
            order,
            vec![
                (10, Ev::JobWake("b".into())),
                (10, Ev::JobWake("a".into())),
                (10, Ev::Tick),
                (20, Ev::Arrival),
            ]
        );
        assert!(a.is_empty() && a.only_timers());
    }

    #[test]
    fn with_only_ticks_and_timers_left_there_is_no_work() {
        let mut a = Agenda::default();
        a.push(5, Ev::Timer);
        a.push(6, Ev::Tick);
        assert!(a.only_timers());
        a.push(7, Ev::Arrival);
        assert!(!a.only_timers());
        while let Some((_, ev)) = a.pop() {
            if ev == Ev::Arrival {
                assert!(a.only_timers());
            }
        }
    }
}
