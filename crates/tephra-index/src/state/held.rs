//! Pods held back until the kinds they depend on are listed. A runner may start sessions once
//! the kinds every pod depends on are listed (nodes, pods, PodGroups, queues, priority
//! classes) and let the others follow ([`State::defer_listing`]; HyperNodes are waited for by
//! the gangs with a `networkTopology`, in the core, not here): a pending pod of
//! ours whose placement reads one of those others (claims need volumes, classes, attach
//! limits; device claims need device classes, slices and claims) is taken into the cache
//! behind a scheduling gate of tephra's own until every kind it reads is listed in its
//! cluster, and then taken in again as it is. A gated pod is no candidate for placement (the
//! core leaves gated pods out), and nothing is written to it, as for any gated pod.

use std::collections::HashMap;
use std::sync::Arc;

use tephra_scheduler::model::{PodSpec, TaskStatus};

use super::intake::Intake;
use crate::observed::Kind;

/// The gate of a pod whose claims cannot be judged until volumes are listed.
pub const VOLUMES_GATE: &str = "tephra.io/volumes-not-listed-yet";
/// The gate of a pod whose device claims cannot be judged until DRA objects are listed.
pub const DEVICES_GATE: &str = "tephra.io/devices-not-listed-yet";

/// The kinds a pod's volume claims are judged with.
pub const VOLUME_KINDS: [Kind; 4] = [Kind::Pvc, Kind::Pv, Kind::StorageClass, Kind::CsiNode];
/// The kinds a pod's device claims are judged with.
pub const DEVICE_KINDS: [Kind; 3] = [Kind::DeviceClass, Kind::ResourceSlice, Kind::ResourceClaim];

/// The pods held back, with the spec each is taken in with once released.
#[derive(Default)]
pub(super) struct Held {
    /// Whether sessions may run before every kind is listed (off: nothing is held).
    pub(super) on: bool,
    /// Held pods by key: their cluster and their spec as it is.
    pods: HashMap<String, (Arc<str>, PodSpec)>,
}

/// The gates a pod needs in `cluster` while these kinds are not listed there.
fn gates(intake: &Intake, cluster: &str, spec: &PodSpec) -> Vec<&'static str> {
    let listed = |kinds: &[Kind]| kinds.iter().all(|k| intake.is_synced(cluster, *k));
    let mut out = Vec::new();
    if !spec.shape.rules.claims.is_empty() && !listed(&VOLUME_KINDS) {
        out.push(VOLUMES_GATE);
    }
    if !spec.shape.rules.device_claims.is_empty() && !listed(&DEVICE_KINDS) {
        out.push(DEVICES_GATE);
    }
    out
}

impl Held {
    /// The spec pod `key` of `cluster` is taken into the cache with: `spec`, or, while a kind
    /// it depends on is not listed there, `spec` behind tephra's gates (kept as it is, to be
    /// taken in once listed).
    pub(super) fn admit(
        &mut self,
        intake: &Intake,
        cluster: &Arc<str>,
        key: &str,
        spec: PodSpec,
    ) -> PodSpec {
        if !self.on || spec.status != TaskStatus::Pending || spec.placement.is_some() {
            self.pods.remove(key);
            return spec;
        }
        let gates = gates(intake, cluster, &spec);
        if gates.is_empty() {
            self.pods.remove(key);
            return spec;
        }
        let mut gated = spec.clone();
        let mut shape = (*spec.shape).clone();
        shape
            .rules
            .gates
            .extend(gates.into_iter().map(String::from));
        gated.shape = Arc::new(shape);
        self.pods
            .insert(key.to_string(), (Arc::clone(cluster), spec));
        gated
    }

    /// Pod `key` is gone.
    pub(super) fn forget(&mut self, key: &str) {
        self.pods.remove(key);
    }

    /// The held pods of `cluster` that every kind they depend on is now listed for, taken out.
    pub(super) fn released(&mut self, intake: &Intake, cluster: &str) -> Vec<PodSpec> {
        let ready: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, (c, spec))| &**c == cluster && gates(intake, c, spec).is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        ready
            .into_iter()
            .filter_map(|k| self.pods.remove(&k).map(|(_, spec)| spec))
            .collect()
    }

    /// How many pods are held.
    pub(super) fn len(&self) -> usize {
        self.pods.len()
    }
}
