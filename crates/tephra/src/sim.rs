//! `tephra sim`: run a scenario, print a summary, write report.json, events.jsonl and three
//! charts, and name each file with what to read in it.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, bail};
use tephra_sim::scenario::Dur;
use tephra_sim::{Progress, Record, Report, RunOptions, Scenario};

/// `tephra sim`'s flags.
pub struct Flags<'a> {
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--until`.
    pub until: Option<&'a str>,
    /// `--quiet`.
    pub quiet: bool,
    /// `--strict-config`.
    pub strict_config: bool,
    /// `--explain`.
    pub explain: Option<&'a str>,
    /// `--eta-every`.
    pub eta_every: Option<&'a str>,
    /// `--eta-noise`.
    pub eta_noise: f64,
}

pub fn run(path: &Path, out: &Path, flags: Flags<'_>) -> anyhow::Result<()> {
    let (until, quiet, eta_noise) = (flags.until, flags.quiet, flags.eta_noise);
    let scenario = Scenario::load(path)?;
    let eta = match flags.eta_every {
        Some(e) => {
            let every_ms = Dur::parse(e)
                .map_err(|err| anyhow::anyhow!("--eta-every: {err}"))?
                .0;
            if !(0.0..1.0).contains(&eta_noise) {
                bail!("--eta-noise: must be at least 0 and below 1, got {eta_noise}");
            }
            Some(tephra_sim::eta::EtaOptions {
                every_ms: every_ms.max(1),
                noise: eta_noise,
            })
        }
        None => None,
    };
    let until_ms = match until {
        Some(u) => Some(
            Dur::parse(u)
                .map_err(|e| anyhow::anyhow!("--until: {e}"))?
                .0,
        ),
        None => None,
    };
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let events_path = out.join("events.jsonl");
    let mut events = BufWriter::new(
        File::create(&events_path)
            .with_context(|| format!("creating {}", events_path.display()))?,
    );
    let mut write_error: Option<std::io::Error> = None;
    let mut line = Vec::with_capacity(512);
    let mut sink = |r: &Record| {
        if write_error.is_some() {
            return;
        }
        line.clear();
        r.write_json(&mut line);
        line.push(b'\n');
        if let Err(e) = events.write_all(&line) {
            write_error = Some(e);
        }
    };
    let show = !quiet && std::io::stderr().is_terminal();
    let mut progress = |p: &Progress| {
        if show {
            eprint!("\r{}", progress_line(p));
            let _ = std::io::stderr().flush();
        }
    };
    let report = tephra_sim::run(
        &scenario,
        RunOptions {
            seed: flags.seed,
            until_ms,
            strict_config: flags.strict_config,
            explain: flags.explain.map(str::to_string),
            eta,
        },
        &mut sink,
        &mut progress,
    )?;
    if show {
        eprintln!();
    }
    if let Some(e) = write_error {
        bail!("writing {}: {e}", events_path.display());
    }
    events
        .flush()
        .with_context(|| format!("writing {}", events_path.display()))?;
    let report_path = out.join("report.json");
    std::fs::write(&report_path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", report_path.display()))?;
    for (name, svg) in tephra_sim::charts::render(&report) {
        let p = out.join(name);
        std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
    }
    print!("{}", summary(&report, out));
    Ok(())
}

fn progress_line(p: &Progress) -> String {
    let bar = match p.until_s {
        Some(u) if u > 0.0 => {
            let frac = (p.simulated_s / u).clamp(0.0, 1.0);
            let filled = (frac * 30.0) as usize;
            format!(
                "[{}{}] {:>3.0}% ",
                "#".repeat(filled),
                ".".repeat(30 - filled),
                frac * 100.0
            )
        }
        _ => String::new(),
    };
    let rate = if p.wall_s > 0.0 {
        p.bound as f64 / p.wall_s
    } else {
        0.0
    };
    format!(
        "{bar}simulated {} | jobs {}/{} done | {:.0} pods/s",
        tephra_sim::human::coarse(p.simulated_s),
        p.completed,
        p.submitted,
        rate
    )
}

/// The failover section: each member fault, how soon the chain saw it, what moved and how soon
/// it ran again (nothing when the scenario has no fault).
fn failover(r: &Report) -> String {
    let f = &r.failover;
    if f.faults.is_empty() {
        return String::new();
    }
    let secs = |v: Option<f64>| v.map_or_else(|| "-".to_string(), tephra_sim::human::clock);
    let mut s = format!(
        "\nfailover   {} fault(s): {} job(s) moved, {} lost; detected within {}, all running again within {}\n",
        f.faults.len(),
        f.jobs_moved,
        f.lost_jobs,
        secs(f.max_detection_delay_s),
        secs(f.max_all_running_again_s)
    );
    for x in &f.faults {
        let lasted = x.ended_s.map_or_else(
            || "to the end".to_string(),
            |e| format!("for {}", tephra_sim::human::clock(e - x.at_s)),
        );
        s += &format!(
            "  {:<16} {:<11} at {:>9} {:<14} detected after {:>6}, {:>3} job(s) moved, running again after {}{}\n",
            x.cluster,
            x.kind,
            tephra_sim::human::clock(x.at_s),
            lasted,
            secs(x.detection_delay_s),
            x.jobs_moved,
            secs(x.all_running_again_s),
            running_again_why(x)
        );
    }
    s
}

/// Why a fault's moved gangs took as long as they did to run again: the last of them, and
/// whether it waited for the member to come back or for room elsewhere.
fn running_again_why(x: &tephra_sim::failover::FaultReport) -> String {
    let (Some(job), Some(after)) = (&x.last_running_again, x.all_running_again_s) else {
        return String::new();
    };
    let back_at = x.at_s + after;
    match x.ended_s {
        Some(end) if back_at >= end => format!(
            " (the last, {job}, did not run again during the outage and waited {} more after {} \
             was back, for room in the fleet: --explain {job} says why)",
            tephra_sim::human::clock(back_at - end),
            x.cluster
        ),
        _ => format!(
            " (the last, {job}, waited that long for room in another member: --explain {job} \
             says why)"
        ),
    }
}

/// The files a run writes, each with what to read in it.
const WRITTEN: [(&str, &str); 5] = [
    ("report.json", "every figure above, per queue and per fault"),
    (
        "events.jsonl",
        "one line per decision: binds, evictions, reasons, faults",
    ),
    (
        "utilization.svg",
        "GPU and CPU in use per cluster over time, member outages shaded",
    ),
    (
        "queue-share.svg",
        "each queue's share of the GPUs in use (of the CPUs, for a CPU-only queue) against its deserved share",
    ),
    (
        "wait-times.svg",
        "how long jobs waited from submission until running, by queue",
    ),
];

fn summary(r: &Report, out: &Path) -> String {
    let mut s = String::new();
    let inv = &r.invariants;
    s += &format!("scenario   {}\n", r.scenario);
    s += &format!(
        "simulated  {} in {:.2}s wall (seed {})\n",
        tephra_sim::human::coarse(r.simulated_s),
        r.wall_s,
        r.seed
    );
    s += &format!(
        "jobs       {} submitted, {} completed, {} running, {} pending, {} lost\n",
        r.jobs.submitted,
        r.jobs.completed,
        r.jobs.running_at_end,
        r.jobs.pending_at_end,
        r.jobs.lost
    );
    s += &format!(
        "pods       {} bound, {} evicted\n",
        r.pods.bound, r.pods.evicted
    );
    s += &format!(
        "sessions   {} (p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms), {:.0} pods bound per wall second\n",
        r.scheduler.sessions,
        r.scheduler.session_ms.p50,
        r.scheduler.session_ms.p99,
        r.scheduler.session_ms.max,
        r.scheduler.pods_bound_per_wall_s
    );
    s += &format!(
        "checker    {} over-commits, {} partial gangs, {} split gangs, {} policy violations\n",
        inv.node_overcommits,
        inv.partial_gangs,
        inv.gangs_split_across_clusters,
        inv.policy_violations
    );
    s += &format!(
        "usage      GPU {:.1}%, CPU {:.1}%; Jain's fairness over GPU share {:.3}\n",
        r.utilization.gpu * 100.0,
        r.utilization.cpu * 100.0,
        r.fairness.jain_gpu_share
    );
    if let Some(t) = &r.topology {
        s += &format!(
            "topology   {} of {} gangs of 2+ pods started within one rack (lowest-tier HyperNode): {:.1}%\n",
            t.within_one_lowest_tier,
            t.gangs_started,
            t.share * 100.0
        );
    }
    if let Some(e) = &r.eta {
        s += &format!(
            "eta        {} waiting jobs predicted then started: error median {:.0}s, p90 {:.0}s \
             (durations ±{:.0}%); {} predicted not within 24h; {} forecasts, {:.1}s\n",
            e.compared,
            e.median_error_s,
            e.p90_error_s,
            e.noise * 100.0,
            e.not_within,
            e.forecasts,
            e.forecast_wall_s
        );
    }
    // The shares are of the fleet's GPUs (DRF and proportion judge every resource; GPUs are
    // what a training fleet waits for).
    s += "\nqueue                jobs  done   wait mean   wait p95   GPU-h  GPU deserved  GPU actual\n";
    for (name, q) in &r.queues {
        // A queue that has no GPU share and used none (a CPU-only queue) shows none.
        let gpu_free = q.gpu_hours == 0.0 && q.deserved_share == 0.0 && q.actual_share == 0.0;
        let pct = |v: f64, w: usize| {
            if gpu_free {
                format!("{:>w$}", "-")
            } else {
                format!("{:>w$.1}%", v * 100.0, w = w - 1)
            }
        };
        s += &format!(
            "{:<18} {:>6} {:>5} {:>10} {:>10} {:>7.1} {} {}\n",
            name,
            q.jobs_submitted,
            q.jobs_completed,
            tephra_sim::human::coarse(q.wait_s.mean),
            tephra_sim::human::coarse(q.wait_s.p95),
            q.gpu_hours,
            pct(q.deserved_share, 13),
            pct(q.actual_share, 11)
        );
    }
    s += &failover(r);
    s += "\ncluster              GPU util  CPU util\n";
    for (name, c) in &r.utilization.by_cluster {
        s += &format!(
            "{:<18} {:>9.1}% {:>8.1}%\n",
            name,
            c.gpu * 100.0,
            c.cpu * 100.0
        );
    }
    for p in r.jobs.pending_reasons.iter().take(3) {
        s += &format!(
            "pending    {} job(s): {} (e.g. {})\n",
            p.count,
            p.reason,
            p.jobs.join(", ")
        );
    }
    for n in &r.notes {
        s += &format!("note: {n}\n");
    }
    if !r.explain.is_empty() {
        s += "\nexplain\n";
        for line in &r.explain {
            s += &format!("  {line}\n");
        }
    }
    for (src, skipped) in &r.trace_skipped {
        for (why, n) in skipped {
            s += &format!("skipped: {src}: {n} row(s): {why}\n");
        }
    }
    for v in &r.violations {
        s += &format!("VIOLATION: {v}\n");
    }
    s += &format!("\nwrote to {}/:\n", out.display());
    for (file, what) in WRITTEN {
        s += &format!("  {file:<16} {what}\n");
    }
    s
}
