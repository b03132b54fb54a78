//! Per-object ordering for the executor: writes to one object are carried out one at a time,
//! in the order they were planned, while writes to different objects run in parallel. A write
//! whose object is busy waits in that object's lane without holding a worker, so a status
//! planned later (a pod now Running) can never land before one planned earlier (Pending).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The objects with a write in flight, each with the writes waiting behind it.
pub struct Lanes<T> {
    busy: Mutex<HashMap<String, VecDeque<T>>>,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Self {
            busy: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Lanes<T> {
    /// `item` runs now (`Some`) when its object is idle, which makes the object busy until
    /// [`Lanes::leave`]; otherwise it waits behind the object's running write (`None`).
    pub fn enter(&self, key: &str, item: T) -> Option<T> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        match busy.get_mut(key) {
            Some(waiting) => {
                waiting.push_back(item);
                None
            }
            None => {
                busy.insert(key.to_string(), VecDeque::new());
                Some(item)
            }
        }
    }

    /// The object's running write is done: the next write waiting for it (the object stays
    /// busy), or `None` and the object is idle.
    pub fn leave(&self, key: &str) -> Option<T> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let next = busy.get_mut(key).and_then(VecDeque::pop_front);
        if next.is_none() {
            busy.remove(key);
        }
        next
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

    #[test]
    fn writes_to_other_objects_do_not_wait() {
        let lanes = Lanes::default();
        assert_eq!(lanes.enter("pod/a", 1), Some(1));
        assert_eq!(lanes.enter("pod/b", 2), Some(2));
        assert_eq!(lanes.leave("pod/b"), None);
        assert_eq!(lanes.leave("pod/a"), None);
    }
}
