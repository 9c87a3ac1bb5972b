//! Every integration test of this crate that shares the process with the
//! others, as one test binary (one link of the crate and its dependencies,
//! one compile of the shared helpers). Tests that change or measure
//! process-wide state (a global allocator, the descriptor limit, forks,
//! child processes of the test binary itself, the process's I/O
//! counters) stay binaries of their own beside this directory.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

#[path = "../../../engine/tests/suite_modules/mod.rs"]
mod suite_modules;
#[path = "../../../engine/tests/suite_regressions/mod.rs"]
mod suite_regressions;

mod blocked_few_blocks_rate;
mod blocked_fill_estimate;
mod blocked_k;
mod decoder;
mod every_accepted_bits_per_key;
mod golden;
mod lecture_numbers;
mod no_false_negatives;
mod ribbon_builds_frozen;
mod ribbon_sizing_bounds;
mod ribbon_space;
mod small_table_rates;
mod varying_lengths;

#[test]
fn every_test_file_is_a_module() {
    suite_modules::assert_every_file_is_a_module(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/filter_suite")),
        include_str!("main.rs"),
    );
}

#[test]
fn every_regression_file_is_read() {
    suite_regressions::assert_every_regression_file_is_read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/filter_suite"
    )));
}
