//! Persistent volumes as kube-scheduler's volume plugins see them, per member cluster:
//! StorageClasses (binding mode, provisioner, allowed topologies), PersistentVolumes (class,
//! capacity, access modes, node affinity, the claim they are bound or pre-bound to),
//! PersistentVolumeClaims (class, request, access modes, the volume they are bound to, the node
//! a `WaitForFirstConsumer` claim was given) and each node's CSI attach limits. Which volume a
//! claim may take is decided here ([`Storage::matching_volume`]), as Kubernetes'
//! `FindMatchingVolume` decides it; what a session chooses is in `framework/volumes.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::affinity::LabelSelector;
use super::assumed::Assumed;
use super::selectors::{Labels, Requirement, affinity_matches};

/// The provisioner name of classes that provision nothing (local volumes made by hand).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// Access modes, as a set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessModes(u8);

impl AccessModes {
    /// `ReadWriteOnce`.
    pub const RWO: AccessModes = AccessModes(1);
    /// `ReadOnlyMany`.
    pub const ROX: AccessModes = AccessModes(2);
    /// `ReadWriteMany`.
    pub const RWX: AccessModes = AccessModes(4);
    /// `ReadWriteOncePod`.
    pub const RWOP: AccessModes = AccessModes(8);

    /// The modes named in `list`; an unknown name is returned as the error.
    pub fn parse<'a>(list: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut m = 0;
        for name in list {
            m |= match name {
                "ReadWriteOnce" => 1,
                "ReadOnlyMany" => 2,
                "ReadWriteMany" => 4,
                "ReadWriteOncePod" => 8,
                other => return Err(other.to_string()),
            };
        }
        Ok(Self(m))
    }

    /// Whether every mode of `other` is in this set.
    pub fn covers(self, other: AccessModes) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `ReadWriteOncePod` is in the set.
    pub fn once_pod(self) -> bool {
        self.0 & Self::RWOP.0 != 0
    }
}

/// A StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageClass {
    /// Name.
    pub name: String,
    /// Its provisioner (a CSI driver name), or [`NO_PROVISIONER`].
    pub provisioner: String,
    /// `volumeBindingMode: WaitForFirstConsumer`: claims are bound once a pod using them is
    /// placed, on its node.
    pub wait_for_first_consumer: bool,
    /// `allowedTopologies`: terms ORed, each a list of (node label, allowed values) ANDed. Empty:
    /// every node.
    pub allowed_topologies: Vec<Vec<(String, Vec<String>)>>,
}

impl StorageClass {
    /// Whether it can provision a volume at all.
    pub fn provisions(&self) -> bool {
        !self.provisioner.is_empty() && self.provisioner != NO_PROVISIONER
    }

    /// Whether a node with `labels` lies in its allowed topologies.
    pub fn allows(&self, labels: &Labels) -> bool {
        self.allowed_topologies.is_empty()
            || self.allowed_topologies.iter().any(|term| {
                !term.is_empty()
                    && term
                        .iter()
                        .all(|(k, vals)| labels.get(k).is_some_and(|v| vals.contains(v)))
            })
    }
}

/// Which claim a volume is bound (or pre-bound) to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistentVolume {
    /// Name.
    pub name: String,
    /// Labels (a claim's selector matches them).
    pub labels: Labels,
    /// Storage class (`""` for none).
    pub class: String,
    /// Capacity in bytes.
    pub capacity: i64,
    /// Access modes.
    pub access_modes: AccessModes,
    /// `volumeMode: Block`.
    pub block: bool,
    /// Required node affinity: terms ORed, requirements ANDed; empty: every node.
    pub node_affinity: Vec<Vec<Requirement>>,
    /// The claim it is bound or pre-bound to.
    pub claim: Option<ClaimRef>,
    /// `status.phase: Available`.
    pub available: bool,
    /// Being deleted.
    pub deleting: bool,
    /// Its CSI driver and volume handle, for attach limits.
    pub csi: Option<(String, String)>,
}

impl PersistentVolume {
    /// Whether a node with `labels` may use it.
    pub fn node_allows(&self, labels: &Labels) -> bool {
        self.node_affinity.is_empty() || affinity_matches(&self.node_affinity, labels)
    }
}

/// A PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Storage class (`""` for none).
    pub class: String,
    /// Requested storage in bytes.
    pub request: i64,
    /// Access modes.
    pub access_modes: AccessModes,
    /// `volumeMode: Block`.
    pub block: bool,
    /// `spec.volumeName`.
    pub volume: Option<String>,
    /// Fully bound: a volume named and `pv.kubernetes.io/bind-completed` set.
    pub bound: bool,
    /// `volume.kubernetes.io/selected-node`: the node a delayed claim is provisioned for.
    pub selected_node: Option<String>,
    /// `spec.selector`: the labels a volume must carry.
    pub selector: Option<LabelSelector>,
    /// Its volume is gone (`status.phase: Lost`).
    pub lost: bool,
    /// Being deleted.
    pub deleting: bool,
}

