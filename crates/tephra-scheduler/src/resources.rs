//! Resource vectors. Names are interned into a small fixed set of slots, so a vector is a plain
//! array of integers and a fit check is a handful of integer comparisons.

use std::collections::BTreeMap;
use std::fmt;

use crate::quantity::{QuantityError, parse_scaled};

/// How many distinct resource names one fleet may use (cpu, memory and pods included).
pub const MAX_RESOURCES: usize = 12;

/// Slot of cpu (millicores).
pub const CPU: usize = 0;
/// Slot of memory (bytes).
pub const MEMORY: usize = 1;
/// Slot of pods (count).
pub const PODS: usize = 2;

/// Errors building resource vectors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// A quantity did not parse.
    #[error("resource {name}: {source}")]
    Quantity {
        /// The resource name.
        name: String,
        /// Why.
        source: QuantityError,
    },
    /// A negative quantity.
    #[error("resource {name}: {value} must not be negative")]
    Negative {
        /// The resource name.
        name: String,
        /// The quantity as written.
        value: String,
    },
    /// More distinct resource names than slots.
    #[error("resource {name}: the fleet already uses {MAX_RESOURCES} distinct resource names")]
    TooManyNames {
        /// The name that did not fit.
        name: String,
    },
}

/// Interned resource names. Slot 0 is cpu, 1 memory, 2 pods; extended resources take the next
/// free slot in order of first appearance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceNames {
    names: Vec<String>,
}

impl Default for ResourceNames {
    fn default() -> Self {
        Self {
            names: vec!["cpu".into(), "memory".into(), "pods".into()],
        }
    }
}

impl ResourceNames {
    /// The slots of the resources `weights` names that this fleet has, with their weights,
    /// leaving out those weighted 0 (what a bin-packing score sums over).
    pub fn weighted_slots(&self, weights: &[(String, f64)]) -> Vec<(usize, f64)> {
        weights
            .iter()
            .filter_map(|(name, w)| self.get(name).map(|s| (s, *w)))
            .filter(|(_, w)| *w > 0.0)
            .collect()
    }

    /// The slot of `name`, if interned.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The slot of `name`, interning it if new.
    pub fn intern(&mut self, name: &str) -> Result<usize, ResourceError> {
        if let Some(i) = self.get(name) {
            return Ok(i);
        }
        if self.names.len() >= MAX_RESOURCES {
            return Err(ResourceError::TooManyNames {
                name: name.to_string(),
            });
        }
        self.names.push(name.to_string());
        Ok(self.names.len() - 1)
    }

    /// The name in `slot`.
    pub fn name(&self, slot: usize) -> &str {
        self.names.get(slot).map(String::as_str).unwrap_or("?")
    }

    /// Whether `slot` holds GPUs: an extended resource named `<vendor>/gpu` (`nvidia.com/gpu`,
    /// `amd.com/gpu`, ...).
    pub fn is_gpu(&self, slot: usize) -> bool {
        let name = self.name(slot);
        slot >= 3
            && (name.ends_with("/gpu")
                || name == crate::model::vgpu::NUMBER
                || name.starts_with("nvidia.com/mig-"))
    }

    /// Whether `r` asks for (or offers) any GPU.
    pub fn has_gpu(&self, r: &Resources) -> bool {
        (3..self.len()).any(|i| self.is_gpu(i) && r.get(i) > 0)
    }

    /// Number of interned names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: cpu, memory and pods are always interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Parses a resource list (name → Kubernetes quantity text) into a vector, interning names.
    pub fn parse<'a>(
        &mut self,
        list: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Resources, ResourceError> {
        let mut out = Resources::ZERO;
        for (name, qty) in list {
            let slot = self.intern(name)?;
            let scale = if slot == CPU { 1000 } else { 1 };
            let v = parse_scaled(qty, scale).map_err(|source| ResourceError::Quantity {
                name: name.to_string(),
                source,
            })?;
            if v < 0 {
                return Err(ResourceError::Negative {
                    name: name.to_string(),
                    value: qty.to_string(),
                });
            }
            out.0[slot] = v;
        }
        Ok(out)
    }

