//! Charts as standalone SVG files: per-cluster GPU and CPU utilization over time, each
//! queue's share of the GPUs in use (of the CPUs, for a queue that uses no GPU) against its
//! deserved share over time, and the distribution of queue wait times, stacked by queue. Plain
//! SVG text, no plotting dependency.
//!
//! Sampled figures hold until the next sample, so they are drawn as steps, not diagonals; a
//! series that does not apply (the GPUs of a CPU-only cluster) is left out rather than drawn as
//! a flat 0 %; a share is not drawn while almost nothing is in use (a gap, not a jump to 100 %
//! for the last job running); member outages are shaded; time axes are ticked at round
//! durations.

use std::fmt::Write;

use crate::report::Report;

const W: f64 = 900.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

struct Series {
    name: String,
    color: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// A shaded span of time: (from, to, label), in seconds.
type Span = (f64, f64, String);

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn frame(title: &str, x_label: &str, y_label: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>
"##,
        (LEFT + W - RIGHT) / 2.0,
        esc(title),
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0,
        esc(x_label),
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
    );
    s
}

/// The axes, with the y grid at sixths of `y_max` and the x labels at `x_ticks` (fractions of
/// the axis, label).
fn axes(s: &mut String, y_max: f64, y_fmt: &dyn Fn(f64) -> String, x_ticks: &[(f64, String)]) {
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    let _ = writeln!(
        s,
        r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/>"##
    );
    let _ = writeln!(
        s,
        r##"<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>"##
    );
    for i in 0..=5 {
        let f = f64::from(i) / 5.0;
        let y = y0 - f * (y0 - y1);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            esc(&y_fmt(f * y_max))
        );
    }
    for (f, label) in x_ticks {
        let x = x0 + f * (x1 - x0);
        let _ = writeln!(
            s,
            r##"<line x1="{x}" y1="{y0}" x2="{x}" y2="{}" stroke="black"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            y0 + 4.0,
            y0 + 18.0,
            esc(label)
        );
    }
}

/// Round durations for a time axis from 0 to `x_max` seconds: at most 8 ticks.
fn time_ticks(x_max: f64) -> Vec<(f64, String)> {
    const STEPS: [f64; 14] = [
        60.0,
        300.0,
        600.0,
        900.0,
        1800.0,
        3600.0,
        7200.0,
        10_800.0,
        21_600.0,
        43_200.0,
        86_400.0,
        172_800.0,
        604_800.0,
        2_592_000.0,
    ];
    let step = STEPS
        .iter()
        .copied()
        .find(|s| x_max / s <= 8.0)
        .unwrap_or(x_max / 8.0);
    let mut out = Vec::new();
    let mut t = 0.0;
    while t <= x_max + 1e-9 {
        out.push((t / x_max, duration_label(t)));
        t += step;
    }
    out
}

