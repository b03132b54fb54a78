//! A CronJob's schedule, as Kubernetes' and Volcano's CronJob controllers read it (the standard
//! cron parser they share): five fields (minute, hour, day of month, month, day of week), each a
//! list of `*`, `?`, `a`, `a-b`, with an optional `/step` (`a/step` runs to the field's end);
//! month and weekday names (`JAN`, `mon`); the macros `@yearly` (`@annually`), `@monthly`,
//! `@weekly`, `@daily` (`@midnight`), `@hourly` and `@every <duration>`. When both the day of
//! month and the day of week are restricted, a day matching either runs; when one is `*` or
//! `?`, only the other decides.
//!
//! Times are found in the schedule's time zone (an IANA name, from the bundled database: no
//! file is read) by walking civil time field by field; a civil time a daylight-saving jump
//! skips runs at the instant after the jump, and one that happens twice runs once, the first
//! time.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};

/// Why a schedule or time zone cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule does not parse; the message says where.
    #[error("spec.schedule {schedule:?}: {reason}")]
    Schedule {
        /// The schedule as written.
        schedule: String,
        /// What is wrong.
        reason: String,
    },
    /// The time zone is not in the database.
    #[error("spec.timeZone {zone:?}: unknown time zone")]
    TimeZone {
        /// The time zone as written.
        zone: String,
    },
}

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Five fields, as bit sets of the values that match.
    Fields(Fields),
    /// `@every <duration>`: that long after the last run (at least a second).
    Every(SignedDuration),
}

/// The five fields, each the set of values that match, with whether the day fields are
/// unrestricted (`*` or `?`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    dom_star: bool,
    dow_star: bool,
}

/// The range and names of one field.
struct FieldKind {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldKind = FieldKind {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldKind = FieldKind {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DOM: FieldKind = FieldKind {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldKind = FieldKind {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: FieldKind = FieldKind {
    name: "day of week",
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl FieldKind {
    /// A value: a number in range, or a name (counted from `min`).
    fn value(&self, text: &str) -> Result<u32, String> {
        let lower = text.to_ascii_lowercase();
        if let Some(i) = self.names.iter().position(|n| *n == lower) {
            return Ok(self.min + u32::try_from(i).unwrap_or(0));
        }
        let v: u32 = text
            .parse()
            .map_err(|_| format!("{}: {text:?} is not a number", self.name))?;
        if v < self.min || v > self.max {
            return Err(format!(
                "{}: {v} is outside {}-{}",
                self.name, self.min, self.max
            ));
        }
        Ok(v)
    }

    /// A field: its bit set, and whether it is unrestricted (`*` or `?` without a step).
    fn parse(&self, field: &str) -> Result<(u64, bool), String> {
        let mut bits = 0u64;
        let mut star = false;
        for item in field.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => {
                    let s: u32 = s
                        .parse()
                        .map_err(|_| format!("{}: step {s:?} is not a number", self.name))?;
                    if s == 0 {
                        return Err(format!("{}: step must be at least 1", self.name));
                    }
                    (r, Some(s))
                }
                None => (item, None),
            };
            let (lo, hi) = if range == "*" || range == "?" {
                if step.is_none_or(|s| s == 1) {
                    star = true;
                }
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                (self.value(a)?, self.value(b)?)
            } else {
                let v = self.value(range)?;
                (v, if step.is_some() { self.max } else { v })
            };
            if lo > hi {
                return Err(format!("{}: {lo} is beyond {hi}", self.name));
            }
            let step = step.unwrap_or(1);
            let mut v = lo;
            while v <= hi {
                bits |= 1 << v;
                v += step;
            }
        }
        Ok((bits, star))
    }
}

impl Schedule {
    /// Parses a schedule.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let bad = |reason: String| ScheduleError::Schedule {
            schedule: text.to_string(),
            reason,
        };
        let t = text.trim();
        let fields = match t {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            _ => t,
        };
        if let Some(d) = fields.strip_prefix("@every ") {
            let every = parse_duration(d.trim()).map_err(bad)?;
            return Ok(Self::Every(every.max(SignedDuration::from_secs(1))));
        }
        if fields.starts_with('@') {
            return Err(bad(format!("unknown macro {fields:?}")));
        }
        let parts: Vec<&str> = fields.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = parts.as_slice() else {
            return Err(bad(format!(
                "expected exactly 5 fields, found {}",
                parts.len()
            )));
        };
        let (minute, _) = MINUTE.parse(minute).map_err(bad)?;
        let (hour, _) = HOUR.parse(hour).map_err(bad)?;
        let (dom, dom_star) = DOM.parse(dom).map_err(bad)?;
        let (month, _) = MONTH.parse(month).map_err(bad)?;
        let (dow, dow_star) = DOW.parse(dow).map_err(bad)?;
        Ok(Self::Fields(Fields {
            minute,
            hour,
            dom,
            month,
            dow,
            dom_star,
            dow_star,
        }))
    }

