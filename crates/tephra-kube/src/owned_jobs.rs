//! What the controllers that make Volcano Jobs for an owner (CronJobs, JobFlows) share: the
//! Jobs an owner controls, where those this replica made stand in until the watch's cache holds
//! them (the passes start once the cache listed every Job, so a Job missing from both is gone),
//! and warnings told once while they last rather than on every pass.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Mutex;

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tephra_api::Job;

/// Whether `job`'s controller is the object with `uid`.
pub fn controlled_by(job: &Job, uid: &str) -> bool {
    job.owner_references()
        .iter()
        .any(|r| r.uid == uid && r.controller == Some(true))
}

/// The Jobs this replica made, by owner, until the cache holds them.
pub struct Made<K>(Mutex<HashMap<K, Vec<Job>>>);

impl<K> Default for Made<K> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: Eq + Hash + Clone> Made<K> {
    /// The Jobs in namespace `ns` that the owner `key` (with `uid`) controls: the cached ones
    /// and those made here that the cache does not hold yet.
    pub fn jobs(&self, cache: &Store<Job>, key: &K, ns: &str, uid: &str) -> Vec<Job> {
        let mut jobs: Vec<Job> = cache
            .state()
            .into_iter()
            .filter(|j| j.namespace().as_deref() == Some(ns) && controlled_by(j, uid))
            .map(|j| (*j).clone())
            .collect();
        if let Ok(mut made) = self.0.lock()
            && let Some(mine) = made.get_mut(key)
        {
            mine.retain(|m| !jobs.iter().any(|j| j.metadata.uid == m.metadata.uid));
            jobs.extend(mine.iter().filter(|m| controlled_by(m, uid)).cloned());
        }
        jobs
    }

    /// The owner `key` made `job` (as the API server returned it).
    pub fn add(&self, key: &K, job: Job) {
        if let Ok(mut m) = self.0.lock() {
            m.entry(key.clone()).or_default().push(job);
        }
    }

    /// Forgets the owners `here` says are gone.
    pub fn retain(&self, here: impl Fn(&K) -> bool) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|k, _| here(k));
        }
    }
}

/// The lasting problems told of each owner: (reason, message).
pub struct Told<K>(Mutex<HashMap<K, HashSet<(&'static str, String)>>>);

impl<K> Default for Told<K> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: Eq + Hash + Clone> Told<K> {
    /// Of `problems` (the lasting ones this pass found for `key`), those not told on the
    /// pass before; the rest are remembered as told, and a problem gone is forgotten (told
    /// again should it come back).
    pub fn news(
        &self,
        key: &K,
        problems: Vec<(&'static str, String)>,
    ) -> HashSet<(&'static str, String)> {
        let now: HashSet<_> = problems.into_iter().collect();
        let before = self
            .0
            .lock()
            .map(|mut s| s.insert(key.clone(), now.clone()).unwrap_or_default())
            .unwrap_or_default();
        now.difference(&before).cloned().collect()
    }

    /// Forgets the owners `here` says are gone.
    pub fn retain(&self, here: impl Fn(&K) -> bool) {
        if let Ok(mut s) = self.0.lock() {
            s.retain(|k, _| here(k));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_lasting_problem_is_news_once_and_again_after_it_went() {
        let told: Told<&str> = Told::default();
        let p = || vec![("TemplateNotFound", "no a".to_string())];
        assert_eq!(told.news(&"f", p()).len(), 1);
        assert!(told.news(&"f", p()).is_empty());
        assert!(told.news(&"f", vec![]).is_empty());
        assert_eq!(told.news(&"f", p()).len(), 1);
    }
}
