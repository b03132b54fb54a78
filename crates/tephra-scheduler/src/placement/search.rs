//! How far node search goes, from an action's arguments (`configurations:` in the config).

use crate::config::{ArgError, Args};

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

impl SearchArgs {
    /// Reads the arguments, checking them.
    pub fn from_args(args: &Args) -> Result<Self, ArgError> {
        let mut s = Self::default();
        for (key, value) in args {
            let n = value
                .as_f64()
                .filter(|v| *v >= 0.0 && v.fract() == 0.0)
                .ok_or_else(|| ArgError::new(key.clone(), "must be a non-negative integer"))?
                as usize;
            match key.as_str() {
                "minimumFeasibleNodes" => s.min_feasible_nodes = n,
                "minimumPercentageNodesToFind" => s.min_percentage = n.min(100),
                "percentageNodesToFind" => s.percentage = n.min(100),
                "maxClustersToSimulate" => s.max_clusters = n.max(1),
                _ => return Err(ArgError::new(key.clone(), "unknown argument")),
            }
        }
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