    /// Renders a vector as a Kubernetes resource list (non-zero entries only).
    pub fn to_list(&self, r: &Resources) -> BTreeMap<String, String> {
        (0..self.len())
            .filter(|&i| r.0[i] != 0)
            .map(|i| (self.name(i).to_string(), format_quantity(i, r.0[i])))
            .collect()
    }

    /// A short human form, e.g. `cpu=2, memory=4Gi, nvidia.com/gpu=8`.
    pub fn display(&self, r: &Resources) -> String {
        self.to_list(r)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Formats one slot's value as a Kubernetes quantity.
pub fn format_quantity(slot: usize, v: i64) -> String {
    if slot == CPU {
        if v % 1000 == 0 {
            (v / 1000).to_string()
        } else {
            format!("{v}m")
        }
    } else if slot == MEMORY && v != 0 && v % (1 << 30) == 0 {
        format!("{}Gi", v >> 30)
    } else if slot == MEMORY && v != 0 && v % (1 << 20) == 0 {
        format!("{}Mi", v >> 20)
    } else {
        v.to_string()
    }
}

/// A resource vector: one integer per interned slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Resources(pub [i64; MAX_RESOURCES]);

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nz: Vec<String> = self
            .0
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(i, v)| format!("{i}:{v}"))
            .collect();
        write!(f, "Resources[{}]", nz.join(" "))
    }
}

/// `a + b`, saturating at the ends of `i64`, written without branches so that loops over a
/// vector of them compile to straight-line (and vectorizable) code: the wrapped sum is kept
/// unless both operands have one sign and the sum the other.
#[inline(always)]
fn sat_add(a: i64, b: i64) -> i64 {
    let s = a.wrapping_add(b);
    let overflow = ((a ^ s) & (b ^ s)) >> 63; // all ones on overflow
    let limit = (a >> 63) ^ i64::MAX; // MAX when a >= 0, MIN when a < 0
    (s & !overflow) | (limit & overflow)
}

/// `a - b`, saturating at the ends of `i64`, branch-free (see [`sat_add`]).
#[inline(always)]
fn sat_sub(a: i64, b: i64) -> i64 {
    let s = a.wrapping_sub(b);
    let overflow = ((a ^ b) & (a ^ s)) >> 63;
    let limit = (a >> 63) ^ i64::MAX;
    (s & !overflow) | (limit & overflow)
}

impl Resources {
    /// The zero vector.
    pub const ZERO: Resources = Resources([0; MAX_RESOURCES]);

    /// A vector with a single slot set.
    pub fn of(slot: usize, v: i64) -> Self {
        let mut r = Self::ZERO;
        r.0[slot] = v;
        r
    }

    /// Value in `slot`.
    #[inline]
    pub fn get(&self, slot: usize) -> i64 {
        self.0[slot]
    }

    /// Sets `slot`.
    #[inline]
    pub fn set(&mut self, slot: usize, v: i64) {
        self.0[slot] = v;
    }

    /// Element-wise sum. Like every operation here it saturates at the ends of `i64` rather
    /// than wrapping: a sum that large (pending demand of a million pods asking 9Pi each) is
    /// "more than any fleet has", which is what the comparisons then see. Inputs that the
    /// project reads are bounded so that sums of what exists (capacity, what is bound) are
    /// exact: the simulator refuses a fleet whose total does not fit.
    #[inline(always)]
    pub fn add(&mut self, o: &Resources) {
        for i in 0..MAX_RESOURCES {
            self.0[i] = sat_add(self.0[i], o.0[i]);
        }
    }

    /// Element-wise difference (saturating, see [`Resources::add`]).
    #[inline(always)]
    pub fn sub(&mut self, o: &Resources) {
        for i in 0..MAX_RESOURCES {
            self.0[i] = sat_sub(self.0[i], o.0[i]);
        }
    }

