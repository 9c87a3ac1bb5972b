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

#[path = "../common/mod.rs"]
mod common;

mod corruption;
mod filter_appended;
mod filter_bits_set_late;
mod filter_retry;
mod format_md_reader;
mod get_in_range;
mod golden;
mod index_cut_short;
mod index_layouts_model;
mod readahead;
mod reads_saved;
mod resealed;
mod restart_groups_bound;
mod ribbon_filter;
mod round_trip;
mod separator_sequence_edges;
mod separators;
mod typed_errors;
mod upper_bound_golden;
mod versions_across_blocks;
mod writer_refusals;

#[test]
fn every_test_file_is_a_module() {
    suite_modules::assert_every_file_is_a_module(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/table_suite")),
        include_str!("main.rs"),
    );
}

#[test]
fn every_regression_file_is_read() {
    suite_regressions::assert_every_regression_file_is_read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/table_suite"
    )));
}
