//! The in-memory storage of one API server: objects per kind in key order, one global
//! resourceVersion counter (like etcd's revision), and a bounded history of changes per kind.
//!
//! Every write takes the one lock, assigns the next resourceVersion, appends the change to the
//! kind's history and hands it to every subscribed watcher, in that order. A watch subscribes
//! under the same lock, after replaying the history it asked for, so no watcher misses or
//! repeats a change, and each sees them in resourceVersion order, whatever the writers do.
//! One lock rather than a `DashMap` of kinds: `benches/store.rs` measured no difference (pods
//! take most writes, and one kind is one shard), and one lock keeps etcd's single revision
//! order across kinds (README, "Shared state").

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use crate::pagination::Key;

/// A stored object: its JSON value, its resourceVersion, and its serialized bytes, computed
/// once and shared by every list and watcher that sends it.
#[derive(Debug)]
pub struct Stored {
    /// The object, with `metadata.resourceVersion` set.
    pub value: Value,
    /// The resourceVersion.
    pub rv: u64,
    json: OnceLock<Bytes>,
    item_json: OnceLock<Bytes>,
}

/// An object's fields but its `apiVersion` and `kind`, serialized without a copy.
struct WithoutType<'a>(&'a serde_json::Map<String, Value>);

impl serde::Serialize for WithoutType<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0 {
            if k != "apiVersion" && k != "kind" {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

impl Stored {
    fn new(value: Value, rv: u64) -> Self {
        Self {
            value,
            rv,
            json: OnceLock::new(),
            item_json: OnceLock::new(),
        }
    }

    /// An object that is not stored (a dry run's answer).
    pub fn detached(value: Value) -> Obj {
        Arc::new(Self::new(value, 0))
    }

    /// The object as compact JSON.
    pub fn json(&self) -> Bytes {
        self.json
            .get_or_init(|| Bytes::from(serde_json::to_vec(&self.value).unwrap_or_default()))
            .clone()
    }

    /// The object as a built-in kind's list item: kube-apiserver leaves a typed list's items
    /// without `apiVersion` and `kind`.
    pub fn item_json(&self) -> Bytes {
        self.item_json
            .get_or_init(|| {
                let bytes = match self.value.as_object() {
                    Some(m) => serde_json::to_vec(&WithoutType(m)),
                    None => serde_json::to_vec(&self.value),
                };
                Bytes::from(bytes.unwrap_or_default())
            })
            .clone()
    }

    /// `(namespace, name)`.
    pub fn key(&self) -> Key {
        key_of(&self.value)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// A shared stored object.
pub type Obj = Arc<Stored>;

/// The store key of an object.
pub fn key_of(value: &Value) -> Key {
    let get = |p: &str| {
        value
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (get("/metadata/namespace"), get("/metadata/name"))
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed; the object is its last state with the deletion's resourceVersion.
    Deleted,
}

impl EventType {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change.
#[derive(Debug)]
pub struct Event {
    /// What happened.
    pub type_: EventType,
    /// The object after the change (its resourceVersion is the change's).
    pub object: Obj,
    /// The object before (for modifications), so selector watchers can tell an object that
    /// starts or stops matching.
    pub prev: Option<Obj>,
}

impl Event {
    /// The change's resourceVersion.
    pub fn rv(&self) -> u64 {
        self.object.rv
    }
}

/// Where changes are delivered to one watcher.
pub enum Subscriber {
    /// An HTTP watch: a bounded buffer; a watcher that falls that far behind is dropped (its
    /// stream ends and the client resumes from its last resourceVersion, as with a real server).
    Bounded(mpsc::Sender<Arc<Event>>),
    /// An in-process consumer (the simulated kubelet) that must see everything.
    Unbounded(mpsc::UnboundedSender<Arc<Event>>),
}

impl Subscriber {
    fn deliver(&self, event: &Arc<Event>) -> bool {
        match self {
            Self::Bounded(tx) => tx.try_send(event.clone()).is_ok(),
            Self::Unbounded(tx) => tx.send(event.clone()).is_ok(),
        }
    }
}

#[derive(Default)]
struct KindState {
    objects: BTreeMap<Key, Obj>,
    history: VecDeque<Arc<Event>>,
    /// Every change with a resourceVersion above this is still in `history`.
    floor: u64,
    watchers: Vec<Subscriber>,
}

struct Inner {
    rv: u64,
    kinds: HashMap<String, KindState>,
    /// How many `ownerReferences` of stored objects name each uid: the garbage collector looks
    /// for the dependents of a removed object only when something names it.
    owner_refs: HashMap<String, usize>,
}

/// The uids an object's `ownerReferences` name.
fn owner_uids(value: &Value) -> impl Iterator<Item = &str> {
    value
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
}

impl Inner {
    fn count_owners(&mut self, value: &Value, add: bool) {
        for uid in owner_uids(value) {
            if add {
                *self.owner_refs.entry(uid.to_string()).or_default() += 1;
            } else if let Some(n) = self.owner_refs.get_mut(uid) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.owner_refs.remove(uid);
                }
            }
        }
    }
}

/// Why a write was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// No such object.
    NotFound,
    /// The name is taken.
    AlreadyExists,
    /// The object changed since the caller read it.
    Conflict,
}

/// The start of a watch.
pub struct WatchStart {
    /// Objects that exist now, to be sent as synthetic ADDED events (a watch from "now").
    pub initial: Vec<Obj>,
    /// Changes after the requested resourceVersion, from the history.
    pub backlog: Vec<Arc<Event>>,
    /// The resourceVersion at subscription.
    pub rv: u64,
}

/// The store of one API server.
pub struct Store {
    inner: Mutex<Inner>,
    history_limit: usize,
}

impl Store {
    /// A store that keeps the last `history_limit` changes of each kind for watches.
    pub fn new(history_limit: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                kinds: HashMap::new(),
                owner_refs: HashMap::new(),
            }),
            history_limit: history_limit.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, kind: &str, key: &Key) -> Option<Obj> {
        self.lock()
            .kinds
            .get(kind)
            .and_then(|k| k.objects.get(key))
            .cloned()
    }

    /// Objects in key order (all namespaces when `namespace` is `None`), after `after` when
    /// resuming a chunked list, and the resourceVersion they were read at.
    pub fn list(
        &self,
        kind: &str,
        namespace: Option<&str>,
        after: Option<&Key>,
    ) -> (Vec<Obj>, u64) {
        let inner = self.lock();
        let rv = inner.rv;
        let Some(state) = inner.kinds.get(kind) else {
            return (Vec::new(), rv);
        };
        let start = match (after, namespace) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let items = state
            .objects
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| namespace.is_none_or(|ns| k.0 == ns))
            .map(|(_, o)| o.clone())
            .collect();
        (items, rv)
    }

