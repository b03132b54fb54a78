//! A simulation's agenda: the events that can fall due at an instant of the virtual clock
//! ([`Ev`]), kept in time order, those of one instant in the order they were put on it
//! ([`Agenda`]), and when sessions run ([`Cadence`]). The event loop (`engine.rs`) takes the
//! events one by one and hands each to the part of the simulator it concerns.

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
    /// The CronJob controller looks at a CronJob (by index) at its next scheduled time.
    Cron(usize),
    /// The JobFlow controller looks at a JobFlow (by index): it is submitted, or a Job of it
    /// ended.
    Flow(usize),
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

/// When sessions run: on the scheduler's period, only when something changed since the last
/// one, never twice at one instant; and the scheduler's own timer on the agenda.
pub(crate) struct Cadence {
    /// The scheduler period, in ms.
    pub(crate) period: i64,
    /// Something changed since the last session.
    pub(crate) dirty: bool,
    /// A session is on the agenda.
    pub(crate) tick_pending: bool,
    /// When the last session ran.
    pub(crate) last_tick: Option<i64>,
    /// The scheduler timer already on the agenda, in ms.
    pub(crate) timer_at: Option<i64>,
    /// Sessions in a row that bound and evicted nothing.
    pub(crate) quiet_sessions: u32,
    /// Sessions so far.
    pub(crate) session: u64,
}

impl Cadence {
    /// A cadence of `period` ms, nothing run yet.
    pub(crate) fn new(period: i64) -> Self {
        Self {
            period: period.max(1),
            dirty: false,
            tick_pending: false,
            last_tick: None,
            timer_at: None,
            quiet_sessions: 0,
            session: 0,
        }
    }

    /// Something changed at `now`: when the next session must run, if none is on the agenda
    /// yet (the next period boundary; a change made by a session waits for the next period,
    /// never the same instant).
    pub(crate) fn changed(&mut self, now: i64) -> Option<i64> {
        self.dirty = true;
        if self.tick_pending {
            return None;
        }
        let next = (now + self.period - 1) / self.period * self.period;
        let next = if next < now { now } else { next };
        let next = if self.last_tick == Some(next) {
            next + self.period
        } else {
            next
        };
        self.tick_pending = true;
        Some(next)
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

    #[test]
    fn a_change_asks_for_one_session_at_the_next_period_never_the_instant_of_the_last() {
        let mut c = Cadence::new(1000);
        assert_eq!(c.changed(1500), Some(2000));
        assert_eq!(c.changed(1700), None, "one session on the agenda at a time");
        // The session at 2000 ran; a change it made waits for the next period.
        c.tick_pending = false;
        c.last_tick = Some(2000);
        assert_eq!(c.changed(2000), Some(3000));
        c.tick_pending = false;
        assert_eq!(
            c.changed(3000),
            Some(3000),
            "a change from elsewhere runs at once"
        );
    }
}
