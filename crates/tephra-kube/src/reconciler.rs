//! What the controllers' adapters share. The job, queue and failover controllers run on kube-runtime's
//! `Controller`, started while this replica leads ([`while_leading`]), their triggers
//! watched into the stores their passes read ([`watched`]), with an error policy that backs off
//! per object ([`Failures`]). The PodGroup controller, which keeps only the pods that want a
//! PodGroup rather than a store of every pod, still runs on the loop here: its watch feeds a
//! de-duplicated work queue of keys, and one worker takes a key at a time and runs a pass over
//! it, only while leading.
//!
//! Either way a failed pass is retried with per-key exponential backoff ([`backoff`]: 1 s,
//! doubling, at most 5 min), one retry chain per key however many changes queue it meanwhile,
//! and counted by reason in `tephra_controller_errors_total`; on gaining the lead every object
//! is looked at.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::leader::Leadership;

/// The keys waiting for a pass: a key waits at most once.
pub struct WorkQueue<K> {
    tx: mpsc::UnboundedSender<K>,
    waiting: Arc<Mutex<HashSet<K>>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            waiting: Arc::clone(&self.waiting),
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// A queue and the receiving end the worker reads.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<K>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx,
                waiting: Arc::new(Mutex::new(HashSet::new())),
            },
            rx,
        )
    }

    /// Queues `key` unless it already waits.
    pub fn push(&self, key: K) {
        let fresh = self
            .waiting
            .lock()
            .map(|mut w| w.insert(key.clone()))
            .unwrap_or(true);
        if fresh {
            let _ = self.tx.send(key);
        }
    }

    /// The worker took `key`: a change from now on queues it again.
    pub fn taken(&self, key: &K) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(key);
        }
    }

    /// Queues `key` after `after`.
    pub fn later(&self, key: K, after: Duration) {
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            q.push(key);
        });
    }
}

/// Every object of one kind, as it changes, kept in `store` on the way.
pub fn watched<K>(
    client: &Client,
    store: reflector::store::Writer<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    reflector::reflector(
        store,
        watcher::watcher(Api::all(client.clone()), config).backoff(crate::retry::watch()),
    )
    .touched_objects()
}

/// Queues every key `keys` gives, every `every`.
pub fn resync<Q: Clone + Eq + Hash + Send + 'static>(
    queue: &WorkQueue<Q>,
    every: Duration,
    keys: impl Fn() -> Vec<Q> + Send + 'static,
) -> JoinHandle<()> {
    let q = queue.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            for k in keys() {
                q.push(k);
            }
        }
    })
}

/// The wait before retrying a key whose last `failures` passes failed: 1 s, doubling with
/// each failure, at most 5 min.
pub fn backoff(failures: u32) -> Duration {
    const FIRST: Duration = Duration::from_secs(1);
    const CAP: Duration = Duration::from_secs(300);
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(CAP)
}

/// `tephra_controller_errors_total{controller, reason}`, where the binary registers it (a
/// default one counts in no registry).
#[derive(Clone, Default)]
pub struct ErrorCounter(Option<prometheus::IntCounterVec>);

impl ErrorCounter {
    /// Counts into `c`, whose labels are `controller` and `reason`.
    pub fn new(c: prometheus::IntCounterVec) -> Self {
        Self(Some(c))
    }

    /// Counts one failed pass of `controller` for `reason`.
    pub fn inc(&self, controller: &str, reason: &str) {
        if let Some(c) = &self.0 {
            c.with_label_values(&[controller, reason]).inc();
        }
    }
}

impl Debug for ErrorCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ErrorCounter"
        } else {
            "ErrorCounter(none)"
        })
    }
}

/// The reason of a failed API request, as the API server gave it (`Forbidden`, `Conflict`,
/// `Invalid`, ...), or what failed before an answer.
pub fn api_reason(e: &kube::Error) -> &str {
    match e {
        kube::Error::Api(s) if !s.reason.is_empty() => &s.reason,
        kube::Error::Api(_) => "Unknown",
        kube::Error::HyperError(_) | kube::Error::Service(_) => "Unreachable",
        _ => "ClientError",
    }
}

