//! The framework: everything a session is, and everything plugins and actions build on.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `session.rs` | [`Session`]: open on a snapshot with its plugins, the notes it keeps per job |
//! | `state.rs` | [`State`]: per-node accounting, cluster aggregates, queue holdings, the task overlay |
//! | `holds.rs` | holding room kept for a job on a node without placing its pod, across sessions through nominations |
//! | `statement.rs` | [`Statement`]: allocate, pipeline, evict; commit or discard as a unit |
//! | `status.rs` | closing a session: PodGroup phases and conditions, queue status |
//! | `plugin.rs` | [`Plugin`] and the hooks a plugin may implement, one small trait each |
//! | `hooks.rs` | [`Hooks`] and [`Dispatch`]: where every hook is called from |
//! | `view.rs` | [`View`]: the read-only view every hook gets |
//! | `affinity.rs` | [`AffinityIndex`]: where the pods that inter-pod affinity terms select are |
//! | `ports.rs` | [`PortIndex`]: the host ports each node has given out |
//! | `spread.rs` | [`SpreadIndex`]: pods per topology domain, for pod topology spread constraints |
//! | `volumes.rs` | [`VolumeState`]: whether a pod's volume claims allow a node, and what the session gave each claim |
//! | `devices.rs` | [`DeviceState`]: whether a pod's ResourceClaims allow a node, and the devices the session allocated |
//! | `gpus.rs` | [`GpuState`]: which shared GPUs (Volcano's vGPU) a pod takes on a node, and what the session gave each pod |
//! | `fit.rs` | [`Unfit`], [`FitErrors`], [`ClusterUnfit`]: why something does not fit, and whether eviction could help |
//! | `order.rs` | jobs by queue in job order, the next queue in queue order |
//! | `queues.rs` | queue trees and the share a victim queue keeps, for fair-share plugins |
//! | `subgroups.rs` | a job's sub-groups (`subGroupPolicy`) and whether enough are whole |
//!
//! It depends only on the bottom layer (`model`, `resources`, `cache`, `config`, `decisions`);
//! placement, plugins and actions build on it.

pub mod affinity;
pub mod devices;
pub mod fit;
pub mod gpus;
pub mod holds;
pub mod hooks;
pub mod order;
pub mod plugin;
pub mod ports;
pub mod queues;
pub mod session;
pub mod spread;
pub mod state;
pub mod statement;
pub mod status;
pub mod subgroups;
pub mod view;
pub mod volumes;

pub use affinity::AffinityIndex;
pub use devices::DeviceState;
pub use fit::{ClusterUnfit, DeviceUnfit, FitErrors, GpuUnfit, Room, Unfit, VolumeUnfit};
pub use gpus::GpuState;
pub use hooks::{Dispatch, Hooks};
pub use plugin::{Invalid, Plugin, Vote};
pub use ports::PortIndex;
pub use session::{JobNote, Session};
pub use spread::SpreadIndex;
pub use state::{Hold, NodeState, State};
pub use statement::{Op, Statement};
pub use view::{JobCounts, View};
pub use volumes::VolumeState;