    /// The first run strictly after `after`, in `zone`; `None` if there is none within five
    /// years (a date that never comes, such as 30 February).
    pub fn next(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        match self {
            Self::Every(d) => {
                let whole = Timestamp::from_second(after.as_second()).ok()?;
                whole.checked_add(*d).ok()
            }
            Self::Fields(f) => f.next(after, zone),
        }
    }
}

impl Fields {
    fn day_matches(&self, d: Date) -> bool {
        let dom = self.dom & (1 << d.day()) != 0;
        let dow = self.dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    fn next(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(zone.clone()).datetime();
        // The next whole minute of civil time after `after`.
        let mut date = start.date();
        let mut minute_of_day = i32::from(start.hour()) * 60 + i32::from(start.minute()) + 1;
        let limit = date.checked_add(5.years()).ok()?;
        while date <= limit {
            if self.month & (1 << date.month()) == 0 {
                // The first day of the next month.
                date = date.first_of_month().checked_add(1.month()).ok()?;
                minute_of_day = 0;
                continue;
            }
            if !self.day_matches(date) {
                date = date.tomorrow().ok()?;
                minute_of_day = 0;
                continue;
            }
            while minute_of_day < 24 * 60 {
                let (h, m) = (minute_of_day / 60, minute_of_day % 60);
                if self.hour & (1 << h) == 0 {
                    minute_of_day = (h + 1) * 60;
                    continue;
                }
                if self.minute & (1 << m) != 0 {
                    let civil = DateTime::from_parts(
                        date,
                        Time::new(i8::try_from(h).ok()?, i8::try_from(m).ok()?, 0, 0).ok()?,
                    );
                    // Skipped by a jump forward: the instant after it; twice: the first.
                    let at = zone.to_ambiguous_timestamp(civil).compatible().ok()?;
                    if at > after {
                        return Some(at);
                    }
                }
                minute_of_day += 1;
            }
            date = date.tomorrow().ok()?;
            minute_of_day = 0;
        }
        None
    }
}

/// A Go duration (`1h30m`, `90s`, `1.5h`): numbers each with a unit of `ns`, `us`, `µs`, `ms`,
/// `s`, `m` or `h`.
fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err("@every needs a duration".into());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration {text:?} lacks a unit"))?;
        let value: f64 = rest[..n]
            .parse()
            .map_err(|_| format!("duration {text:?}: bad number"))?;
        rest = &rest[n..];
        let (unit, len) = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ]
        .iter()
        .find(|(u, _)| rest.starts_with(u))
        .map(|(u, f)| (*f, u.len()))
        .ok_or_else(|| format!("duration {text:?}: unknown unit"))?;
        total += value * unit;
        rest = &rest[len..];
    }
    SignedDuration::try_from_secs_f64(total).map_err(|e| format!("duration {text:?}: {e}"))
}

