//! A table of objects addressed by slot, each behind its own `Arc`, so that a snapshot shares
//! them and an event copies only what it touches.

use std::sync::Arc;

use crate::model::Id;

/// A table of `Arc`ed objects addressed by slot, with slot reuse.
#[derive(Clone, Debug)]
pub struct Slab<T> {
    items: Vec<Option<Arc<T>>>,
    free: Vec<Id>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone> Slab<T> {
    pub(super) fn insert(&mut self, value: T) -> Id {
        self.len += 1;
        match self.free.pop() {
            Some(id) => {
                self.items[id as usize] = Some(Arc::new(value));
                id
            }
            None => {
                self.items.push(Some(Arc::new(value)));
                (self.items.len() - 1) as Id
            }
        }
    }

    pub(super) fn remove(&mut self, id: Id) -> Option<Arc<T>> {
        let slot = self.items.get_mut(id as usize)?;
        let old = slot.take();
        if old.is_some() {
            self.len -= 1;
            self.free.push(id);
        }
        old
    }

    pub(super) fn get_mut(&mut self, id: Id) -> Option<&mut T> {
        self.items
            .get_mut(id as usize)
            .and_then(Option::as_mut)
            .map(Arc::make_mut)
    }

    /// The object in `id`.
    pub fn get(&self, id: Id) -> Option<&T> {
        self.items.get(id as usize).and_then(|o| o.as_deref())
    }

    /// Live objects with their slots, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Id, &T)> {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_deref().map(|t| (i as Id, t)))
    }

    /// One past the highest slot ever used.
    pub fn capacity(&self) -> usize {
        self.items.len()
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
