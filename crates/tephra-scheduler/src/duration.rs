//! Durations in Go's syntax, as Volcano reads `sla-waiting-time` (Go's `time.ParseDuration`):
//! an optional sign, then numbers with an optional fraction, each with a unit, such as `300ms`,
//! `1.5h` or `2h45m`. Units are `ns`, `us` (or `µs`), `ms`, `s`, `m` and `h`, plus one tephra
//! extension, `d` for 24 hours, which scenarios use for long runs. A bare `0` needs no unit.
//!
//! This is the one duration grammar of the project: the scheduler config and the simulator's
//! scenarios both read durations here. The value is kept in nanoseconds, as Go keeps it, and
//! parsed exactly, with no floating point.

use std::fmt;

/// Why a duration did not parse. The messages follow Go's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration at all.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit.
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit that is not known.
    #[error("time: unknown unit {unit:?} in duration {text:?} (use ns, us, ms, s, m, h or d)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// More than Go's duration holds (about 292 years).
    #[error("time: invalid duration {0:?}: out of range")]
    OutOfRange(String),
}

/// A span of time in nanoseconds, as Go's `time.Duration`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(i64);

const NANOS_PER_MILLI: i64 = 1_000_000;
const NANOS_PER_SEC: i64 = 1_000_000_000;

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        "d" => 86_400 * 1_000_000_000,
        _ => return None,
    })
}

/// The leading digits of `s` as an integer, and the rest; `None` on overflow.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    for b in s[..end].bytes() {
        x = x.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some((x, &s[end..]))
}

/// The leading fraction digits of `s` as (value, scale), ignoring digits beyond what `u64` holds,
/// and the rest.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for b in s[..end].bytes() {
        if overflow {
            continue;
        }
        match x
            .checked_mul(10)
            .and_then(|y| y.checked_add(u64::from(b - b'0')))
        {
            Some(y) => {
                x = y;
                scale *= 10.0;
            }
            None => overflow = true,
        }
    }
    (x, scale, &s[end..])
}

impl Duration {
    /// Zero.
    pub const ZERO: Duration = Duration(0);