    /// `self + o`.
    #[inline(always)]
    pub fn plus(mut self, o: &Resources) -> Resources {
        self.add(o);
        self
    }

    /// `self - o`.
    #[inline(always)]
    pub fn minus(mut self, o: &Resources) -> Resources {
        self.sub(o);
        self
    }

    /// Element-wise `self * k` (saturating, see [`Resources::add`]).
    #[inline]
    pub fn times(mut self, k: i64) -> Resources {
        for v in &mut self.0 {
            *v = v.saturating_mul(k);
        }
        self
    }

    /// Element-wise maximum.
    #[inline]
    pub fn max(mut self, o: &Resources) -> Resources {
        for i in 0..MAX_RESOURCES {
            self.0[i] = self.0[i].max(o.0[i]);
        }
        self
    }

    /// Element-wise minimum.
    #[inline]
    pub fn min(mut self, o: &Resources) -> Resources {
        for i in 0..MAX_RESOURCES {
            self.0[i] = self.0[i].min(o.0[i]);
        }
        self
    }

    /// True when every slot is zero.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|v| *v == 0)
    }

    /// True when no slot is negative.
    pub fn is_non_negative(&self) -> bool {
        self.0.iter().all(|v| *v >= 0)
    }

    /// Checks that this request fits into `avail`: every slot the request asks for (> 0) is
    /// available. Returns the first slot that does not fit.
    #[inline]
    pub fn fits_in(&self, avail: &Resources) -> Result<(), usize> {
        for i in 0..MAX_RESOURCES {
            if self.0[i] > 0 && self.0[i] > avail.0[i] {
                return Err(i);
            }
        }
        Ok(())
    }

    /// [`fits_in`](Self::fits_in), looking only at the first `slots` (the names interned so
    /// far: no vector has anything past them).
    #[inline]
    pub fn fits_in_first(&self, slots: usize, avail: &Resources) -> Result<(), usize> {
        for i in 0..slots.min(MAX_RESOURCES) {
            if self.0[i] > 0 && self.0[i] > avail.0[i] {
                return Err(i);
            }
        }
        Ok(())
    }

    /// [`fits_in`](Self::fits_in) of `idle.plus(plus).minus(minus)`, slot for slot the same
    /// (saturating) sums, computed only for the slots this request asks for among the first
    /// `slots` (the names interned so far: no vector has anything past them). The predicate
    /// runs it for every node a scan looks at.
    #[inline]
    pub fn fits_in_sum(
        &self,
        slots: usize,
        idle: &Resources,
        plus: &Resources,
        minus: &Resources,
    ) -> Result<(), usize> {
        for i in 0..slots.min(MAX_RESOURCES) {
            let r = self.0[i];
            if r > 0 && r > sat_sub(sat_add(idle.0[i], plus.0[i]), minus.0[i]) {
                return Err(i);
            }
        }
        Ok(())
    }

    /// Every slot `<=` the same slot of `o`.
    #[inline]
    pub fn le(&self, o: &Resources) -> bool {
        (0..MAX_RESOURCES).all(|i| self.0[i] <= o.0[i])
    }

    /// Whether the request asks for any of the slots in `slots`.
    pub fn requests(&self, slot: usize) -> bool {
        self.0[slot] > 0
    }
}

