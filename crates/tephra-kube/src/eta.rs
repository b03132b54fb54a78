//! Expected starts on the running scheduler ([`tephra_index::eta`]): a round of the forecast
//! runs on a thread of its own, never on the session's path. A round starts when the cache
//! changed since the last one and that one is at least `--eta-every` old (and at least every
//! five minutes, as running pods overrun what was expected of them). Each round's budget of
//! sessions is what about [`ROUND_WALL`] of one core allows, measured on the rounds before it.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tephra_index::eta::Round;
pub use tephra_index::eta::{EXPECTED_START, Expected, Predictions};
use tephra_index::state::State;
use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::eta::Budget;

/// About how long one round may take.
pub const ROUND_WALL: Duration = Duration::from_secs(2);

/// A round is started at least this often while jobs wait.
const REFRESH: Duration = Duration::from_secs(300);

/// Sessions of the first round, and the bounds of those after it.
const SESSIONS: (u32, u32, u32) = (200, 20, 2_000);

/// Runs forecast rounds off the loop and keeps the latest predictions.
pub struct Forecaster {
    metrics: Arc<crate::metrics::Metrics>,
    every: Duration,
    default_run: Duration,
    /// When the last round started, on which cache generation.
    last: Option<(Instant, u64)>,
    running: Option<mpsc::Receiver<(Predictions, Duration)>>,
    latest: Option<Arc<Predictions>>,
    sessions: u32,
}

impl Forecaster {
    /// Rounds at most every `every` (`--eta-every`; zero: never); a pod of which nothing is
    /// known runs `default_run`.
    pub fn new(
        every: Duration,
        default_run: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        Self {
            metrics,
            every,
            default_run,
            last: None,
            running: None,
            latest: None,
            sessions: SESSIONS.0,
        }
    }

    /// The latest predictions, once a round finished.
    pub fn latest(&self) -> Option<&Arc<Predictions>> {
        self.latest.as_ref()
    }

    /// Takes in a finished round (returning its predictions) and starts one if due.
    pub fn poll(
        &mut self,
        state: &State,
        config: &Arc<SchedulerConfig>,
        now: i64,
    ) -> Option<Arc<Predictions>> {
        let mut fresh = None;
        if let Some(rx) = &self.running {
            match rx.try_recv() {
                Ok((p, took)) => {
                    // The next round's budget: what fits in ROUND_WALL at this round's pace.
                    let per = took.as_secs_f64() / f64::from(p.sessions.max(1));
                    let fits = (ROUND_WALL.as_secs_f64() / per.max(1e-6)) as u32;
                    self.sessions = fits.clamp(SESSIONS.1, SESSIONS.2);
                    tracing::debug!(
                        sessions = p.sessions,
                        jobs = p.jobs.len(),
                        unresolved = p.unresolved.len(),
                        took_ms = took.as_millis() as u64,
                        "expected starts recomputed"
                    );
                    self.metrics.eta_round.observe(took.as_secs_f64());
                    self.metrics
                        .eta_predicted
                        .set(i64::try_from(p.jobs.len()).unwrap_or(i64::MAX));
                    self.metrics
                        .eta_unresolved
                        .set(i64::try_from(p.unresolved.len()).unwrap_or(i64::MAX));
                    let p = Arc::new(p);
                    self.latest = Some(Arc::clone(&p));
                    fresh = Some(p);
                    self.running = None;
                }
                Err(mpsc::TryRecvError::Empty) => return None,
                Err(mpsc::TryRecvError::Disconnected) => self.running = None,
            }
        }
        let generation = state.cache().world().generation;
        let due = !self.every.is_zero()
            && self.last.is_none_or(|(at, g)| {
                let age = at.elapsed();
                (g != generation && age >= self.every) || age >= REFRESH
            });
        if due {
            let budget = Budget {
                sessions: self.sessions,
                ..Budget::default()
            };
            let default_s = i64::try_from(self.default_run.as_secs()).unwrap_or(i64::MAX);
            let round = Round::new(state, Arc::clone(config), now, budget, default_s);
            let (tx, rx) = mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("tephra-eta".into())
                .spawn(move || {
                    let started = Instant::now();
                    let p = round.run();
                    let _ = tx.send((p, started.elapsed()));
                });
            match spawned {
                Ok(_) => self.running = Some(rx),
                Err(e) => tracing::warn!(error = %e, "expected-start round not started"),
            }
            self.last = Some((Instant::now(), generation));
        }
        fresh
    }
}
