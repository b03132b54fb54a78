//! The faults of a scenario: given ones at given times, and random ones drawn from the run's
//! seed.

use serde::Deserialize;

use crate::values::Dur;

/// Fault kinds.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The member's API server cannot be reached.
    Unreachable,
    /// The member reports not ready.
    Notready,
    /// Nodes go down.
    NodeDown,
    /// Everything in the cluster comes back.
    Recover,
}

/// The faults of a scenario: given ones, and randomly drawn ones (from `run.seed`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "FaultsInput")]
pub struct Faults {
    /// Faults given one by one.
    pub list: Vec<FaultDef>,
    /// Faults drawn at random.
    pub random: Option<RandomFaults>,
}

/// `faults:` as written: a list, or a map.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum FaultsInput {
    List(Vec<FaultDef>),
    Map(FaultsMap),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsMap {
    #[serde(default)]
    list: Vec<FaultDef>,
    #[serde(default)]
    random: Option<RandomFaults>,
}

impl From<FaultsInput> for Faults {
    fn from(f: FaultsInput) -> Self {
        match f {
            FaultsInput::List(list) => Faults { list, random: None },
            FaultsInput::Map(m) => Faults {
                list: m.list,
                random: m.random,
            },
        }
    }
}

/// Faults drawn at random over `[0, run.until)`: each at a uniform time, in a uniform cluster
/// of the fleet, of a uniform kind among `kinds`, lasting an exponential time of mean
/// `meanDuration` (a node-down fault takes one node).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RandomFaults {
    /// How many.
    pub count: usize,
    /// Which kinds (default: unreachable, notready and node-down).
    #[serde(default)]
    pub kinds: Vec<FaultKind>,
    /// Mean duration.
    pub mean_duration: Dur,
}

/// A fault.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultDef {
    /// When.
    pub at: Dur,
    /// Which cluster.
    pub cluster: String,
    /// What.
    pub kind: FaultKind,
    /// How long (then it recovers); absent means until a `recover` fault.
    #[serde(default, rename = "for")]
    pub duration: Option<Dur>,
    /// node-down: this node.
    #[serde(default)]
    pub node: Option<String>,
    /// node-down: this many nodes (the first ones of the cluster).
    #[serde(default)]
    pub count: Option<usize>,
}