    fn publish(&self, inner: &mut Inner, kind: &str, event: Event) {
        if let Some(prev) = &event.prev {
            inner.count_owners(&prev.value, false);
        }
        if event.type_ != EventType::Deleted {
            inner.count_owners(&event.object.value, true);
        }
        let event = Arc::new(event);
        let state = inner.kinds.entry(kind.to_string()).or_default();
        state.watchers.retain(|w| w.deliver(&event));
        state.history.push_back(event);
        while state.history.len() > self.history_limit {
            if let Some(old) = state.history.pop_front() {
                state.floor = old.rv();
            }
        }
    }

    fn stamp(value: &mut Value, rv: u64) {
        if !value.get("metadata").is_some_and(Value::is_object) {
            value["metadata"] = json!({});
        }
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
    }

    /// Stores a new object under the next resourceVersion.
    pub fn create(&self, kind: &str, mut value: Value) -> Result<Obj, StoreError> {
        let key = key_of(&value);
        let mut inner = self.lock();
        let exists = inner
            .kinds
            .get(kind)
            .is_some_and(|k| k.objects.contains_key(&key));
        if exists {
            return Err(StoreError::AlreadyExists);
        }
        inner.rv += 1;
        let rv = inner.rv;
        Self::stamp(&mut value, rv);
        let obj = Arc::new(Stored::new(value, rv));
        inner
            .kinds
            .entry(kind.to_string())
            .or_default()
            .objects
            .insert(key, obj.clone());
        self.publish(
            &mut inner,
            kind,
            Event {
                type_: EventType::Added,
                object: obj.clone(),
                prev: None,
            },
        );
        Ok(obj)
    }

    /// Replaces an object if it is still at `expected_rv`.
    pub fn replace(
        &self,
        kind: &str,
        key: &Key,
        expected_rv: u64,
        mut value: Value,
    ) -> Result<Obj, StoreError> {
        let mut inner = self.lock();
        let prev = inner
            .kinds
            .get(kind)
            .and_then(|k| k.objects.get(key))
            .cloned()
            .ok_or(StoreError::NotFound)?;
        if prev.rv != expected_rv {
            return Err(StoreError::Conflict);
        }
        inner.rv += 1;
        let rv = inner.rv;
        Self::stamp(&mut value, rv);
        let obj = Arc::new(Stored::new(value, rv));
        if let Some(state) = inner.kinds.get_mut(kind) {
            state.objects.insert(key.clone(), obj.clone());
        }
        self.publish(
            &mut inner,
            kind,
            Event {
                type_: EventType::Modified,
                object: obj.clone(),
                prev: Some(prev),
            },
        );
        Ok(obj)
    }