impl VolumeClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The storage objects of one member cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Storage {
    /// StorageClasses by name.
    pub classes: BTreeMap<String, Arc<StorageClass>>,
    /// PersistentVolumes by name.
    pub volumes: BTreeMap<String, Arc<PersistentVolume>>,
    /// PersistentVolumeClaims by `namespace/name`.
    pub claims: BTreeMap<String, Arc<VolumeClaim>>,
    /// Each node's CSI attach limits (`CSINode.spec.drivers[].allocatable.count`), by node and
    /// driver.
    pub attach_limits: BTreeMap<String, BTreeMap<String, u32>>,
    /// Volumes sessions gave claims that no watcher has shown taken yet, by volume name: the
    /// volume is the claim's meanwhile, so that the next session gives it to no other claim.
    assumed: Assumed<ClaimRef>,
}

/// Where a claim that is not bound yet must be looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// Bound already (its volume decides the node).
    Bound,
    /// `WaitForFirstConsumer`, not bound: a volume or provisioning is chosen with the pod's node.
    Delayed,
    /// Not bound and not delayed (`Immediate`, no class, a missing class, pre-bound by name but
    /// not bound yet): the pod waits.
    Immediate,
}

impl Storage {
    /// Adds or replaces a volume as a watcher shows it. A claim reference it shows ends the
    /// volume's assumed one; without one, the volume keeps the claim it was assumed given to.
    pub fn upsert_volume(&mut self, mut v: PersistentVolume) {
        self.assumed.shown(&v.name, &mut v.claim);
        self.volumes.insert(v.name.clone(), Arc::new(v));
    }

    /// Removes a volume, and the claim it was assumed given to.
    pub fn delete_volume(&mut self, name: &str) {
        self.volumes.remove(name);
        self.assumed.end(name);
    }

    /// The volume `volume` is being given to `claim` for `pod`'s bind: it is the claim's from
    /// now until a watcher shows it taken, it goes, or the bind fails ([`Storage::unassume`]).
    /// A volume shown taken already is left as it is.
    pub fn assume(&mut self, volume: &str, claim: ClaimRef, pod: &str) {
        if let Some(v) = self.volumes.get_mut(volume) {
            if v.claim.is_some() {
                return;
            }
            Arc::make_mut(v).claim = Some(claim.clone());
        }
        self.assumed.insert(volume, claim, pod);
    }

    /// `pod`'s bind failed: the volumes it was to take are free until a watcher shows
    /// otherwise.
    pub fn unassume(&mut self, pod: &str) {
        for name in self.assumed.end_for(pod) {
            if let Some(v) = self.volumes.get_mut(&name) {
                Arc::make_mut(v).claim = None;
            }
        }
    }

    /// The volumes sessions gave claims that no watcher has shown taken yet.
    pub fn assumed(&self) -> &Assumed<ClaimRef> {
        &self.assumed
    }

    /// How the claim is to be bound.
    pub fn delay(&self, claim: &VolumeClaim) -> Delay {
        if claim.bound {
            return Delay::Bound;
        }
        let delayed = claim.volume.is_none()
            && self
                .classes
                .get(&claim.class)
                .is_some_and(|c| c.wait_for_first_consumer);
        if delayed {
            Delay::Delayed
        } else {
            Delay::Immediate
        }
    }

    /// The volume a delayed `claim` would be bound to on a node with `labels`: one pre-bound to
    /// it (if the node may use it), else the smallest available one of its class that is large
    /// enough, has its access modes and volume mode, matches its selector, may be used from the
    /// node and is not `taken`.
    pub fn matching_volume<'a>(
        &'a self,
        claim: &VolumeClaim,
        labels: &Labels,
        taken: &dyn Fn(&str) -> bool,
    ) -> Option<&'a PersistentVolume> {
        pick_volume(self.volume_candidates(claim), labels, taken)
    }

    /// What of [`matching_volume`](Self::matching_volume) does not depend on the node: the
    /// volumes that could take `claim` on some node, in name order, each with whether it is
    /// pre-bound to the claim. A scan works this out once and picks per node.
    pub fn volume_candidates<'a>(
        &'a self,
        claim: &VolumeClaim,
    ) -> impl Iterator<Item = (&'a Arc<PersistentVolume>, bool)> {
        self.volumes.values().filter_map(move |pv| {
            if pv.deleting || pv.capacity < claim.request || pv.block != claim.block {
                return None;
            }
            let pre_bound = pv
                .claim
                .as_ref()
                .is_some_and(|c| c.namespace == claim.namespace && c.name == claim.name);
            if pre_bound {
                return Some((pv, true));
            }
            let fits = pv.claim.is_none()
                && pv.available
                && pv.class == claim.class
                && pv.access_modes.covers(claim.access_modes)
                && claim
                    .selector
                    .as_ref()
                    .is_none_or(|s| s.matches(&pv.labels));
            fits.then_some((pv, false))
        })
    }
}

