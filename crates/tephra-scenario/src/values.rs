//! Values that a scenario checks while it is read, so that a bad one is reported with its line:
//! durations and Kubernetes quantities.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer};
use tephra_scheduler::duration::{Duration, DurationError};
use tephra_scheduler::quantity::parse_scaled;

/// Why a scenario duration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurError {
    /// Not a Go duration.
    #[error(transparent)]
    Syntax(#[from] DurationError),
    /// Negative.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
}

/// A duration in milliseconds, written in Go's syntax (`90s`, `10m`, `6h`, `1h30m`, `500ms`),
/// plus `d` for days: the project's one duration grammar ([`tephra_scheduler::duration`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub i64);

impl Dur {
    /// Whole seconds (rounded down).
    pub fn secs(self) -> i64 {
        self.0 / 1000
    }

    /// Parses a duration in Go's syntax (days allowed); durations in a scenario are never
    /// negative.
    pub fn parse(text: &str) -> Result<Self, DurError> {
        let d = Duration::parse(text)?;
        if d.is_negative() {
            return Err(DurError::Negative(text.to_string()));
        }
        Ok(Dur(d.as_millis()))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0 as f64 / 1000.0)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(0) => Ok(Dur(0)),
            Raw::Int(n) => Err(serde::de::Error::custom(format!(
                "invalid duration {n}: give a unit, e.g. {n}s"
            ))),
            Raw::Text(s) => Dur::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

/// A Kubernetes quantity, checked when read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qty(pub String);

impl<'de> Deserialize<'de> for Qty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Int(n) => n.to_string(),
            Raw::Float(f) => f.to_string(),
            Raw::Text(s) => s,
        };
        parse_scaled(&text, 1000).map_err(serde::de::Error::custom)?;
        Ok(Qty(text))
    }
}

/// A resource list.
pub type Resources = BTreeMap<String, Qty>;