/// The largest fraction of `total` that `alloc` takes in any resource (its dominant share).
pub fn dominant_share(alloc: &Resources, total: &Resources) -> f64 {
    alloc
        .0
        .iter()
        .zip(total.0.iter())
        .filter(|(_, t)| **t > 0)
        .map(|(a, t)| *a as f64 / *t as f64)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_keeps_cpu_memory_pods_first_and_adds_extended_in_order() {
        let mut n = ResourceNames::default();
        assert_eq!(n.intern("cpu"), Ok(CPU));
        assert_eq!(n.intern("nvidia.com/gpu"), Ok(3));
        assert_eq!(n.intern("rdma/hca"), Ok(4));
        assert_eq!(n.intern("nvidia.com/gpu"), Ok(3));
        for i in 0..(MAX_RESOURCES - 5) {
            n.intern(&format!("example.com/r{i}")).unwrap();
        }
        assert!(matches!(
            n.intern("one-too-many"),
            Err(ResourceError::TooManyNames { .. })
        ));
    }

    #[test]
    fn parse_names_the_bad_resource() {
        let mut n = ResourceNames::default();
        let err = n.parse([("cpu", "2"), ("memory", "4Gx")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("resource memory: invalid quantity \"4Gx\""),
            "{err}"
        );
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let big = Resources::of(MEMORY, i64::MAX - 1);
        let sum = big.plus(&Resources::of(MEMORY, 8));
        assert_eq!(sum.get(MEMORY), i64::MAX, "a sum past i64 stays at the top");
        let product = Resources::of(MEMORY, 9 << 50).times(1_000_000);
        assert_eq!(product.get(MEMORY), i64::MAX);
        let diff = Resources::of(CPU, i64::MIN + 1).minus(&Resources::of(CPU, 5));
        assert_eq!(diff.get(CPU), i64::MIN);
        let mut acc = Resources::ZERO;
        acc.add(&Resources::of(PODS, 3));
        acc.sub(&Resources::of(PODS, 1));
        assert_eq!(acc.get(PODS), 2, "in range it stays exact");
        for (a, b) in [
            (i64::MAX, 1),
            (i64::MIN, -1),
            (i64::MIN, i64::MIN),
            (-5, 3),
            (7, -9),
        ] {
            assert_eq!(super::sat_add(a, b), a.saturating_add(b), "{a} + {b}");
            assert_eq!(super::sat_sub(a, b), a.saturating_sub(b), "{a} - {b}");
            assert_eq!(super::sat_sub(b, a), b.saturating_sub(a), "{b} - {a}");
        }
        assert!(
            Resources::of(MEMORY, 1 << 40)
                .fits_in(&Resources::of(MEMORY, i64::MAX).plus(&big))
                .is_ok()
        );
    }

    proptest::proptest! {
        /// The predicate's shortcut gives the answer of the whole vector, overflow included.
        #[test]
        fn fits_in_sum_answers_as_fits_in_of_the_sum(
            v in proptest::collection::vec(
                proptest::prop_oneof![
                    -3i64..20,
                    proptest::strategy::Just(i64::MAX),
                    proptest::strategy::Just(i64::MIN),
                    proptest::num::i64::ANY,
                ],
                4 * MAX_RESOURCES,
            ),
            interned in 0..=MAX_RESOURCES,
        ) {
            // Nothing is ever set past the interned names.
            let r = |k: usize| {
                let mut a = Resources::ZERO;
                a.0[..interned].copy_from_slice(&v[k * MAX_RESOURCES..k * MAX_RESOURCES + interned]);
                a
            };
            let (req, idle, plus, minus) = (r(0), r(1), r(2), r(3));
            proptest::prop_assert_eq!(
                req.fits_in_sum(interned, &idle, &plus, &minus),
                req.fits_in(&idle.plus(&plus).minus(&minus))
            );
            proptest::prop_assert_eq!(req.fits_in_first(interned, &idle), req.fits_in(&idle));
        }
    }

    #[test]
    fn fit_checks_only_requested_slots() {
        let mut n = ResourceNames::default();
        let req = n.parse([("cpu", "2"), ("nvidia.com/gpu", "1")]).unwrap();
        let node = n
            .parse([("cpu", "4"), ("memory", "8Gi"), ("nvidia.com/gpu", "1")])
            .unwrap();
        assert_eq!(req.fits_in(&node), Ok(()));
        let no_gpu = n.parse([("cpu", "64")]).unwrap();
        assert_eq!(req.fits_in(&no_gpu), Err(3));
        assert_eq!(n.display(&req), "cpu=2, nvidia.com/gpu=1");
    }
}
