//! `sla`: a job that has waited longer than `sla-waiting-time` goes first in its queue, is
//! admitted even when the fleet is full, and reserves what it can get: its partial placement is
//! kept (pipelined, not bound) so that later, smaller jobs cannot take those resources, until
//! the whole gang fits. This is what keeps a big gang from being starved by a stream of small
//! ones.
//!
//! Arguments: `sla-waiting-time` (a duration in Go's syntax, as Volcano reads it, such as `1h`;
//! no default: without it the plugin does nothing).

use std::cmp::Ordering;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::duration::Duration;
use crate::framework::plugin::{Deadline, Entitlement, JobOrder, Plugin, Reservation};
use crate::framework::view::View;
use crate::model::Id;

/// The `sla` plugin.
pub struct Sla {
    waiting_s: Option<i64>,
}

/// Parses a waiting time in Go's duration syntax (as Volcano does) into whole seconds.
fn parse_duration(text: &str) -> Option<i64> {
    Duration::parse(text)
        .ok()
        .filter(|d| !d.is_negative())
        .map(Duration::as_secs)
}

/// The plugin reads `sla-waiting-time`.
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["sla-waiting-time"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let waiting_s = r.string("sla-waiting-time").and_then(|s| {
        let parsed = parse_duration(&s);
        if parsed.is_none() {
            r.refuse(
                "sla-waiting-time",
                format!("{s:?} is not a duration such as 30m or 2h"),
            );
        }
        parsed
    });
    r.finish()?;
    Ok(Box::new(Sla { waiting_s }))
}

impl Sla {
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

    fn job_order(&self) -> Option<&dyn JobOrder> {
        Some(self)
    }

    fn entitlement(&self) -> Option<&dyn Entitlement> {
        Some(self)
    }

    fn reservation(&self) -> Option<&dyn Reservation> {
        Some(self)
    }

    fn deadline(&self) -> Option<&dyn Deadline> {
        Some(self)
    }
}

impl Deadline for Sla {
    /// A waiting job's SLA running out: from then on it goes first, is admitted and reserves.
    fn due(&self, view: &View, job: Id) -> Option<i64> {
        let overdue = self.overdue(view, job)?;
        (overdue < 0 && view.counts(job).pending > 0).then_some(view.now - overdue)
    }
}

impl JobOrder for Sla {
    fn compare(&self, view: &View, a: Id, b: Id) -> Ordering {
        match (self.expired(view, a), self.expired(view, b)) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // Both late: the later one goes first.
            (true, true) => self.overdue(view, b).cmp(&self.overdue(view, a)),
            (false, false) => Ordering::Equal,
        }
    }
}

impl Entitlement for Sla {
    fn job_entitled(&self, view: &View, job: Id) -> bool {
        self.expired(view, job)
    }
}

impl Reservation for Sla {
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
