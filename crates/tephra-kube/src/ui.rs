//! The web UI on `--listen-address`: `/ui/` (one page whose views, queues, jobs, clusters and
//! failover, are linkable by fragment and refresh every two seconds) and the JSON it renders,
//! `/ui/api/v1/fleet` ([`tephra_index::view`], with expected starts from [`crate::eta`]) and
//! `/ui/api/v1/history` ([`tephra_index::history`]: queues over the last hours and the
//! failover timeline) and `/ui/api/v1/history/jobs/NAMESPACE/NAME` (a job's phases and
//! reasons). Read-only. It answers only requests from the
//! loopback interface (where `kubectl port-forward` arrives) unless the operator opens it to
//! anyone who can reach the port (`--ui-open`). The page is a file of this crate, built in: one
//! binary, nothing to build with another toolchain.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::StatusCode;

/// The page.
pub const PAGE: &str = include_str!("ui/page.html");

/// What the UI serves.
#[derive(Clone, Debug, Default)]
pub struct Ui {
    /// The latest fleet view, as JSON.
    pub fleet: Arc<RwLock<Bytes>>,
    /// The history ([`tephra_index::history`]), fed by the [`Publisher`] on the loop and
    /// serialized on request, so that the loop never pays for its JSON.
    pub history: Arc<Mutex<tephra_index::history::History>>,
    /// Whether requests from beyond the loopback interface are answered (`--ui-open`).
    pub open: bool,
}

impl Ui {
    /// A UI with nothing published yet, answering beyond loopback when `open`.
    pub fn new(open: bool) -> Self {
        Self {
            open,
            ..Self::default()
        }
    }

    /// Keeps `view` as what `/ui/api/v1/fleet` answers.
    pub fn publish(&self, view: &tephra_index::view::FleetView) {
        match serde_json::to_vec(view) {
            Ok(json) => {
                let mut slot = self.fleet.write().unwrap_or_else(|e| e.into_inner());
                *slot = Bytes::from(json);
            }
            Err(e) => tracing::warn!(error = %e, "fleet view not serialized"),
        }
    }

    /// Takes `view` into the history, at `now`.
    pub fn observe(&self, view: &tephra_index::view::FleetView, now: i64) {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(view, now);
    }

    /// The history's answer to `rest` (after `/ui/api/v1/history`), as JSON: the queues and
    /// failover, or `/jobs/NAMESPACE/NAME`'s changes.
    fn history_json(&self, rest: &str) -> Option<serde_json::Result<Vec<u8>>> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        match rest.strip_prefix("/jobs/") {
            None if rest.is_empty() => Some(serde_json::to_vec(&h.view())),
            Some(job) if job.split('/').count() == 2 => Some(serde_json::to_vec(&h.job(job))),
            _ => None,
        }
    }
}

/// How the UI and the expected starts it shows run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UiOptions {
    /// Whether requests from beyond the loopback interface are answered (`--ui-open`).
    pub open: bool,
    /// Expected starts are recomputed at most this often (`--eta-every`; zero: never).
    pub eta_every: Duration,
    /// What a pod of which nothing is known is expected to run (`--eta-default-duration`).
    pub default_run: Duration,
}

impl Default for UiOptions {
    fn default() -> Self {
        Self {
            open: false,
            eta_every: Duration::from_secs(10),
            default_run: Duration::from_secs(tephra_index::state::durations::DEFAULT_RUN_S as u64),
        }
    }
}

/// Publishes the scheduler's fleet view to a [`Ui`] when the cache, the role or the expected
/// starts changed, at most every two seconds (the page refreshes as often), and keeps the
/// expected starts recomputed ([`crate::eta`]).
///
/// The loop only builds the view (plain data, no share of the cache); a thread of the
/// publisher's own adds the expected starts, serializes it and takes it into the history, so
/// that the loop never pays for the JSON.
pub struct Publisher {
    ui: Ui,
    /// When, at which cache generation and in which role the view was last published.
    shown: Option<(Instant, u64, bool)>,
    forecaster: crate::eta::Forecaster,
    /// Whether predictions came that the published view does not show yet.
    fresh: bool,
    /// The publishing thread: one view at a time.
    worker: Option<mpsc::SyncSender<Shown>>,
}

/// A view to publish, the predictions to show in it, and when it was taken.
type Shown = (
    tephra_index::view::FleetView,
    Option<Arc<crate::eta::Predictions>>,
    i64,
);

/// Publishes one view: its expected starts added, as JSON, and into the history.
fn publish(ui: &Ui, (mut view, predictions, now): Shown) {
    if let Some(p) = predictions {
        tephra_index::eta::annotate_view(&mut view, &p);
    }
    ui.publish(&view);
    ui.observe(&view, now);
}