/// The keys whose passes fail, each with its failures so far and the generation of its one
/// live retry timer (a timer of an older generation is stale and queues nothing).
struct Retries<K> {
    state: Arc<Mutex<std::collections::HashMap<K, (u32, u64)>>>,
}

impl<K: Clone + Eq + Hash + Send + 'static> Retries<K> {
    fn new() -> Self {
        Self {
            state: Arc::default(),
        }
    }

    /// A pass over `key` failed: its retry is armed after the backoff its failures earn,
    /// replacing any retry armed before. Returns the wait.
    fn failed(&self, queue: &WorkQueue<K>, key: K) -> Duration {
        let Ok(mut s) = self.state.lock() else {
            return Duration::ZERO;
        };
        let entry = s.entry(key.clone()).or_insert((0, 0));
        entry.0 = entry.0.saturating_add(1);
        entry.1 = entry.1.wrapping_add(1);
        let (failures, generation) = *entry;
        drop(s);
        let wait = backoff(failures);
        let (state, q) = (Arc::clone(&self.state), queue.clone());
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let live = state
                .lock()
                .is_ok_and(|s| s.get(&key).is_some_and(|&(_, g)| g == generation));
            if live {
                q.push(key);
            }
        });
        wait
    }

    /// A pass over `key` succeeded: its failures are forgotten and its retry is stale.
    fn succeeded(&self, key: &K) {
        if let Ok(mut s) = self.state.lock() {
            s.remove(key);
        }
    }
}

/// One controller's passes.
pub trait Reconciler: Send + 'static {
    /// What a pass is over.
    type Key: Clone + Eq + Hash + Debug + Send + Sync + 'static;
    /// Why a pass failed.
    type Error: std::fmt::Display + Send;

    /// What the controller is called, in logs.
    const NAME: &'static str;

    /// Every key the controller knows (looked at when it gains the lead).
    fn keys(&self) -> Vec<Self::Key>;

    /// One pass over `key`.
    fn pass(
        &mut self,
        key: &Self::Key,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send;

    /// Why a pass failed, in one word, for `tephra_controller_errors_total`.
    fn reason(e: &Self::Error) -> &str;
}

/// Runs `r` over the keys `rx` delivers, only while `leadership` leads, counting failed
/// passes in `errors`.
pub async fn run<R: Reconciler>(
    mut r: R,
    queue: WorkQueue<R::Key>,
    mut rx: mpsc::UnboundedReceiver<R::Key>,
    leadership: Leadership,
    errors: ErrorCounter,
) {
    let retries = Retries::new();
    let mut was_leader = false;
    while let Some(key) = rx.recv().await {
        queue.taken(&key);
        let leading = leadership.is_leader();
        if leading && !was_leader {
            for k in r.keys() {
                queue.push(k);
            }
        }
        was_leader = leading;
        if !leading {
            continue;
        }
        match r.pass(&key).await {
            Ok(()) => retries.succeeded(&key),
            Err(e) => {
                errors.inc(R::NAME, R::reason(&e));
                let wait = retries.failed(&queue, key.clone());
                tracing::warn!(controller = R::NAME, key = ?key, error = %e,
                    retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "pass failed; retrying");
            }
        }
    }
}

/// The failures of each key's passes in a row, for a kube-runtime `Controller`'s
/// `error_policy`: each failure earns the next [`backoff`], a success forgets them.
pub struct Failures<K>(Mutex<std::collections::HashMap<K, u32>>);

impl<K> Default for Failures<K> {
    fn default() -> Self {
        Self(Mutex::new(std::collections::HashMap::new()))
    }
}

impl<K: Eq + Hash> Failures<K> {
    /// A pass over `key` failed: the wait before it is tried again.
    pub fn failed(&self, key: K) -> Duration {
        let Ok(mut m) = self.0.lock() else {
            return backoff(1);
        };
        let n = m.entry(key).or_insert(0);
        *n = n.saturating_add(1);
        backoff(*n)
    }