/// The volume of `candidates` (see [`Storage::volume_candidates`]) a claim is bound to on a
/// node with `labels`: the first pre-bound one that is not `taken` decides alone (if the node
/// may use it); else the smallest the node may use that is not `taken`.
pub fn pick_volume<'a, P: AsRef<PersistentVolume> + 'a>(
    candidates: impl IntoIterator<Item = (&'a P, bool)>,
    labels: &Labels,
    taken: &dyn Fn(&str) -> bool,
) -> Option<&'a PersistentVolume> {
    let mut best: Option<&PersistentVolume> = None;
    for (pv, pre_bound) in candidates {
        let pv = pv.as_ref();
        if taken(&pv.name) {
            continue;
        }
        if pre_bound {
            return pv.node_allows(labels).then_some(pv);
        }
        if pv.node_allows(labels) && best.is_none_or(|b| pv.capacity < b.capacity) {
            best = Some(pv);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SelectorOp;

    fn pv(name: &str, gi: i64, zone: &str) -> Arc<PersistentVolume> {
        Arc::new(PersistentVolume {
            name: name.into(),
            labels: Labels::new(),
            class: "local".into(),
            capacity: gi << 30,
            access_modes: AccessModes::RWO,
            block: false,
            node_affinity: vec![vec![Requirement {
                key: "zone".into(),
                op: SelectorOp::In,
                values: vec![zone.into()],
            }]],
            claim: None,
            available: true,
            deleting: false,
            csi: None,
        })
    }

    fn claim(gi: i64) -> VolumeClaim {
        VolumeClaim {
            namespace: "ns".into(),
            name: "data".into(),
            class: "local".into(),
            request: gi << 30,
            access_modes: AccessModes::RWO,
            block: false,
            volume: None,
            bound: false,
            selected_node: None,
            selector: None,
            lost: false,
            deleting: false,
        }
    }

    #[test]
    fn the_smallest_volume_that_fits_on_the_node_is_chosen() {
        let mut s = Storage::default();
        for v in [
            pv("big", 100, "a"),
            pv("small", 10, "a"),
            pv("tiny", 1, "a"),
            pv("other", 10, "b"),
        ] {
            s.volumes.insert(v.name.clone(), v);
        }
        let zone_a = Labels::from([("zone".to_string(), "a".to_string())]);
        let none = |_: &str| false;
        assert_eq!(
            s.matching_volume(&claim(5), &zone_a, &none).unwrap().name,
            "small"
        );
        let small_taken = |n: &str| n == "small";
        assert_eq!(
            s.matching_volume(&claim(5), &zone_a, &small_taken)
                .unwrap()
                .name,
            "big"
        );
        let zone_c = Labels::from([("zone".to_string(), "c".to_string())]);
        assert!(s.matching_volume(&claim(5), &zone_c, &none).is_none());
    }

    #[test]
    fn a_volume_pre_bound_to_the_claim_is_its_only_choice() {
        let mut s = Storage::default();
        let mut mine = (*pv("mine", 10, "b")).clone();
        mine.claim = Some(ClaimRef {
            namespace: "ns".into(),
            name: "data".into(),
        });
        s.volumes.insert("mine".into(), Arc::new(mine));
        s.volumes.insert("free".into(), pv("free", 10, "a"));
        let none = |_: &str| false;
        let zone_a = Labels::from([("zone".to_string(), "a".to_string())]);
        let zone_b = Labels::from([("zone".to_string(), "b".to_string())]);
        assert_eq!(
            s.matching_volume(&claim(5), &zone_b, &none).unwrap().name,
            "mine"
        );
        // Pre-bound wins over anything else; where it cannot be used, nothing matches.
        assert!(s.matching_volume(&claim(5), &zone_a, &none).is_none());
    }

    #[test]
    fn allowed_topologies_match_every_node_when_empty_and_a_term_needs_each_label() {
        let mut class = StorageClass {
            name: "c".into(),
            provisioner: "csi.example.com".into(),
            wait_for_first_consumer: true,
            allowed_topologies: vec![],
        };
        let labels = Labels::from([("zone".to_string(), "a".to_string())]);
        assert!(class.allows(&labels));
        class.allowed_topologies = vec![vec![("zone".into(), vec!["b".into()])]];
        assert!(!class.allows(&labels));
        class
            .allowed_topologies
            .push(vec![("zone".into(), vec!["a".into()])]);
        assert!(class.allows(&labels));
        assert!(class.provisions());
        class.provisioner = NO_PROVISIONER.into();
        assert!(!class.provisions());
    }
}