    /// Parses Go's duration syntax (see the module documentation).
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let orig = text;
        let invalid = || DurationError::Invalid(orig.to_string());
        let mut s = text.trim();
        let mut negative = false;
        if let Some(rest) = s.strip_prefix('-') {
            negative = true;
            s = rest;
        } else if let Some(rest) = s.strip_prefix('+') {
            s = rest;
        }
        if s == "0" {
            return Ok(Self::ZERO);
        }
        if s.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
                return Err(invalid());
            }
            let before = s.len();
            let (whole, rest) =
                leading_int(s).ok_or_else(|| DurationError::OutOfRange(orig.to_string()))?;
            s = rest;
            let had_whole = s.len() != before;
            let (mut frac, mut scale, mut had_frac) = (0u64, 1f64, false);
            if let Some(rest) = s.strip_prefix('.') {
                let after_dot = rest.len();
                let (f, sc, rest) = leading_fraction(rest);
                (frac, scale, s) = (f, sc, rest);
                had_frac = s.len() != after_dot;
            }
            if !had_whole && !had_frac {
                return Err(invalid());
            }
            let unit_end = s
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(s.len());
            let unit = &s[..unit_end];
            if unit.is_empty() {
                return Err(DurationError::MissingUnit(orig.to_string()));
            }
            let per = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
                unit: unit.to_string(),
                text: orig.to_string(),
            })?;
            s = &s[unit_end..];
            let range = || DurationError::OutOfRange(orig.to_string());
            let mut v = whole.checked_mul(per).ok_or_else(range)?;
            if frac > 0 {
                // As Go: the fraction in float64, which is exact for every unit and the few
                // digits durations are written with.
                v = v
                    .checked_add((frac as f64 * (per as f64 / scale)) as u64)
                    .ok_or_else(range)?;
            }
            total = total.checked_add(v).ok_or_else(range)?;
            if total > i64::MAX as u64 {
                return Err(range());
            }
        }
        let n = total as i64;
        Ok(Self(if negative { -n } else { n }))
    }

    /// Nanoseconds.
    pub fn as_nanos(self) -> i64 {
        self.0
    }

    /// Milliseconds, rounded to the nearest (half away from zero).
    pub fn as_millis(self) -> i64 {
        // Quotient and remainder, so that the largest durations do not overflow on the way.
        let (q, r) = (self.0 / NANOS_PER_MILLI, self.0 % NANOS_PER_MILLI);
        let half = NANOS_PER_MILLI / 2;
        if r >= half {
            q + 1
        } else if r <= -half {
            q - 1
        } else {
            q
        }
    }

    /// Whole seconds, rounded toward zero.
    pub fn as_secs(self) -> i64 {
        self.0 / NANOS_PER_SEC
    }

    /// Whether the duration is below zero.
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// A duration of `ms` milliseconds (saturating at the bounds).
    pub fn from_millis(ms: i64) -> Self {
        Self(ms.saturating_mul(NANOS_PER_MILLI))
    }

    /// Go's spelling (`time.Duration.String`), as Kubernetes writes a `metav1.Duration`:
    /// `1h2m3.5s`, `750ms`, `0s`. Kept to millisecond precision.
    pub fn go_string(self) -> String {
        let ms = self.as_millis();
        let (sign, ms) = if ms < 0 { ("-", -ms) } else { ("", ms) };
        if ms == 0 {
            return "0s".into();
        }
        if ms < 1000 {
            return format!("{sign}{ms}ms");
        }
        let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (m, rest) = (rest / 60_000, rest % 60_000);
        let (s, frac) = (rest / 1000, rest % 1000);
        let mut out = sign.to_string();
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        if frac == 0 {
            out.push_str(&format!("{s}s"));
        } else {
            let f = format!("{frac:03}");
            out.push_str(&format!("{s}.{}s", f.trim_end_matches('0')));
        }
        out
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0 as f64 / NANOS_PER_SEC as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_string_spells_durations_as_go_does() {
        for (ms, want) in [
            (0, "0s"),
            (750, "750ms"),
            (1500, "1.5s"),
            (62_000, "1m2s"),
            (3_600_000, "1h0m0s"),
            (3_723_250, "1h2m3.25s"),
        ] {
            assert_eq!(Duration::from_millis(ms).go_string(), want);
        }
    }

    fn ms(text: &str) -> i64 {
        Duration::parse(text).unwrap().as_millis()
    }

    #[test]
    fn go_examples_parse() {
        assert_eq!(ms("300ms"), 300);
        assert_eq!(ms("1.5h"), 5_400_000);
        assert_eq!(ms("2h45m"), 9_900_000);
        assert_eq!(ms("1h30m"), 5_400_000);
        assert_eq!(ms("-1.5h"), -5_400_000);
        assert_eq!(ms("0"), 0);
        assert_eq!(ms(".5s"), 500);
        assert_eq!(ms("1.s"), 1000);
        assert_eq!(ms("2d"), 172_800_000);
        assert_eq!(Duration::parse("1us").unwrap().as_nanos(), 1000);
        assert_eq!(Duration::parse("1µs").unwrap().as_nanos(), 1000);
        assert_eq!(Duration::parse("45s").unwrap().as_secs(), 45);
    }

    #[test]
    fn bad_durations_say_why_as_go_does() {
        let e = |t: &str| Duration::parse(t).unwrap_err().to_string();
        assert!(e("10").contains("missing unit"), "{}", e("10"));
        assert!(e("5x").contains("unknown unit \"x\""), "{}", e("5x"));
        assert!(e("").contains("invalid duration"), "{}", e(""));
        assert!(e("h").contains("invalid duration"), "{}", e("h"));
        assert!(e(".h").contains("invalid duration"), "{}", e(".h"));
        assert!(e("3000000h").contains("out of range"), "{}", e("3000000h"));
    }

    #[test]
    fn huge_durations_are_refused_and_the_largest_converts_without_overflow() {
        for text in ["999999999999999999h", "99999999999999999999s", "106752d"] {
            let e = Duration::parse(text).expect_err(text);
            assert!(matches!(e, DurationError::OutOfRange(_)), "{text}: {e}");
        }
        let max = Duration::parse("9223372036854775807ns").unwrap();
        assert_eq!(max.as_millis(), 9_223_372_036_855);
        assert_eq!(max.as_secs(), 9_223_372_036);
        let min = Duration::parse("-9223372036854775807ns").unwrap();
        assert_eq!(min.as_millis(), -9_223_372_036_855);
    }
}
