//! What the watchers have told the state, object by object: the keys known in each cluster and
//! kind, the (re)lists in progress and the keys they named so far, which kinds were listed
//! whole (synced), and the objects the cache refused with why. A list that completes names what the
//! cache knew but the list did not: those objects are gone.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::observed::Kind;

/// The watchers' bookkeeping.
#[derive(Default)]
pub(super) struct Intake {
    known: HashMap<(Arc<str>, Kind), HashSet<String>>,
    /// Keys named so far by each (re)list in progress.
    listing: HashMap<(Arc<str>, Kind), HashSet<String>>,
    synced: BTreeSet<(Arc<str>, Kind)>,
    /// Objects the cache refused, by `kind namespace/name`, with why.
    refused: HashMap<String, String>,
}

impl Intake {
    /// An object `key` of `kind` in `cluster` was seen.
    pub(super) fn seen(&mut self, cluster: &Arc<str>, kind: Kind, key: String) {
        self.known
            .entry((Arc::clone(cluster), kind))
            .or_default()
            .insert(key);
    }

    /// An object was deleted.
    pub(super) fn gone(&mut self, cluster: &Arc<str>, kind: Kind, key: &str) {
        if let Some(k) = self.known.get_mut(&(Arc::clone(cluster), kind)) {
            k.remove(key);
        }
    }

    /// A (re)list of `kind` in `cluster` starts.
    pub(super) fn list_start(&mut self, cluster: Arc<str>, kind: Kind) {
        self.listing.insert((cluster, kind), HashSet::new());
    }

    /// A (re)list in progress named `key`.
    pub(super) fn listed(&mut self, cluster: &Arc<str>, kind: Kind, key: String) {
        let slot = (Arc::clone(cluster), kind);
        self.listing
            .entry(slot.clone())
            .or_default()
            .insert(key.clone());
        self.known.entry(slot).or_default().insert(key);
    }

    /// A (re)list is complete: the keys known before that the list did not name are returned
    /// (they are gone). Once they are deleted, [`Intake::synced`] says so.
    pub(super) fn list_done(&mut self, cluster: Arc<str>, kind: Kind) -> Vec<String> {
        let slot = (cluster, kind);
        let fresh = self.listing.remove(&slot).unwrap_or_default();
        let old = self.known.insert(slot, fresh.clone()).unwrap_or_default();
        old.difference(&fresh).cloned().collect()
    }

    /// `kind` in `cluster` has been listed whole.
    pub(super) fn synced(&mut self, cluster: Arc<str>, kind: Kind) {
        self.synced.insert((cluster, kind));
    }

    /// Whether `kind` in `cluster` has been listed whole at least once.
    pub(super) fn is_synced(&self, cluster: &str, kind: Kind) -> bool {
        self.synced
            .iter()
            .any(|(c, k)| **c == *cluster && *k == kind)
    }

    /// The cache refused `what` (`kind namespace/name`) for `why`.
    pub(super) fn refuse(&mut self, what: String, why: String) {
        self.refused.insert(what, why);
    }

    /// `what` was taken after all.
    pub(super) fn accepted(&mut self, what: &str) {
        self.refused.remove(what);
    }

    /// The object `key` was deleted: whatever was refused of it no longer matters.
    pub(super) fn forget_refusals(&mut self, key: &str) {
        let suffix = format!(" {key}");
        self.refused.retain(|k, _| !k.ends_with(&suffix));
    }

    /// The objects refused, with why.
    pub(super) fn refused(&self) -> &HashMap<String, String> {
        &self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_names_what_it_no_longer_lists_as_gone_and_syncs_the_kind() {
        let mut i = Intake::default();
        let c: Arc<str> = Arc::from("east");
        i.seen(&c, Kind::Pod, "ns/a".into());
        i.seen(&c, Kind::Pod, "ns/b".into());
        i.seen(&c, Kind::Node, "n1".into());
        assert!(!i.is_synced("east", Kind::Pod));
        i.list_start(Arc::clone(&c), Kind::Pod);
        i.listed(&c, Kind::Pod, "ns/b".into());
        i.listed(&c, Kind::Pod, "ns/c".into());
        assert_eq!(
            i.list_done(Arc::clone(&c), Kind::Pod),
            vec!["ns/a".to_string()]
        );
        assert!(!i.is_synced("east", Kind::Pod));
        i.synced(Arc::clone(&c), Kind::Pod);
        assert!(i.is_synced("east", Kind::Pod));
        assert!(!i.is_synced("east", Kind::Node));
        // A later relist that names nothing finds both gone.
        i.list_start(Arc::clone(&c), Kind::Pod);
        let mut gone = i.list_done(Arc::clone(&c), Kind::Pod);
        gone.sort();
        assert_eq!(gone, vec!["ns/b".to_string(), "ns/c".to_string()]);
    }

    #[test]
    fn a_deleted_object_takes_its_refusals_with_it() {
        let mut i = Intake::default();
        i.refuse("Pod ns/a".into(), "bad".into());
        i.refuse("PodGroup ns/a".into(), "bad".into());
        i.refuse("Pod ns/ab".into(), "bad".into());
        i.forget_refusals("ns/a");
        assert_eq!(i.refused().keys().collect::<Vec<_>>(), vec!["Pod ns/ab"]);
        i.accepted("Pod ns/ab");
        assert!(i.refused().is_empty());
    }
}
