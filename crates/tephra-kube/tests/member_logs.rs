//! What the scheduler's log says about members: while a member is down, every warning its
//! watchers, probe and writes cause names it, in one readable line (no debug dumps); and a
//! member's credentials Secret changed on the control plane is read at once (its watch), not
//! at the next 401 or periodic read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

/// A writer that keeps every line logged.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Keeps the lines logged at `filter` on this thread (the test's current-thread runtime runs
/// every task here).
fn capture(filter: &str) -> (Lines, tracing::subscriber::DefaultGuard) {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (lines, tracing::subscriber::set_default(subscriber))
}

#[tokio::test]
async fn while_a_member_is_down_every_line_about_it_names_it() {
    // The binary's default filter (the devcluster's own lines aside).
    let (lines, _guard) = capture(&format!(
        "{},tephra_devcluster=off",
        tephra_kube::logging::DEFAULT_FILTER
    ));
    let dev = fleet_of(&[("east", 2), ("west", 8)]).await;
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    until_ready(&sched).await;
    let start = lines.0.lock().unwrap().len();
    dev.stop_member("west").await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let text = String::from_utf8_lossy(&lines.0.lock().unwrap()[start..]).to_string();
    sched.stop().await;
    let about: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    assert!(!about.is_empty(), "the outage was not logged:\n{text}");
    for l in about {
        // One readable line: no debug dump of the client's structs.
        assert!(
            !l.contains("Status {") && !l.contains("Custom {"),
            "a debug dump at WARN: {l}"
        );
        assert!(
            l.contains("west"),
            "a line about the outage does not name the member: {l}\n{text}"
        );
    }
}

#[tokio::test]
async fn a_members_credentials_secret_changed_on_the_control_plane_is_used_at_once() {
    use base64::Engine;
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, Patch, PatchParams};
    let (lines, _guard) = capture("info,tephra_devcluster=off");
    let dev = fleet_of(&[("east", 2), ("west", 8)]).await;
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    until_ready(&sched).await;
    // A second valid token: the old one still works, so no 401 tells the scheduler.
    let token = dev.server("west").unwrap().api.users.master("west-admin-2");
    let secrets: Api<Secret> = Api::namespaced(cp.clone(), "tephra-system");
    secrets
        .patch(
            "west-credentials",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"token":
                base64::engine::general_purpose::STANDARD.encode(&token)}})),
        )
        .await
        .unwrap();
    // Well within the periodic read (60 probes, a minute apart): only the watch explains it.
    eventually(
        10,
        "the scheduler reconnects to west with the new token",
        || async {
            let text = String::from_utf8_lossy(&lines.0.lock().unwrap()).to_string();
            text.lines()
                .any(|l| {
                    l.contains("member credentials changed; reconnecting") && l.contains("west")
                })
                .then_some(())
        },
    )
    .await;
    sched.stop().await;
}
