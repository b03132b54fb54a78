//! The executor's waiting writes: binds in a queue of their own, and the rest in two, what
//! frees or reserves room (taken first) and reports (status, ResourceBindings, Events), which
//! wait while binds are waiting or in flight, and while the loop works off a backlog (its
//! next session's binds are coming), each at most [`REPORT_WAIT`]. The workers that take
//! them are the executor's (`executor.rs`).

use std::time::Duration;

use std::sync::atomic::Ordering;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::writes::Write;

/// Which queue a write waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// What puts a pod on its node: a bind, a declared pod's copy, a gang's claims.
    Bind,
    /// Everything else.
    Rest,
}

pub(crate) fn class(w: &Write) -> Class {
    match w {
        Write::Bind { .. } | Write::Place { .. } | Write::PreBind { .. } => Class::Bind,
        _ => Class::Rest,
    }
}

/// Whether a write of the rest may wait while binds are waiting: what reports (PodGroup,
/// Queue, HyperNode and binding status, pods' conditions, ResourceBindings, Events) does; what
/// frees or reserves room (evictions, purges, eviction tasks, nominations, deallocations) does
/// not.
pub(crate) fn reports(w: &Write) -> bool {
    matches!(
        w,
        Write::GroupStatus { .. }
            | Write::KubeGroupConditions { .. }
            | Write::GroupAnnotation { .. }
            | Write::QueueStatus { .. }
            | Write::HyperNodeStatus { .. }
            | Write::Binding { .. }
            | Write::BindingStatus { .. }
            | Write::DeclaredStatus { .. }
            | Write::DeclaredMember { .. }
            | Write::PodCondition { .. }
            | Write::Event { .. }
    )
}

/// How long a [report](reports) waits at most while binds are waiting.
pub const REPORT_WAIT: Duration = Duration::from_secs(30);

/// The writes waiting for a worker, and whether the executor still takes any. Binds have a
/// queue of their own; the rest two: what frees or reserves room, taken first, and reports,
/// which wait while binds are waiting (each at most [`REPORT_WAIT`]), so that an API server
/// busy with a backlog of binds serves them first (at 50,000 pods a PodGroup status and a
/// ResourceBinding per gang of 8 were a fifth of the writes).
#[derive(Default)]
pub(crate) struct Queues {
    waiting: std::sync::Mutex<Waiting>,
    /// One per class: a worker of that class waits here for a write.
    ready: [Notify; 2],
    /// Told when the binds are done (none waiting, none in flight) or the hold is lifted:
    /// the pods' best-effort Events wait for it.
    drained: Notify,
    closed: std::sync::atomic::AtomicBool,
    /// Binds taken by a worker and not finished yet.
    in_flight: std::sync::atomic::AtomicUsize,
    /// Reports held while the loop works off a backlog in growing sessions: between two of
    /// them the binds' queue may run dry for a moment, and a report written then would take
    /// the API server from the binds that follow.
    held: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Waiting {
    binds: std::collections::VecDeque<Write>,
    rest: std::collections::VecDeque<Write>,
    /// Reports, with when each came.
    reports: std::collections::VecDeque<(Instant, Write)>,
}

impl Queues {
    fn slot(c: Class) -> usize {
        match c {
            Class::Bind => 0,
            Class::Rest => 1,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a write that may run now (it entered its lane).
    pub(crate) fn push(&self, w: Write) {
        let c = class(&w);
        {
            let mut q = self.lock();
            match c {
                Class::Bind => q.binds.push_back(w),
                Class::Rest if reports(&w) => q.reports.push_back((Instant::now(), w)),
                Class::Rest => q.rest.push_back(w),
            }
        }
        self.ready[Self::slot(c)].notify_one();
    }

    /// The next write of class `c`, waiting for one; `None` once closed and drained.
    pub(crate) async fn next(&self, c: Class) -> Option<Write> {
        let slot = Self::slot(c);
        loop {
            let notified = self.ready[slot].notified();
            let closed = self.is_closed();
            let until = {
                let mut q = self.lock();
                match c {
                    Class::Bind => {
                        if let Some(w) = q.binds.pop_front() {
                            self.in_flight.fetch_add(1, Ordering::SeqCst);
                            return Some(w);
                        }
                        None
                    }
                    Class::Rest => {
                        if let Some(w) = q.rest.pop_front() {
                            return Some(w);
                        }
                        let binding = !q.binds.is_empty() || self.binding();
                        match q.reports.front() {
                            Some((since, _))
                                if closed || !binding || since.elapsed() >= REPORT_WAIT =>
                            {
                                return q.reports.pop_front().map(|(_, w)| w);
                            }
                            Some((since, _)) => Some(*since + REPORT_WAIT),
                            None => None,
                        }
                    }
                }
            };
            if closed && until.is_none() {
                return None;
            }
            match until {
                Some(at) => {
                    let _ = tokio::time::timeout_at(at, notified).await;
                }
                None => notified.await,
            }
        }
    }

    /// Whether binds are in flight, or reports are held for the binds to come.
    fn binding(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0 || self.held.load(Ordering::SeqCst)
    }

    /// A bind a worker took is finished: once none waits, none is in flight and nothing is
    /// held, the reports and Events waiting behind the binds may go.
    pub(crate) fn bind_done(&self) {
        let left = self
            .in_flight
            .fetch_sub(1, Ordering::SeqCst)
            .saturating_sub(1);
        if left == 0 {
            self.wake_reports();
        }
    }

    /// Holds the reports (`true`) while the loop works off a backlog, or lets them go.
    pub(crate) fn hold_reports(&self, hold: bool) {
        if !self.held.swap(hold, Ordering::SeqCst) || hold {
            return;
        }
        self.wake_reports();
    }

    fn wake_reports(&self) {
        let idle = self.lock().binds.is_empty() && !self.binding();
        if idle {
            self.ready[1].notify_waiters();
            self.drained.notify_waiters();
        }
    }

    /// Returns once no bind is waiting or in flight and nothing is held (or the executor is
    /// closing), or after [`REPORT_WAIT`].
    pub(crate) async fn after_binds(&self) {
        let until = Instant::now() + REPORT_WAIT;
        loop {
            let drained = self.drained.notified();
            if self.is_closed() || (self.lock().binds.is_empty() && !self.binding()) {
                return;
            }
            if tokio::time::timeout_at(until, drained).await.is_err() {
                return;
            }
        }
    }

    /// A write that is not a report waits behind `object`'s report: that report waits no
    /// longer, so that nothing waits behind binds but reports.
    pub(crate) fn promote(&self, object: &str) {
        let promoted = {
            let mut q = self.lock();
            let at = q
                .reports
                .iter()
                .position(|(_, w)| w.object().as_deref() == Some(object));
            match at.and_then(|i| q.reports.remove(i)) {
                Some((_, w)) => {
                    q.rest.push_back(w);
                    true
                }
                None => false,
            }
        };
        if promoted {
            self.ready[1].notify_one();
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        for r in &self.ready {
            r.notify_waiters();
        }
        self.drained.notify_waiters();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}
