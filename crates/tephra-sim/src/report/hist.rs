//! A log-bucketed histogram ([`Hist`]): wait times and session costs in constant memory.

use std::collections::BTreeMap;

/// A log-bucketed histogram: constant memory whatever the number of samples, quantiles within
/// 2% of the true value.
#[derive(Clone, Debug, Default)]
pub struct Hist {
    buckets: BTreeMap<u32, u64>,
    count: u64,
    sum: f64,
    max: f64,
}

const GROWTH: f64 = 1.02;

impl Hist {
    /// Adds a non-negative sample.
    pub fn add(&mut self, v: f64) {
        let v = v.max(0.0);
        let b = ((1.0 + v).ln() / GROWTH.ln()).floor() as u32;
        *self.buckets.entry(b).or_insert(0) += 1;
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Largest sample.
    pub fn max(&self) -> f64 {
        self.max
    }

    /// The `q` quantile (0..1), as the upper edge of its bucket, capped at the maximum.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in &self.buckets {
            seen += n;
            if seen >= target {
                return (GROWTH.powi(*b as i32 + 1) - 1.0).min(self.max);
            }
        }
        self.max
    }

    /// Bucketed counts, for charts: (lower edge, upper edge, count).
    pub fn bins(&self) -> Vec<(f64, f64, u64)> {
        self.buckets
            .iter()
            .map(|(b, n)| {
                (
                    GROWTH.powi(*b as i32) - 1.0,
                    GROWTH.powi(*b as i32 + 1) - 1.0,
                    *n,
                )
            })
            .collect()
    }

    /// Merges another histogram in.
    pub fn merge(&mut self, o: &Hist) {
        for (b, n) in &o.buckets {
            *self.buckets.entry(*b).or_insert(0) += n;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_two_percent() {
        let mut h = Hist::default();
        for i in 1..=1000 {
            h.add(f64::from(i));
        }
        let p95 = h.quantile(0.95);
        assert!((p95 - 950.0).abs() / 950.0 < 0.02, "{p95}");
        assert_eq!(h.max(), 1000.0);
        assert!((h.mean() - 500.5).abs() < 1e-9);
    }
}
