//! Plugins, one file each, with Volcano's names and arguments, plus tephra's GPU and
//! cluster-level plugins.
//!
//! Each file holds one plugin: a `build` function that reads its arguments, and the hooks it
//! implements (see [`crate::framework::plugin`]). Plugins know the framework and placement,
//! never each other; the registry in the crate root wires them by name.

pub mod binpack;
pub mod capacity;
pub mod clusteraffinity;
pub mod clusterresource;
pub mod clustertaint;
pub mod conformance;
pub mod cost;
pub mod deviceshare;
pub mod drf;
pub mod gang;
pub mod gpupack;
pub mod network_topology;
pub mod nodegroup;
pub mod nodeorder;
pub mod overcommit;
pub mod pdb;
pub mod predicates;
pub mod priority;
pub mod proportion;
pub mod sla;
pub mod spread;

pub use clusteraffinity::allows as clusteraffinity_allows;