    /// Removes an object (if still at `expected_rv`, when given). The returned last state
    /// carries the deletion's resourceVersion, as the DELETED event does.
    pub fn remove(
        &self,
        kind: &str,
        key: &Key,
        expected_rv: Option<u64>,
    ) -> Result<Obj, StoreError> {
        let mut inner = self.lock();
        let prev = inner
            .kinds
            .get(kind)
            .and_then(|k| k.objects.get(key))
            .cloned()
            .ok_or(StoreError::NotFound)?;
        if expected_rv.is_some_and(|rv| rv != prev.rv) {
            return Err(StoreError::Conflict);
        }
        if let Some(state) = inner.kinds.get_mut(kind) {
            state.objects.remove(key);
        }
        inner.rv += 1;
        let rv = inner.rv;
        let mut last = prev.value.clone();
        Self::stamp(&mut last, rv);
        let obj = Arc::new(Stored::new(last, rv));
        self.publish(
            &mut inner,
            kind,
            Event {
                type_: EventType::Deleted,
                object: obj.clone(),
                prev: Some(prev),
            },
        );
        Ok(obj)
    }

    /// Subscribes to a kind's changes. `from: None` starts from now, returning the current
    /// objects to send first; `Some(rv)` replays every kept change after `rv`, or fails with
    /// the oldest resourceVersion still kept when `rv` is older than that.
    pub fn watch(
        &self,
        kind: &str,
        from: Option<u64>,
        subscriber: Subscriber,
    ) -> Result<WatchStart, u64> {
        let mut inner = self.lock();
        let rv = inner.rv;
        let state = inner.kinds.entry(kind.to_string()).or_default();
        let mut start = WatchStart {
            initial: Vec::new(),
            backlog: Vec::new(),
            rv,
        };
        match from {
            None => start.initial = state.objects.values().cloned().collect(),
            Some(from) => {
                if from < state.floor {
                    return Err(state.floor);
                }
                let first = state.history.partition_point(|e| e.rv() <= from);
                start.backlog = state.history.iter().skip(first).cloned().collect();
            }
        }
        state.watchers.push(subscriber);
        Ok(start)
    }

    /// Forgets a kind entirely (its CRD was deleted); its watchers' streams end.
    pub fn drop_kind(&self, kind: &str) -> Vec<Obj> {
        let mut inner = self.lock();
        let dropped: Vec<Obj> = inner
            .kinds
            .remove(kind)
            .map(|s| s.objects.into_values().collect())
            .unwrap_or_default();
        for o in &dropped {
            inner.count_owners(&o.value, false);
        }
        dropped
    }

    /// Whether some stored object names `uid` in its `ownerReferences`.
    pub fn is_named_as_owner(&self, uid: &str) -> bool {
        self.lock().owner_refs.contains_key(uid)
    }

    /// Number of objects of a kind.
    pub fn count(&self, kind: &str) -> usize {
        self.lock().kinds.get(kind).map_or(0, |k| k.objects.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn resource_versions_are_global_and_increase() {
        let s = Store::new(10);
        let a = s.create("/pods", obj("a")).expect("created");
        let b = s.create("/configmaps", obj("b")).expect("created");
        assert!(b.rv > a.rv);
        assert_eq!(
            s.create("/pods", obj("a")).err(),
            Some(StoreError::AlreadyExists)
        );
        let key = a.key();
        assert_eq!(
            s.replace("/pods", &key, a.rv + 100, obj("a")).err(),
            Some(StoreError::Conflict)
        );
        let a2 = s.replace("/pods", &key, a.rv, obj("a")).expect("replaced");
        assert!(a2.rv > b.rv);
        assert_eq!(a2.value["metadata"]["resourceVersion"], a2.rv.to_string());
    }

    #[test]
    fn a_watch_replays_history_and_refuses_what_was_dropped() {
        let s = Store::new(3);
        let first = s.create("/pods", obj("p0")).expect("created");
        for i in 1..6 {
            s.create("/pods", obj(&format!("p{i}"))).expect("created");
        }
        let (tx, _rx) = mpsc::unbounded_channel();
        assert!(
            s.watch("/pods", Some(first.rv), Subscriber::Unbounded(tx))
                .is_err()
        );
        let (tx, _rx) = mpsc::unbounded_channel();
        let start = s
            .watch("/pods", Some(s.current_rv() - 2), Subscriber::Unbounded(tx))
            .expect("kept");
        assert_eq!(start.backlog.len(), 2);
    }

    #[test]
    fn chunked_lists_resume_after_a_key() {
        let s = Store::new(10);
        for i in 0..5 {
            s.create("/pods", obj(&format!("p{i}"))).expect("created");
        }
        let (all, _) = s.list("/pods", Some("default"), None);
        let (rest, _) = s.list("/pods", Some("default"), Some(&all[1].key()));
        assert_eq!(rest.len(), 3);
        assert_eq!(s.list("/pods", Some("other"), None).0.len(), 0);
    }
}
