//! tephra-scenario: the scenario file, which the simulator runs and `tephra dev` serves the
//! fleet of: a fleet, queues, a workload, faults, scheduler settings and run settings. The
//! format is public and documented in README; keep it stable. [`rng`] is the seeded generator
//! that expands fault generators here and drives the simulator.
//!
//! Durations and quantities are checked while the YAML is read (`values.rs`), so a bad one is
//! reported with the file, line and column it sits on, and the field it belongs to; the rest is
//! checked once the file is read (`check.rs`). The fields themselves are in `defs.rs`.

pub mod check;
pub mod defs;
pub mod faults;
pub mod objects;
pub mod rng;
pub mod values;

use std::path::{Path, PathBuf};

pub use defs::*;
pub use values::{Dur, DurError, Qty, Resources};

/// A bad scenario. Nothing runs when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The YAML does not parse, or a field is unknown, missing or malformed.
    #[error("{path}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// What is wrong, with line and column when known.
        message: String,
    },
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: display.clone(),
            source,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &display, &base)
    }

    /// Parses a scenario from text; `source` names it in errors, `base_dir` resolves paths.
    pub fn parse(text: &str, source: &str, base_dir: &Path) -> Result<Self, ScenarioError> {
        let mut s: Scenario = serde_saphyr::from_str(text).map_err(|e| ScenarioError::Invalid {
            path: source.to_string(),
            message: e.to_string(),
        })?;
        s.base_dir = base_dir.to_path_buf();
        s.source = source.to_string();
        check::check(&s).map_err(|message| ScenarioError::Invalid {
            path: source.to_string(),
            message,
        })?;
        Ok(s)
    }

    /// A path from the scenario, resolved against the scenario's directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn go_style_durations_parse() {
        assert_eq!(Dur::parse("90s"), Ok(Dur(90_000)));
        assert_eq!(Dur::parse("10m"), Ok(Dur(600_000)));
        assert_eq!(Dur::parse("1h30m"), Ok(Dur(5_400_000)));
        assert_eq!(Dur::parse("2d"), Ok(Dur(172_800_000)));
        assert_eq!(Dur::parse("500ms"), Ok(Dur(500)));
        assert_eq!(Dur::parse("1.5h"), Ok(Dur(5_400_000)));
        assert!(
            Dur::parse("5x")
                .unwrap_err()
                .to_string()
                .contains("unknown unit \"x\"")
        );
        assert!(
            Dur::parse("10")
                .unwrap_err()
                .to_string()
                .contains("missing unit")
        );
        assert!(matches!(Dur::parse("-1s"), Err(DurError::Negative(_))));
    }

    #[test]
    fn a_bad_field_is_reported_with_file_and_line() {
        let text = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - name: p\n          count: 1\n          capacity: {cpu: \"4x\"}\n";
        let err = Scenario::parse(text, "s.yaml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.yaml: "), "{err}");
        assert!(err.contains("line 7"), "{err}");
        assert!(err.contains("\"4x\""), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let text = "fleet:\n  clusters: []\n  nodes: 3\n";
        let err = Scenario::parse(text, "s.yaml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes"), "{err}");
    }
}
