//! Charts as standalone SVG files: per-cluster GPU and CPU utilization over time, each
//! queue's GPU share against its deserved share over time, and the distribution of queue wait
//! times. Plain SVG text, no plotting dependency.

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

fn axes(
    s: &mut String,
    x_max: f64,
    y_max: f64,
    x_fmt: &dyn Fn(f64) -> String,
    y_fmt: &dyn Fn(f64) -> String,
) {
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
        let x = x0 + f * (x1 - x0);
        let y = y0 - f * (y0 - y1);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            esc(&y_fmt(f * y_max))
        );
        let _ = writeln!(
            s,
            r##"<text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            y0 + 18.0,
            esc(&x_fmt(f * x_max))
        );
    }
}

fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    y_max: f64,
    y_fmt: &dyn Fn(f64) -> String,
) -> String {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let mut s = frame(title, x_label, y_label);
    axes(&mut s, x_max, y_max, &|x| hours(x), y_fmt);
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    for (i, ser) in series.iter().enumerate() {
        if ser.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    x0 + x / x_max * (x1 - x0),
                    y0 - (y / y_max).clamp(0.0, 1.05) * (y0 - y1)
                )
            })
            .collect();
        let dash = if ser.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r##"<polyline fill="none" stroke="{}" stroke-width="1.6"{dash} points="{}"/>"##,
            ser.color,
            pts.join(" ")
        );
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

fn hours(secs: f64) -> String {
    if secs >= 2.0 * 86_400.0 {
        format!("{:.1}d", secs / 86_400.0)
    } else if secs >= 3600.0 {
        format!("{:.1}h", secs / 3600.0)
    } else if secs >= 60.0 {
        format!("{:.0}m", secs / 60.0)
    } else {
        format!("{secs:.0}s")
    }
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// Renders the charts of a report: (file name, SVG text).
pub fn render(r: &Report) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let clusters: Vec<String> = r.utilization.by_cluster.keys().cloned().collect();
    let mut series = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
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
        series.push(Series {
            name: format!("{c} GPU"),
            color,
            dashed: false,
            points: gpu,
        });
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
            "simulated time",
            "utilization",
            &series,
            1.0,
            &pct,
        ),
    ));

    let mut series = Vec::new();
    for (i, (q, rep)) in r.queues.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = r
            .series
            .iter()
            .map(|s| (s.t, s.queue_gpu_share.get(q).copied().unwrap_or(0.0)))
            .collect();
        let end = r.series.last().map_or(0.0, |s| s.t);
        series.push(Series {
            name: format!("{q} actual"),
            color,
            dashed: false,
            points,
        });
        series.push(Series {
            name: format!("{q} deserved"),
            color,
            dashed: true,
            points: vec![(0.0, rep.deserved_share), (end, rep.deserved_share)],
        });
    }
    out.push((
        "queue-share.svg".to_string(),
        line_chart(
            "Share of GPUs in use by queue, against deserved share",
            "simulated time",
            "share of GPUs in use",
            &series,
            1.0,
            &pct,
        ),
    ));

    // Wait-time distribution: bars over log-spaced bins, regrouped to at most 30 bars.
    let bins = r.wait_histogram.bins();
    let mut s = frame(
        "Distribution of queue wait times (all jobs)",
        "wait (log scale)",
        "jobs",
    );
    if !bins.is_empty() {
        let lo = bins.first().map_or(0.0, |b| b.0).max(0.5);
        let hi = bins.last().map_or(1.0, |b| b.1).max(lo * 2.0);
        let n_bars = 30usize;
        let (llo, lhi) = (lo.ln(), hi.ln());
        let mut counts = vec![0u64; n_bars];
        for (a, _, c) in &bins {
            let f = ((a.max(lo)).ln() - llo) / (lhi - llo);
            let i = ((f * n_bars as f64) as usize).min(n_bars - 1);
            counts[i] += c;
        }
        let y_max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
        axes(
            &mut s,
            1.0,
            y_max,
            &|f| hours((llo + f * (lhi - llo)).exp()),
            &|v| format!("{v:.0}"),
        );
        let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
        let bw = (x1 - x0) / n_bars as f64;
        for (i, c) in counts.iter().enumerate() {
            let h = *c as f64 / y_max * (y0 - y1);
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#1f77b4"/>"##,
                x0 + i as f64 * bw + 1.0,
                y0 - h,
                (bw - 2.0).max(1.0),
                h
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
