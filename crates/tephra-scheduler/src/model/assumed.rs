//! What sessions gave that no watcher has shown yet: a volume's claim reference or a
//! ResourceClaim's allocation, by the object's key, each with the pod whose bind writes it. The
//! object holds what it was given meanwhile, whatever older versions of it arrive (a write made
//! first, a relist), as kube-scheduler's assume cache holds what it is writing; a watcher that
//! shows it given ends the assumption, and so does the pod's bind failing.

use std::collections::BTreeMap;

/// Assumptions by object key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assumed<T> {
    by_key: BTreeMap<String, (T, String)>,
}

impl<T> Default for Assumed<T> {
    fn default() -> Self {
        Self {
            by_key: BTreeMap::new(),
        }
    }
}

impl<T> Assumed<T> {
    /// `key` is being given `value` by `pod`'s bind.
    pub fn insert(&mut self, key: &str, value: T, pod: &str) {
        self.by_key
            .insert(key.to_string(), (value, pod.to_string()));
    }

    /// What `key` is assumed to be given.
    pub fn get(&self, key: &str) -> Option<&T> {
        self.by_key.get(key).map(|(v, _)| v)
    }

    /// A watcher shows `key` with `given`: given something, that ends its assumption; given
    /// nothing, it keeps what it is assumed to be given.
    pub fn shown(&mut self, key: &str, given: &mut Option<T>)
    where
        T: Clone,
    {
        if given.is_some() {
            self.end(key);
        } else if let Some(v) = self.get(key) {
            *given = Some(v.clone());
        }
    }

    /// A watcher showed `key` given (or gone): no more assumption.
    pub fn end(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// `pod`'s bind failed: its assumptions end. Returns their keys.
    pub fn end_for(&mut self, pod: &str) -> Vec<String> {
        let keys: Vec<String> = self
            .by_key
            .iter()
            .filter(|(_, (_, p))| p == pod)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &keys {
            self.by_key.remove(k);
        }
        keys
    }

    /// Whether `pod`'s bind gives anything no watcher has shown yet.
    pub fn holds_for(&self, pod: &str) -> bool {
        self.by_key.values().any(|(_, p)| p == pod)
    }

    /// The keys assumed given.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.by_key.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assumption_ends_when_shown_or_when_its_pods_bind_fails() {
        let mut a = Assumed::default();
        a.insert("ns/x", 1, "ns/p");
        a.insert("ns/y", 2, "ns/p");
        a.insert("ns/z", 3, "ns/q");
        assert_eq!(a.get("ns/y"), Some(&2));
        let mut older = None;
        a.shown("ns/x", &mut older);
        assert_eq!(older, Some(1), "an older version keeps what is assumed");
        a.shown("ns/y", &mut Some(5));
        assert!(a.holds_for("ns/p"));
        assert_eq!(a.end_for("ns/p"), ["ns/x"]);
        assert!(!a.holds_for("ns/p"));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["ns/z"]);
    }
}
