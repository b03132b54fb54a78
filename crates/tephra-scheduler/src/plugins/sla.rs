//! `sla`: a job that has waited longer than `sla-waiting-time` goes first in its queue, is
//! admitted even when the fleet is full, and reserves what it can get: its partial placement is
//! kept (pipelined, not bound) so that later, smaller jobs cannot take those resources, until
//! the whole gang fits. This is what keeps a big gang from being starved by a stream of small
//! ones.
//!
//! Arguments: `sla-waiting-time` (a duration such as `1h`; no default: without it the plugin
//! does nothing).

use std::cmp::Ordering;

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::Id;

pub struct Sla {
    waiting_s: Option<i64>,
}

/// Parses `90s`, `10m`, `2h`, `1h30m` into seconds.
fn parse_duration(text: &str) -> Option<i64> {
    let mut total = 0i64;
    let mut num = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: i64 = num.parse().ok()?;
        num.clear();
        total += n * match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
    }
    num.is_empty().then_some(total)
}

impl Sla {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        let r = ArgReader::new(args, &["sla-waiting-time"], &[])?;
        let waiting_s = match r.string("sla-waiting-time") {
            None => None,
            Some(s) => Some(parse_duration(&s).ok_or_else(|| {
                (
                    "sla-waiting-time".to_string(),
                    format!("{s:?} is not a duration such as 30m or 2h"),
                )
            })?),
        };
        Ok(Self { waiting_s })
    }

    /// How far past its SLA the job is, in seconds (negative: not yet).
    fn overdue(&self, view: &View, job: Id) -> Option<i64> {
        let limit = self.waiting_s?;
        let created = view.job(job)?.group.as_ref()?.created;
        Some(view.now - created - limit)
    }

    fn expired(&self, view: &View, job: Id) -> bool {
        self.overdue(view, job).is_some_and(|o| o >= 0) && view.counts(job).pending > 0
    }
}

impl Plugin for Sla {
    fn name(&self) -> &'static str {
        "sla"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn job_order(&self, view: &View, a: Id, b: Id) -> Ordering {
        match (self.expired(view, a), self.expired(view, b)) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // Both late: the later one goes first.
            (true, true) => self.overdue(view, b).cmp(&self.overdue(view, a)),
            (false, false) => Ordering::Equal,
        }
    }

    fn job_entitled(&self, view: &View, job: Id) -> bool {
        self.expired(view, job)
    }

    fn job_reserves(&self, view: &View, job: Id) -> bool {
        self.expired(view, job)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_parse() {
        assert_eq!(super::parse_duration("1h30m"), Some(5400));
        assert_eq!(super::parse_duration("45s"), Some(45));
        assert_eq!(super::parse_duration("10"), None);
        assert_eq!(super::parse_duration("5x"), None);
    }
}
