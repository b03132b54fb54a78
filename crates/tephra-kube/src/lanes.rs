//! Per-object ordering for the executor: writes to one object are carried out one at a time,
//! in the order they were planned, while writes to different objects run in parallel. A write
//! whose object is busy waits in that object's lane without holding a worker, so a status
//! planned later (a pod now Running) can never land before one planned earlier (Pending).
//!
//! The workers share the lanes through a `DashMap` (sharded locks), measured against one mutex
//! around a `HashMap` with `cargo bench -p tephra-kube --bench lanes` (README, "Shared state").
//! Each step holds its object's entry for the whole step, so a write cannot slip into a lane
//! that is being emptied.

use std::collections::VecDeque;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

/// The objects with a write in flight, each with the writes waiting behind it.
pub struct Lanes<T> {
    busy: DashMap<String, VecDeque<T>>,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Self {
            busy: DashMap::new(),
        }
    }
}

impl<T> Lanes<T> {
    /// `item` runs now (`Some`) when its object is idle, which makes the object busy until
    /// [`Lanes::leave`]; otherwise it waits behind the object's running write (`None`).
    pub fn enter(&self, key: &str, item: T) -> Option<T> {
        if let Some(mut waiting) = self.busy.get_mut(key) {
            waiting.push_back(item);
            return None;
        }
        match self.busy.entry(key.to_string()) {
            Entry::Occupied(mut waiting) => {
                waiting.get_mut().push_back(item);
                None
            }
            Entry::Vacant(idle) => {
                idle.insert(VecDeque::new());
                Some(item)
            }
        }
    }

    /// The object's running write is done: the next write waiting for it (the object stays
    /// busy), or `None` and the object is idle.
    pub fn leave(&self, key: &str) -> Option<T> {
        // The entry's shard stays locked from the pop to the removal: an `enter` in between
        // would otherwise queue behind a lane nobody empties.
        let removed = self
            .busy
            .remove_if_mut(key, |_, waiting| waiting.is_empty());
        if removed.is_some() {
            return None;
        }
        self.busy.get_mut(key)?.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_one_object_run_one_at_a_time_in_planned_order() {
        let lanes = Lanes::default();
        assert_eq!(lanes.enter("pod/a", 1), Some(1));
        assert_eq!(lanes.enter("pod/a", 2), None);
        assert_eq!(lanes.enter("pod/a", 3), None);
        assert_eq!(lanes.leave("pod/a"), Some(2));
        assert_eq!(lanes.leave("pod/a"), Some(3));
        assert_eq!(lanes.leave("pod/a"), None);
        // Idle again: the next write runs at once.
        assert_eq!(lanes.enter("pod/a", 4), Some(4));
    }

    /// Workers on several threads, each planning writes to a few shared objects in its own
    /// order: every write is carried out once, and one object's writes from one worker in the
    /// order that worker planned them, however the threads interleave.
    #[test]
    fn under_contention_no_write_is_lost_or_reordered() {
        use std::sync::{Arc, Mutex};
        const THREADS: usize = 4;
        const WRITES: usize = 5_000;
        let lanes: Arc<Lanes<(usize, usize)>> = Arc::default();
        let done: Arc<Mutex<Vec<(String, usize, usize)>>> = Arc::default();
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (lanes, done) = (Arc::clone(&lanes), Arc::clone(&done));
                std::thread::spawn(move || {
                    for i in 0..WRITES {
                        let key = format!("pod/{}", (i * 7 + t) % 3);
                        let mut next = lanes.enter(&key, (t, i));
                        while let Some(w) = next {
                            done.lock().unwrap().push((key.clone(), w.0, w.1));
                            next = lanes.leave(&key);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let done = done.lock().unwrap();
        assert_eq!(done.len(), THREADS * WRITES, "every write carried out once");
        let mut last: std::collections::HashMap<(String, usize), usize> = Default::default();
        for (key, t, i) in done.iter() {
            if let Some(prev) = last.insert((key.clone(), *t), *i) {
                assert!(prev < *i, "{key}: worker {t}'s write {i} ran after {prev}");
            }
        }
        assert!(lanes.busy.is_empty(), "every lane idle at the end");
    }

    #[test]
    fn writes_to_other_objects_do_not_wait() {
        let lanes = Lanes::default();
        assert_eq!(lanes.enter("pod/a", 1), Some(1));
        assert_eq!(lanes.enter("pod/b", 2), Some(2));
        assert_eq!(lanes.leave("pod/b"), None);
        assert_eq!(lanes.leave("pod/a"), None);
    }
}
