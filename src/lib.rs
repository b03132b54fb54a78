//! The workspace root package: it owns the cross-crate tests in `tests/` and the benchmarks in `benches/`.
