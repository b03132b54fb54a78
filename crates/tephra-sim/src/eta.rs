//! The expected-start probe (`tephra sim --eta-every 10m [--eta-noise 0.5]`): how well the
//! scheduler core's forecast ([`tephra_scheduler::eta`]) predicts when waiting jobs start.
//! After a session, at most once per interval and only when some job waits without a
//! prediction, it forecasts every waiting job from the simulator's state, each pod running for
//! the time it really runs, or for that time off by up to ±`noise` (a factor fixed per pod).
//! Each job's first prediction is compared with when its gang really started.

use crate::Map;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::cache::Cache;
use tephra_scheduler::eta::{Budget, forecast};
use tephra_scheduler::model::PodSpec;

/// How the probe runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EtaOptions {
    /// At most one forecast per this many ms of simulated time.
    pub every_ms: i64,
    /// Durations off by up to this share, either way (0: exact).
    pub noise: f64,
}

/// What the probe measured (`report.json`'s `eta`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct EtaReport {
    /// The durations' noise (0: exact).
    pub noise: f64,
    /// Forecasts run, and their wall time.
    pub forecasts: u32,
    /// Wall seconds spent forecasting.
    pub forecast_wall_s: f64,
    /// Jobs with a prediction that then started: compared.
    pub compared: u64,
    /// Median of |predicted − actual start|, seconds.
    pub median_error_s: f64,
    /// 90th percentile of the same.
    pub p90_error_s: f64,
    /// Jobs predicted not to start within the horizon (24 h), or never, that did start.
    pub not_within: u64,
}

/// How long a pod runs (ms) and, if it runs already, since when (ms): what the forecast is told
/// of the pod with a given `namespace/name`.
pub(crate) type PodTimes<'a> = &'a dyn Fn(&str) -> Option<(i64, Option<i64>)>;

/// The probe's state during a run.
#[derive(Debug)]
pub(crate) struct EtaProbe {
    options: EtaOptions,
    start_delay_ms: i64,
    last_ms: Option<i64>,
    /// Each job's first prediction: when it was made and the start it predicts (`None`: not
    /// within the horizon), ms.
    predicted: Map<String, (i64, Option<i64>)>,
    /// When each job's gang started, ms.
    actual: Map<String, i64>,
    forecasts: u32,
    wall_s: f64,
}

/// A factor in `[1 − noise, 1 + noise]` fixed by `key` (FNV-1a of the key).
fn factor(key: &str, noise: f64) -> f64 {
    if noise == 0.0 {
        return 1.0;
    }
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    1.0 + noise * (2.0 * u - 1.0)
}

impl EtaProbe {
    pub(crate) fn new(options: EtaOptions, start_delay_ms: i64) -> Self {
        Self {
            options,
            start_delay_ms,
            last_ms: None,
            predicted: Map::default(),
            actual: Map::default(),
            forecasts: 0,
            wall_s: 0.0,
        }
    }

    /// Whether a forecast is due at `now_ms` for `waiting` (jobs whose gang has not started).
    pub(crate) fn due<'a>(
        &self,
        now_ms: i64,
        mut waiting: impl Iterator<Item = &'a String>,
    ) -> bool {
        self.last_ms
            .is_none_or(|l| now_ms - l >= self.options.every_ms)
            && waiting.any(|j| !self.predicted.contains_key(j))
    }

    /// Forecasts every waiting job from `cache` at `now_ms`; `pod(key)` says how long a pod
    /// runs (ms) and, if it runs already, since when.
    pub(crate) fn forecast(
        &mut self,
        cache: &Cache,
        config: &Arc<SchedulerConfig>,
        now_ms: i64,
        pod: PodTimes<'_>,
    ) {
        self.last_ms = Some(now_ms);
        let (noise, delay) = (self.options.noise, self.start_delay_ms);
        let runs_for = |p: &PodSpec| -> i64 {
            let key = format!("{}/{}", p.namespace, p.name);
            let Some((duration_ms, started_ms)) = pod(&key) else {
                return 0;
            };
            let expected = (duration_ms as f64 * factor(&key, noise)) as i64;
            let ms = match started_ms {
                Some(at) => at + expected - now_ms,
                // Placed or not yet: it starts after the kubelet's start delay.
                None => delay + expected,
            };
            (ms.max(0) + 999) / 1000
        };
        let started = Instant::now();
        let f = forecast(cache, config, now_ms / 1000, &runs_for, Budget::default());
        self.wall_s += started.elapsed().as_secs_f64();
        self.forecasts += 1;
        for (job, s) in f.starts {
            self.predicted
                .entry(job)
                .or_insert((now_ms, Some(s * 1000 + delay)));
        }
        // Never (as the fleet is) counts as not within the horizon: a start that follows
        // either was not foreseen.
        for job in f.not_within.into_iter().chain(f.never.into_keys()) {
            self.predicted.entry(job).or_insert((now_ms, None));
        }
    }

    /// The gang of `job` started at `now_ms`.
    pub(crate) fn started(&mut self, job: &str, now_ms: i64) {
        self.actual.entry(job.to_string()).or_insert(now_ms);
    }

    /// What was measured.
    pub(crate) fn report(&self) -> EtaReport {
        let mut errors: Vec<f64> = Vec::new();
        let mut not_within = 0;
        for (job, (_, predicted)) in &self.predicted {
            let Some(actual) = self.actual.get(job) else {
                continue;
            };
            match predicted {
                Some(p) => errors.push((p - actual).abs() as f64 / 1000.0),
                None => not_within += 1,
            }
        }
        errors.sort_by(f64::total_cmp);
        let at = |q: f64| {
            errors
                .get(((errors.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        EtaReport {
            noise: self.options.noise,
            forecasts: self.forecasts,
            forecast_wall_s: self.wall_s,
            compared: errors.len() as u64,
            median_error_s: at(0.5),
            p90_error_s: at(0.9),
            not_within,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_noise_factor_is_fixed_per_pod_and_within_its_bounds() {
        for key in ["a/p-0", "a/p-1", "b/q-7"] {
            let f = factor(key, 0.5);
            assert!((0.5..=1.5).contains(&f), "{key}: {f}");
            assert_eq!(f, factor(key, 0.5));
        }
        assert_eq!(factor("a/p-0", 0.0), 1.0);
    }
}