/// The time zone of a CronJob: `zone` from the bundled database, or UTC when unset.
pub fn time_zone(zone: Option<&str>) -> Result<TimeZone, ScheduleError> {
    match zone {
        None => Ok(TimeZone::UTC),
        Some(z) => TimeZone::get(z).map_err(|_| ScheduleError::TimeZone {
            zone: z.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(schedule: &str, after: &str, zone: &str) -> String {
        let z = time_zone(Some(zone)).unwrap();
        Schedule::parse(schedule)
            .unwrap()
            .next(at(after), &z)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn fields_names_steps_and_macros_find_the_next_run() {
        assert_eq!(
            next("*/5 * * * *", "2026-12-01T02:03:00Z", "UTC"),
            "2026-12-01T02:05:00Z"
        );
        assert_eq!(
            next("30 2 * * mon-fri", "2026-12-04T03:00:00Z", "UTC"),
            "2026-12-07T02:30:00Z",
            "Friday 03:00 → Monday"
        );
        assert_eq!(
            next("0 0 1 JAN *", "2026-06-01T00:00:00Z", "UTC"),
            "2027-01-01T00:00:00Z"
        );
        assert_eq!(
            next("@daily", "2026-12-01T00:00:00Z", "UTC"),
            "2026-12-02T00:00:00Z",
            "strictly after"
        );
        assert_eq!(
            next("@every 1h30m", "2026-12-01T00:00:00.5Z", "UTC"),
            "2026-12-01T01:30:00Z"
        );
        // Both day fields restricted: either day runs.
        assert_eq!(
            next("0 0 13 * 5", "2026-12-01T00:00:00Z", "UTC"),
            "2026-12-04T00:00:00Z",
            "Friday the 4th comes before the 13th"
        );
        assert_eq!(next("0 0 30 2 *", "2026-12-01T00:00:00Z", "UTC"), "");
        // In a zone, across the spring-forward jump (Berlin, 29 March 2026, 02:00 → 03:00).
        assert_eq!(
            next("30 2 * * *", "2026-03-28T12:00:00Z", "Europe/Berlin"),
            "2026-03-29T01:30:00Z",
            "02:30 does not exist that day: the instant after the jump"
        );
        assert_eq!(
            next("0 9 * * *", "2026-03-29T12:00:00Z", "Europe/Berlin"),
            "2026-03-30T07:00:00Z"
        );
        // Across the fall-back jump (25 October 2026, 03:00 → 02:00): 02:30 happens twice and
        // runs once, the first time.
        assert_eq!(
            next("30 2 * * *", "2026-10-24T12:00:00Z", "Europe/Berlin"),
            "2026-10-25T00:30:00Z"
        );
        assert_eq!(
            next("30 2 * * *", "2026-10-25T00:30:00Z", "Europe/Berlin"),
            "2026-10-26T01:30:00Z"
        );
    }

    #[test]
    fn bad_schedules_and_zones_are_refused_saying_why() {
        for (s, why) in [
            ("* * * *", "exactly 5 fields"),
            ("60 * * * *", "minute: 60 is outside 0-59"),
            ("* * * * 7", "day of week: 7 is outside 0-6"),
            ("*/0 * * * *", "step must be at least 1"),
            ("5-1 * * * *", "5 is beyond 1"),
            ("@fortnightly", "unknown macro"),
            ("@every 5", "lacks a unit"),
            ("* * * foo *", "month: \"foo\" is not a number"),
        ] {
            let e = Schedule::parse(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.starts_with("spec.schedule"), "{e}");
        }
        assert_eq!(
            time_zone(Some("Mars/Olympus")).unwrap_err().to_string(),
            "spec.timeZone \"Mars/Olympus\": unknown time zone"
        );
    }

    /// Whether `t` (a whole minute, UTC) matches `s` by its fields, the definition.
    fn matches(s: &Fields, t: DateTime) -> bool {
        s.month & (1 << t.month()) != 0
            && s.day_matches(t.date())
            && s.hour & (1 << t.hour()) != 0
            && s.minute & (1 << t.minute()) != 0
    }

    /// A field of values in `min..=max`: `*`, a step, a value, a range or a list.
    fn field(min: u32, max: u32) -> impl Strategy<Value = String> {
        prop_oneof![
            Just("*".to_string()),
            (1u32..7).prop_map(|s| format!("*/{s}")),
            (min..=max).prop_map(|v| v.to_string()),
            (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
            (min..=max, min..=max, 1u32..4).prop_map(|(a, b, s)| format!("{}/{s},{b}", a.min(b))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The next run is the first whole minute after the start that the fields match: none
        /// is skipped and none is early (checked minute by minute over the gap, in UTC).
        #[test]
        fn the_next_run_is_the_first_matching_minute(
            minute in field(0, 59), hour in field(0, 23), dom in field(1, 31),
            month in field(1, 12), dow in field(0, 6),
            start in 0i64..(4 * 365 * 24 * 3600),
        ) {
            let text = format!("{minute} {hour} {dom} {month} {dow}");
            let Ok(Schedule::Fields(f)) = Schedule::parse(&text) else {
                return Err(TestCaseError::fail(format!("{text} does not parse")));
            };
            let after = Timestamp::from_second(1_767_225_600 + start).unwrap();
            let found = Schedule::Fields(f.clone()).next(after, &TimeZone::UTC);
            let mut t = after.to_zoned(TimeZone::UTC).datetime();
            t = DateTime::from_parts(t.date(), Time::new(t.hour(), t.minute(), 0, 0).unwrap());
            let mut expected = None;
            for _ in 0..(2 * 366 * 24 * 60) {
                t = t.checked_add(1.minute()).unwrap();
                if matches(&f, t) {
                    expected = Some(t.to_zoned(TimeZone::UTC).unwrap().timestamp());
                    break;
                }
            }
            if let Some(e) = expected {
                prop_assert_eq!(found, Some(e), "{}", text);
            }
        }
    }
}
