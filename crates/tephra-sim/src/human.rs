//! How durations read in what `tephra sim` prints: the summary's coarse figures (`3h49m`) and
//! the explanations' exact ones (`3h49m32s`).

/// A duration to the minute past an hour, to the second below: `0m45s`, `3h49m`, `2d03h`.
pub fn coarse(secs: f64) -> String {
    let s = secs as i64;
    if s >= 86_400 {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    } else if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// A duration in the summary's style, to the second: `45s`, `3m05s`, `3h49m32s`, `2d03h04m`.
pub fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as i64;
    if s >= 86_400 {
        format!(
            "{}d{:02}h{:02}m",
            s / 86_400,
            (s % 86_400) / 3600,
            (s % 3600) / 60
        )
    } else if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, (s % 3600) / 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::clock;

    #[test]
    fn durations_read_as_the_summary_writes_them() {
        assert_eq!(clock(0.0), "0s");
        assert_eq!(clock(45.4), "45s");
        assert_eq!(clock(185.0), "3m05s");
        assert_eq!(clock(13772.0), "3h49m32s");
        assert_eq!(clock(183_840.0), "2d03h04m");
    }
}
