//! Peak memory (RSS) of benchmark B: build the 10,000-node, 100,000-pod world and run one
//! session. Run: `cargo bench --bench memory`. Linux only (reads /proc/self/status).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use tephra_scheduler::{SchedulerConfig, schedule};

fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    // `cargo bench` passes `--bench`; any filter argument other than ours means "not me".
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with("--") && a != "memory")
    {
        return;
    }
    let b = common::world_b();
    let after_build = status_kib("VmRSS:").unwrap_or(0);
    let d = schedule(
        b.snapshot(),
        Arc::new(SchedulerConfig::default_config()),
        0,
        1,
    );
    let peak = status_kib("VmHWM:").unwrap_or(0);
    println!(
        "memory B: {} nodes, {} pods; RSS after building the world {:.0} MB; peak RSS with one session {:.0} MB; {} pods bound",
        b.world().nodes.len(),
        b.world().tasks.len(),
        after_build as f64 / 1024.0,
        peak as f64 / 1024.0,
        d.binds.len()
    );
}