/// `0`, `45s`, `15m`, `2h`, `1h30m`, `3d`.
fn duration_label(secs: f64) -> String {
    let s = secs.round() as i64;
    match s {
        0 => "0".into(),
        _ if s % 86_400 == 0 => format!("{}d", s / 86_400),
        _ if s % 3600 == 0 => format!("{}h", s / 3600),
        _ if s >= 3600 && s % 60 == 0 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ if s % 60 == 0 => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// `y` rounded up so that fifths of it are round numbers (1, 2 or 5 times a power of ten).
fn nice_max(y: f64) -> f64 {
    let raw = (y / 5.0).max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    step * 5.0
}

/// Step points: each sampled value holds until the next sample.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// The runs of `points` between values that are not numbers, each with its last value held
/// until the gap that ends it.
fn runs(points: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    for &(x, y) in points {
        if y.is_finite() {
            run.push((x, y));
        } else if let Some(&(_, last)) = run.last() {
            run.push((x, last));
            out.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        out.push(run);
    }
    out
}

fn line_chart(
    title: &str,
    y_label: &str,
    series: &[Series],
    spans: &[Span],
    y_max: f64,
    y_fmt: &dyn Fn(f64) -> String,
) -> String {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let mut s = frame(title, "simulated time", y_label);
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    for (from, to, label) in spans {
        let a = x0 + (from / x_max).clamp(0.0, 1.0) * (x1 - x0);
        let b = x0 + (to / x_max).clamp(0.0, 1.0) * (x1 - x0);
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{y1}" width="{:.1}" height="{}" fill="#d62728" fill-opacity="0.12"/><text x="{:.1}" y="{}" font-size="11" fill="#a00">{}</text>"##,
            (b - a).max(1.0),
            y0 - y1,
            a + 3.0,
            y0 - 6.0,
            esc(label)
        );
    }
    axes(&mut s, y_max, y_fmt, &time_ticks(x_max));
    for (i, ser) in series.iter().enumerate() {
        if ser.points.is_empty() {
            continue;
        }
        let dash = if ser.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        // A value that is not a number is a gap: each run between gaps is its own line, its
        // last value held until the gap begins.
        for run in runs(&ser.points) {
            let pts: Vec<String> = steps(&run)
                .iter()
                .map(|(x, y)| {
                    format!(
                        "{:.1},{:.1}",
                        x0 + x / x_max * (x1 - x0),
                        y0 - (y / y_max).clamp(0.0, 1.05) * (y0 - y1)
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                r##"<polyline fill="none" stroke="{}" stroke-width="1.6"{dash} points="{}"/>"##,
                ser.color,
                pts.join(" ")
            );
        }
        let ly = TOP + 14.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"##,
            W - RIGHT + 12.0,
            W - RIGHT + 36.0,
            ser.color,
            W - RIGHT + 42.0,
            ly + 4.0,
            esc(&ser.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// Renders the charts of a report: (file name, SVG text).
pub fn render(r: &Report) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let end = r.series.last().map_or(0.0, |s| s.t);
    // Member outages, shaded on the time charts.
    let spans: Vec<Span> = r
        .failover
        .faults
        .iter()
        .map(|f| {
            (
                f.at_s,
                f.ended_s.unwrap_or(end),
                format!("{} {}", f.cluster, f.kind),
            )
        })
        .collect();
    let clusters: Vec<String> = r.utilization.by_cluster.keys().cloned().collect();
    let mut series = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let has_gpus = r.utilization.by_cluster.get(c).is_some_and(|u| u.gpus > 0);
        let gpu: Vec<(f64, f64)> = r
            .series
            .iter()
            .filter_map(|s| s.clusters.get(c).map(|v| (s.t, v.0)))
            .collect();
        let cpu: Vec<(f64, f64)> = r
            .series
            .iter()
            .filter_map(|s| s.clusters.get(c).map(|v| (s.t, v.1)))
            .collect();
        if has_gpus {
            series.push(Series {
                name: format!("{c} GPU"),
                color,
                dashed: false,
                points: gpu,
            });
        }
        series.push(Series {
            name: format!("{c} CPU"),
            color,
            dashed: true,
            points: cpu,
        });
    }
    out.push((
        "utilization.svg".to_string(),
        line_chart(
            "GPU (solid) and CPU (dashed) utilization per cluster",
            "utilization",
            &series,
            &spans,
            1.0,
            &pct,
        ),
    ));

    let mut series = Vec::new();
    for (i, (q, rep)) in r.queues.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // A queue that has no GPU share and uses no GPU is drawn by its share of the CPUs.
        let gpus = !(rep.gpu_hours == 0.0 && rep.deserved_share == 0.0);
        let share = |s: &crate::report::Sample| {
            let by = if gpus {
                &s.queue_gpu_share
            } else {
                &s.queue_cpu_share
            };
            by.get(q).copied().unwrap_or(f64::NAN)
        };
        let points: Vec<(f64, f64)> = r.series.iter().map(|s| (s.t, share(s))).collect();
        if !points.iter().any(|p| p.1 > 0.0) {
            continue;
        }
        series.push(Series {
            name: if gpus {
                format!("{q} actual")
            } else {
                format!("{q} actual (CPU)")
            },
            color,
            dashed: false,
            points,
        });
        if gpus {
            series.push(Series {
                name: format!("{q} deserved"),
                color,
                dashed: true,
                points: vec![(0.0, rep.deserved_share), (end, rep.deserved_share)],
            });
        }
    }
    out.push((
        "queue-share.svg".to_string(),
        line_chart(
            "Share of GPUs in use by queue (of CPUs for CPU-only queues), against deserved share",
            "share of GPUs (CPUs) in use",
            &series,
            &spans,
            1.0,
            &pct,
        ),
    ));

    // Wait-time distribution: bars over log-spaced bins, regrouped to at most 30 bars, each
    // bar stacked by queue.
    let bins = r.wait_histogram.bins();
    let mut s = frame(
        "Distribution of queue wait times, by queue",
        "wait (log scale)",
        "jobs",
    );
    if !bins.is_empty() {
        let lo = bins.first().map_or(0.0, |b| b.0).max(0.5);
        let hi = bins.last().map_or(1.0, |b| b.1).max(lo * 2.0);
        let n_bars = 30usize;
        let (llo, lhi) = (lo.ln(), hi.ln());
        let bar = |a: f64| {
            let f = ((a.max(lo)).ln() - llo) / (lhi - llo);
            ((f * n_bars as f64) as usize).min(n_bars - 1)
        };
        // Each queue's counts per bar, in the report's queue order (its colour index).
        let queues: Vec<(usize, &String, Vec<u64>)> = r
            .queues
            .keys()
            .enumerate()
            .filter_map(|(i, q)| {
                let h = r.wait_by_queue.get(q)?;
                let mut counts = vec![0u64; n_bars];
                for (a, _, c) in h.bins() {
                    counts[bar(a)] += c;
                }
                counts.iter().any(|c| *c > 0).then_some((i, q, counts))
            })
            .collect();
        let totals: Vec<u64> = (0..n_bars)
            .map(|b| queues.iter().map(|(_, _, c)| c[b]).sum())
            .collect();
        let y_max = nice_max(totals.iter().copied().max().unwrap_or(1).max(1) as f64);
        // Round durations on the log axis.
        let ticks: Vec<(f64, String)> = [
            1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14_400.0, 28_800.0,
            86_400.0, 172_800.0, 604_800.0,
        ]
        .iter()
        .filter(|&&v| v >= lo && v <= hi)
        .map(|&v| ((v.ln() - llo) / (lhi - llo), duration_label(v)))
        .collect();
        axes(&mut s, y_max, &|v| format!("{v:.0}"), &ticks);
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="11" fill="#555" text-anchor="end">from submission until running: a job placed at once waits its pods' start delay</text>"##,
            W - RIGHT,
            TOP - 6.0
        );
        let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
        let bw = (x1 - x0) / n_bars as f64;
        let mut base = vec![0.0f64; n_bars];
        for (n, (i, q, counts)) in queues.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            for (b, c) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                let h = *c as f64 / y_max * (y0 - y1);
                let _ = writeln!(
                    s,
                    r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"##,
                    x0 + b as f64 * bw + 1.0,
                    y0 - base[b] - h,
                    (bw - 2.0).max(1.0),
                    h
                );
                base[b] += h;
            }
            let ly = TOP + 14.0 + 18.0 * n as f64;
            let _ = writeln!(
                s,
                r##"<rect x="{}" y="{}" width="24" height="10" fill="{color}"/><text x="{}" y="{}">{}</text>"##,
                W - RIGHT + 12.0,
                ly - 5.0,
                W - RIGHT + 42.0,
                ly + 4.0,
                esc(q)
            );
        }
    } else {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle">no job started</text>"##,
            W / 2.0,
            H / 2.0
        );
    }
    s.push_str("</svg>\n");
    out.push(("wait-times.svg".to_string(), s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_value_holds_until_the_next_sample() {
        assert_eq!(
            steps(&[(0.0, 0.0), (10.0, 1.0), (20.0, 0.5)]),
            [
                (0.0, 0.0),
                (10.0, 0.0),
                (10.0, 1.0),
                (20.0, 1.0),
                (20.0, 0.5)
            ]
        );
    }

    #[test]
    fn a_value_that_is_not_a_number_breaks_the_line_and_the_last_value_holds_until_it() {
        let nan = f64::NAN;
        assert_eq!(
            runs(&[
                (0.0, 0.5),
                (10.0, 0.6),
                (20.0, nan),
                (30.0, nan),
                (40.0, 0.2)
            ]),
            [
                vec![(0.0, 0.5), (10.0, 0.6), (20.0, 0.6)],
                vec![(40.0, 0.2)]
            ]
        );
        assert!(runs(&[(0.0, nan)]).is_empty());
    }

    #[test]
    fn time_axes_are_ticked_at_round_durations() {
        let labels: Vec<String> = time_ticks(18.0 * 3600.0 + 50.0 * 60.0)
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(labels, ["0", "3h", "6h", "9h", "12h", "15h", "18h"]);
        assert_eq!(duration_label(5400.0), "1h30m");
        assert_eq!(duration_label(172_800.0), "2d");
    }

    #[test]
    fn count_axes_end_on_a_round_number() {
        assert_eq!(nice_max(220.0), 250.0);
        assert_eq!(nice_max(3.0), 5.0);
        assert_eq!(nice_max(1000.0), 1000.0);
    }
}
