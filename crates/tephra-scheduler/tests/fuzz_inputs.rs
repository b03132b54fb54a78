//! Fuzzing of the scheduler's text inputs with proptest: Kubernetes quantities, Go durations and
//! the scheduler configuration. Each input is arbitrary text, a byte-level mutation of the seed
//! corpus in `tests/fuzz-seeds/`, or text shaped like the grammar; the property is that a
//! reader returns (a value or an error) and never panics, and that the values it returns are
//! exact.
//!
//! `TEPHRA_FUZZ_CASES` sets the cases per property (default 256, a second or two in a debug
//! build); README's Development section records the long runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use proptest::prelude::*;
use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::duration::{Duration, DurationError};
use tephra_scheduler::quantity::{parse_scaled, parse_scaled_wide};
use tephra_scheduler::testing::{Edit, mutate};

fn cases() -> u32 {
    std::env::var("TEPHRA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn seeds_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-seeds")
}

/// The lines of a seed list, without comments.
fn seed_lines(file: &str) -> Vec<String> {
    std::fs::read_to_string(seeds_dir().join(file))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn config_seeds() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(seeds_dir().join("config"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..12)
}

/// Parses a quantity at both widths and checks that they agree.
fn quantity_reads(text: &str) {
    for scale in [1, 1000] {
        match (parse_scaled(text, scale), parse_scaled_wide(text, scale)) {
            (Ok(v), Ok(w)) => assert_eq!(i128::from(v), w, "{text:?}"),
            (Err(e), Ok(w)) => {
                assert!(i64::try_from(w).is_err(), "{text:?}: {e} but {w} fits")
            }
            (Ok(v), Err(e)) => panic!("{text:?}: {v} but wide: {e}"),
            (Err(_), Err(_)) => {}
        }
    }
}

/// Parses a duration and converts it every way.
fn duration_reads(text: &str) {
    if let Ok(d) = Duration::parse(text) {
        let _ = (d.as_millis(), d.as_secs(), d.to_string());
    }
}

const SUFFIXES: &[(&str, i128)] = &[
    ("", 1),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
];

const UNITS: &[(&str, i128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_a_quantity_or_an_error(text in any::<String>()) {
        quantity_reads(&text);
    }

    #[test]
    fn quantity_shaped_text_is_a_quantity_or_an_error(
        text in "[+-]?[0-9]{0,24}(\\.[0-9]{0,24})?(|m|u|n|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]{1,12})"
    ) {
        quantity_reads(&text);
    }

    #[test]
    fn mutated_seed_quantities_are_a_quantity_or_an_error(
        pick in any::<prop::sample::Index>(), edits in edits()
    ) {
        let seeds = seed_lines("quantities.txt");
        let text = mutate(seeds[pick.index(seeds.len())].as_bytes(), &edits);
        quantity_reads(&String::from_utf8_lossy(&text));
    }

    #[test]
    fn whole_quantities_are_exact_or_refused_past_i64(
        n in 0u64..u64::MAX, s in 0..SUFFIXES.len()
    ) {
        let (suffix, factor) = SUFFIXES[s];
        let want = i128::from(n) * factor;
        let got = parse_scaled(&format!("{n}{suffix}"), 1);
        match i64::try_from(want) {
            Ok(want) => prop_assert_eq!(got, Ok(want)),
            Err(_) => prop_assert!(got.is_err()),
        }
    }

    #[test]
    fn any_text_is_a_duration_or_an_error(text in any::<String>()) {
        duration_reads(&text);
    }

    #[test]
    fn duration_shaped_text_is_a_duration_or_an_error(
        text in "[+-]?([0-9]{0,21}(\\.[0-9]{0,21})?(ns|us|µs|ms|s|m|h|d|x|)){1,4}"
    ) {
        duration_reads(&text);
    }

    #[test]
    fn mutated_seed_durations_are_a_duration_or_an_error(
        pick in any::<prop::sample::Index>(), edits in edits()
    ) {
        let seeds = seed_lines("durations.txt");
        let text = mutate(seeds[pick.index(seeds.len())].as_bytes(), &edits);
        duration_reads(&String::from_utf8_lossy(&text));
    }

    #[test]
    fn whole_durations_are_exact_or_out_of_range(n in 0u64..u64::MAX, u in 0..UNITS.len()) {
        let (unit, nanos) = UNITS[u];
        let want = i128::from(n) * nanos;
        let got = Duration::parse(&format!("{n}{unit}"));
        match i64::try_from(want) {
            Ok(want) => prop_assert_eq!(got.map(Duration::as_nanos), Ok(want)),
            Err(_) => prop_assert!(matches!(got, Err(DurationError::OutOfRange(_))), "{:?}", got),
        }
    }

    #[test]
    fn any_text_is_a_config_or_an_error(text in any::<String>()) {
        let _ = SchedulerConfig::parse(&text);
    }

    #[test]
    fn mutated_seed_configs_are_a_config_or_an_error(
        pick in any::<prop::sample::Index>(), edits in edits()
    ) {
        let seeds = config_seeds();
        let text = mutate(&seeds[pick.index(seeds.len())], &edits);
        let _ = SchedulerConfig::parse(&String::from_utf8_lossy(&text));
    }
}

#[test]
fn every_seed_is_read_without_panicking() {
    for q in seed_lines("quantities.txt") {
        quantity_reads(&q);
    }
    for d in seed_lines("durations.txt") {
        duration_reads(&d);
    }
    for c in config_seeds() {
        let _ = SchedulerConfig::parse(&String::from_utf8_lossy(&c));
    }
}

#[test]
fn shipped_configs_in_the_seed_corpus_still_load() {
    for name in [
        "volcano-default.conf",
        "tephra-default.conf",
        "fair-share.conf",
    ] {
        let text = std::fs::read_to_string(seeds_dir().join("config").join(name)).unwrap();
        SchedulerConfig::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn exponentially_expanding_aliases_are_refused_quickly() {
    let text = std::fs::read_to_string(seeds_dir().join("config/aliases.conf")).unwrap();
    let start = std::time::Instant::now();
    assert!(SchedulerConfig::parse(&text).is_err());
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}
