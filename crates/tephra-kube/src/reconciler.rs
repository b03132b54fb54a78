//! The loop every controller adapter shares: reflectors feed a de-duplicated work queue of
//! keys, and one worker takes a key at a time and runs a pass over it, only while leading.
//! A failed pass is retried a second later; on gaining the lead every key is looked at.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
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

/// Watches one kind everywhere into `writer` (its store), queueing the key each object that
/// is added, changed or deleted concerns.
pub fn watch<K, Q>(
    client: &Client,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    queue: &WorkQueue<Q>,
    key: impl Fn(&K) -> Option<Q> + Send + 'static,
) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    Q: Clone + Eq + Hash + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let q = queue.clone();
    tokio::spawn(async move {
        let stream = reflector::reflector(writer, watcher::watcher(api, config).default_backoff())
            .touched_objects();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(o) => {
                    if let Some(k) = key(&o) {
                        q.push(k);
                    }
                }
                Err(e) => tracing::warn!(kind = %K::kind(&()), error = %e, "watch error"),
            }
        }
    })
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
}

/// Runs `r` over the keys `rx` delivers, only while `leadership` leads.
pub async fn run<R: Reconciler>(
    mut r: R,
    queue: WorkQueue<R::Key>,
    mut rx: mpsc::UnboundedReceiver<R::Key>,
    leadership: Leadership,
) {
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
        if let Err(e) = r.pass(&key).await {
            tracing::warn!(controller = R::NAME, key = ?key, error = %e, "pass failed; retrying");
            queue.later(key, Duration::from_secs(1));
        }
    }
}

/// The wake-ups armed per key (ms since the epoch): one timer per key and due time, so that
/// passes triggered by other changes do not start another for the same moment.
pub struct Wakes<K>(std::collections::HashMap<K, i64>);

impl<K> Default for Wakes<K> {
    fn default() -> Self {
        Self(std::collections::HashMap::new())
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Wakes<K> {
    /// Queues `key` again at `at_ms`, unless a wake-up no later than that is already armed.
    pub fn arm(&mut self, queue: &WorkQueue<K>, key: &K, at_ms: i64, now_ms: i64) {
        let armed = self.0.get(key).is_some_and(|&w| w > now_ms && w <= at_ms);
        if !armed {
            self.0.insert(key.clone(), at_ms);
            let after = Duration::from_millis(u64::try_from(at_ms - now_ms).unwrap_or(0) + 50);
            queue.later(key.clone(), after);
        }
    }

    /// Forgets `key` (its object is gone).
    pub fn forget(&mut self, key: &K) {
        self.0.remove(key);
    }
}

/// Treats one API status code (409 AlreadyExists, 404 NotFound) as success.
pub fn ok_if<T: Default>(r: Result<T, kube::Error>, code: u16) -> Result<T, kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == code => Ok(T::default()),
        other => other,
    }
}