    /// A pass over `key` succeeded.
    pub fn succeeded(&self, key: &K) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(key);
        }
    }
}

/// Completes once this replica has lost the lead.
pub type Lost = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>;

/// Runs what `run` starts (a kube-runtime `Controller`, say) only while `leadership` leads:
/// started anew each time the lead is gained, so that every object is looked at then, and
/// given a future that completes once the lead is lost, to shut down on.
pub async fn while_leading<F, Fut>(leadership: Leadership, mut run: F)
where
    F: FnMut(Lost) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    const POLL: Duration = Duration::from_millis(100);
    loop {
        while !leadership.is_leader() {
            tokio::time::sleep(POLL).await;
        }
        let l = leadership.clone();
        let lost = Box::pin(async move {
            while l.is_leader() {
                tokio::time::sleep(POLL).await;
            }
        });
        run(lost).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_doubling_from_a_second_to_five_minutes() {
        let waits: Vec<u64> = [1, 2, 3, 4, 9, 10, 40]
            .map(|f| backoff(f).as_secs())
            .to_vec();
        assert_eq!(waits, [1, 2, 4, 8, 256, 300, 300]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_that_fails_again_and_again_has_one_retry_chain() {
        let (queue, mut rx) = WorkQueue::<u32>::new();
        let retries = Retries::new();
        // Three passes fail before any retry is due (each change queued it again).
        retries.failed(&queue, 7);
        retries.failed(&queue, 7);
        let wait = retries.failed(&queue, 7);
        assert_eq!(wait, Duration::from_secs(4));
        // The retries armed by the first two failures are stale: nothing comes when they fall due.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(rx.try_recv().is_err(), "a stale retry queued the key");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(rx.try_recv().ok(), Some(7));
        // A success forgets the failures: the next failure waits a second again, and a retry
        // armed before the success queues nothing.
        queue.taken(&7);
        retries.failed(&queue, 7);
        retries.succeeded(&7);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(rx.try_recv().is_err());
        assert_eq!(retries.failed(&queue, 7), Duration::from_secs(1));
    }

    #[test]
    fn each_failure_in_a_row_doubles_the_wait_and_a_success_starts_over() {
        let f = Failures::default();
        let waits: Vec<u64> = (0..4).map(|_| f.failed("a").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8]);
        assert_eq!(f.failed("b"), Duration::from_secs(1), "keys count apart");
        f.succeeded(&"a");
        assert_eq!(f.failed("a"), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn what_runs_while_leading_stops_when_the_lead_is_lost_and_starts_anew_when_regained() {
        let leadership = Leadership::candidate();
        let terms = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let running = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (t, r) = (Arc::clone(&terms), Arc::clone(&running));
        let task = tokio::spawn(while_leading(leadership.clone(), move |lost| {
            let (t, r) = (Arc::clone(&t), Arc::clone(&r));
            async move {
                t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                r.store(true, std::sync::atomic::Ordering::SeqCst);
                lost.await;
                r.store(false, std::sync::atomic::Ordering::SeqCst);
            }
        }));
        let load =
            |a: &Arc<std::sync::atomic::AtomicBool>| a.load(std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!load(&running), "a candidate runs nothing");
        leadership.set(true);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(load(&running));
        leadership.set(false);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!load(&running), "the lead lost stops it");
        leadership.set(true);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(load(&running));
        assert_eq!(
            terms.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "one start per term"
        );
        task.abort();
    }
}

/// The pause a controller's trigger stream takes after one of its watches fails: one second,
/// never growing. Every watch feeding a controller already retries with a backoff of its own
/// ([`watched`]); kube's default trigger backoff (up to 30 s, reset only after two minutes
/// without an error) comes on top of those and pauses every trigger at once, so after its
/// API server came back a controller stayed blind for one such pause per error its watches had
/// piled up: a Job created then waited up to minutes for its pods.
#[derive(Clone, Copy, Debug, Default)]
pub struct TriggerBackoff;

impl Iterator for TriggerBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_secs(1))
    }
}

impl kube::runtime::utils::Backoff for TriggerBackoff {
    fn reset(&mut self) {}
}