impl Publisher {
    /// A publisher to a new [`Ui`], which has shown nothing yet; expected-start rounds report
    /// to `metrics`.
    pub fn new(options: &UiOptions, metrics: Arc<crate::metrics::Metrics>) -> Self {
        let (every, default_run) = (options.eta_every, options.default_run);
        let ui = Ui::new(options.open);
        let (tx, rx) = mpsc::sync_channel(1);
        let to = ui.clone();
        let worker = match std::thread::Builder::new()
            .name("tephra-ui".into())
            .spawn(move || rx.into_iter().for_each(|s| publish(&to, s)))
        {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::warn!(error = %e, "no UI thread; the loop publishes the UI itself");
                None
            }
        };
        Self {
            ui,
            shown: None,
            forecaster: crate::eta::Forecaster::new(every, default_run, metrics),
            fresh: false,
            worker,
        }
    }

    /// What it publishes to.
    pub fn ui(&self) -> &Ui {
        &self.ui
    }

    /// Publishes `state`'s view if it is due; returns the PodGroup annotation writes that new
    /// expected starts call for.
    pub fn show(
        &mut self,
        state: &tephra_index::state::State,
        leading: bool,
        config: &Arc<tephra_scheduler::SchedulerConfig>,
        now: i64,
    ) -> Vec<tephra_index::writes::Write> {
        let mut writes = Vec::new();
        if let Some(p) = self.forecaster.poll(state, config, now) {
            writes = tephra_index::eta::annotation_writes(state, &p, now);
            self.fresh = true;
        }
        let generation = state.cache().world().generation;
        let due = self.shown.is_none_or(|(at, g, l)| {
            (g != generation || l != leading || self.fresh)
                && at.elapsed() >= Duration::from_secs(2)
        });
        if due {
            let role = if leading { "leader" } else { "standby" };
            let shown = (state.view(role), self.forecaster.latest().cloned(), now);
            let sent = match &self.worker {
                Some(tx) => match tx.try_send(shown) {
                    Ok(()) => true,
                    // Still publishing the last one: this one waits for the next tick.
                    Err(mpsc::TrySendError::Full(_)) => false,
                    Err(mpsc::TrySendError::Disconnected(s)) => {
                        self.worker = None;
                        publish(&self.ui, s);
                        true
                    }
                },
                None => {
                    publish(&self.ui, shown);
                    true
                }
            };
            if sent {
                self.shown = Some((Instant::now(), generation, leading));
                self.fresh = false;
            }
        }
        writes
    }
}

/// The UI's answer to `path` from `peer` (status, content type, body), or `None` when the path
/// is not the UI's.
pub fn route(
    ui: &Ui,
    path: &str,
    peer: Option<SocketAddr>,
) -> Option<(StatusCode, &'static str, Bytes)> {
    if path != "/ui" && !path.starts_with("/ui/") {
        return None;
    }
    if !ui.open && !peer.is_some_and(|p| p.ip().is_loopback()) {
        return Some((
            StatusCode::FORBIDDEN,
            "text/plain",
            Bytes::from_static(
                b"the UI answers on the loopback interface only (use kubectl port-forward), \
                  unless tephra scheduler runs with --ui-open",
            ),
        ));
    }
    Some(match path {
        "/ui" | "/ui/" => (
            StatusCode::OK,
            "text/html; charset=utf-8",
            Bytes::from_static(PAGE.as_bytes()),
        ),
        "/ui/api/v1/fleet" => {
            let body = ui
                .fleet
                .read()
                .map_or_else(|e| e.into_inner().clone(), |b| b.clone());
            if body.is_empty() {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    Bytes::from_static(b"the fleet view is not ready yet"),
                )
            } else {
                (StatusCode::OK, "application/json", body)
            }
        }
        _ => match path
            .strip_prefix("/ui/api/v1/history")
            .and_then(|rest| ui.history_json(rest))
        {
            Some(Ok(json)) => (StatusCode::OK, "application/json", Bytes::from(json)),
            Some(Err(e)) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                Bytes::from(format!("history not serialized: {e}")),
            ),
            None => (
                StatusCode::NOT_FOUND,
                "text/plain",
                Bytes::from_static(b"not found"),
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(ip: &str) -> Option<SocketAddr> {
        format!("{ip}:40000").parse().ok()
    }

    #[test]
    fn the_ui_answers_only_on_loopback_unless_opened() {
        let closed = Ui::default();
        let from = |ui: &Ui, ip: &str| route(ui, "/ui/", peer(ip)).map(|r| r.0);
        assert_eq!(from(&closed, "127.0.0.1"), Some(StatusCode::OK));
        assert_eq!(from(&closed, "[::1]"), Some(StatusCode::OK));
        assert_eq!(from(&closed, "10.1.2.3"), Some(StatusCode::FORBIDDEN));
        let open = Ui {
            open: true,
            ..Ui::default()
        };
        assert_eq!(from(&open, "10.1.2.3"), Some(StatusCode::OK));
        assert!(route(&closed, "/metrics", peer("10.1.2.3")).is_none());
    }

    #[test]
    fn the_fleet_json_is_served_once_published() {
        let ui = Ui::default();
        let get = |ui: &Ui| route(ui, "/ui/api/v1/fleet", peer("127.0.0.1"));
        assert_eq!(get(&ui).map(|r| r.0), Some(StatusCode::SERVICE_UNAVAILABLE));
        ui.publish(&tephra_index::view::FleetView {
            role: "leader".into(),
            ..Default::default()
        });
        let (status, kind, body) = get(&ui).expect("the UI's path");
        assert_eq!((status, kind), (StatusCode::OK, "application/json"));
        assert!(String::from_utf8_lossy(&body).contains("\"role\":\"leader\""));
    }
}
