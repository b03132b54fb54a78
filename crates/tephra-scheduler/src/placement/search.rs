//! How far node search goes, from an action's arguments (`configurations:` in the config).

use crate::config::{ArgErrors, ArgReader, ArgSpec, Args};

/// Tuning of node search, from the allocate action's arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchArgs {
    /// Find at least this many feasible nodes before choosing (default 100).
    pub min_feasible_nodes: usize,
    /// ... and at least this percentage of the cluster (default 5).
    pub min_percentage: usize,
    /// Fixed percentage of nodes to find; 0 means adaptive, as kube-scheduler (default 0).
    pub percentage: usize,
    /// Clusters simulated per job before giving up on it this session (default 5).
    pub max_clusters: usize,
}

impl Default for SearchArgs {
    fn default() -> Self {
        Self {
            min_feasible_nodes: 100,
            min_percentage: 5,
            percentage: 0,
            max_clusters: 5,
        }
    }
}

/// Argument keys of node search.
pub const SEARCH_KEYS: &[&str] = &[
    "minimumFeasibleNodes",
    "minimumPercentageNodesToFind",
    "percentageNodesToFind",
    "maxClustersToSimulate",
];

/// Volcano's `predicateErrorCacheEnable`, read by every action that places: tephra keeps no
/// predicate results between sessions, so the switch changes nothing.
pub const PREDICATE_CACHE: (&str, &str) = (
    "predicateErrorCacheEnable",
    "tephra keeps no predicate results between sessions",
);

/// The arguments of an action that reads only the node search (`allocate`, `backfill`,
/// `reclaim`).
pub const SEARCH_ONLY: ArgSpec = ArgSpec {
    keys: SEARCH_KEYS,
    prefixes: &[],
    inert: &[PREDICATE_CACHE],
};

impl SearchArgs {
    /// Reads the node-search arguments of an action whose arguments are `spec`, checking them
    /// (every problem is reported).
    pub fn read(args: &Args, spec: &ArgSpec) -> Result<Self, ArgErrors> {
        let r = ArgReader::new(args, spec);
        let mut s = Self::default();
        for key in SEARCH_KEYS {
            let Some(value) = args.get(*key) else {
                continue;
            };
            let Some(n) = value
                .as_f64()
                .filter(|v| *v >= 0.0 && v.fract() == 0.0 && *v <= 1e9)
            else {
                r.refuse(*key, "must be a non-negative integer");
                continue;
            };
            let n = n as usize;
            match *key {
                "minimumFeasibleNodes" => s.min_feasible_nodes = n,
                "minimumPercentageNodesToFind" => s.min_percentage = n.min(100),
                "percentageNodesToFind" => s.percentage = n.min(100),
                _ => s.max_clusters = n.max(1),
            }
        }
        r.finish()?;
        Ok(s)
    }

    /// How many feasible nodes to find in a cluster of `n` nodes.
    pub fn to_find(&self, n: usize) -> usize {
        let pct = if self.percentage > 0 {
            self.percentage
        } else {
            (50usize.saturating_sub(n / 125)).max(self.min_percentage)
        };
        (n * pct / 100).max(self.min_feasible_nodes).min(n)
    }
}
