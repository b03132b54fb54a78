//! The core's hash maps and sets: std's, keyed with foldhash's fast hasher (seeded per
//! process) instead of SipHash. The core hashes slot ids and short names on every predicate,
//! score and overlay lookup of a session; nothing in it depends on the order of a hash map.

/// A hash map of the core.
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A hash set of the core.
pub type HashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
