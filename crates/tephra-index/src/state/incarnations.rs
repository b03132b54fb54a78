//! Which PodGroup each job's ResourceBinding was written for. A job whose PodGroup is made
//! anew under the same name (Volcano's RestartJob deletes it; the job controller creates it
//! again) gets a new binding: the old one, owned by the PodGroup that is gone, is deleted and
//! the new one created, rather than moved to the new PodGroup. Moving it would keep the old
//! incarnation's status and eviction tasks, and would change its owner, which
//! `OwnerReferencesPermissionEnforcement` lets only a user who may delete it do (the garbage
//! collector removes such a binding, but later: the restarted job is placed sooner).

use std::collections::HashMap;

/// The PodGroup uid each job's binding was last written for, by job.
#[derive(Debug, Default)]
pub(super) struct Incarnations {
    written: HashMap<String, String>,
    /// When the map is next swept of jobs that have no PodGroup.
    sweep_at: usize,
}

impl Incarnations {
    /// Records that `job`'s binding is written for the PodGroup `uid`; true when it was last
    /// written for another one (`stored`: the owner of the binding as watched, in a fleet),
    /// so that the binding is replaced.
    pub(super) fn write(&mut self, job: &str, uid: &str, stored: Option<&str>) -> bool {
        let before = self.written.insert(job.to_string(), uid.to_string());
        let stale = |old: &str| !old.is_empty() && old != uid;
        before.as_deref().is_some_and(stale) || stored.is_some_and(stale)
    }

    /// Forgets the jobs for which `live` is false, once the map has doubled since the last
    /// sweep (a PodGroup deleted and not made again leaves its entry until then).
    pub(super) fn sweep(&mut self, live: &dyn Fn(&str) -> bool) {
        if self.written.len() < self.sweep_at {
            return;
        }
        self.written.retain(|job, _| live(job));
        self.sweep_at = (self.written.len() * 2).max(1024);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_written_for_another_podgroup_is_replaced() {
        let mut i = Incarnations::default();
        assert!(!i.write("ml/a", "u1", None), "the first write creates");
        assert!(
            !i.write("ml/a", "u1", None),
            "the same PodGroup: updated in place"
        );
        assert!(i.write("ml/a", "u2", None), "made anew: replaced");
        assert!(!i.write("ml/a", "u2", None));
    }

    #[test]
    fn a_watched_binding_of_another_podgroup_is_replaced_after_a_restart() {
        let mut i = Incarnations::default();
        assert!(
            i.write("ml/a", "u2", Some("u1")),
            "owned by the old PodGroup"
        );
        assert!(!i.write("ml/b", "u3", Some("u3")));
    }

    #[test]
    fn jobs_without_a_podgroup_are_forgotten_at_a_sweep() {
        let mut i = Incarnations::default();
        for n in 0..1024 {
            i.write(&format!("ml/{n}"), "u", None);
        }
        i.sweep(&|job| job == "ml/7");
        assert_eq!(i.written.len(), 1);
        assert!(i.write("ml/7", "v", None));
    }
}
