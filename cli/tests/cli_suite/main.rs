//! Every integration test of this crate that shares the process with the
//! others, as one test binary (one link of the crate and its dependencies,
//! one compile of the shared helpers). Tests that change or measure
//! process-wide state (a global allocator, the descriptor limit, forks,
//! child processes of the test binary itself, the process's I/O
//! counters) stay binaries of their own beside this directory.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

#[path = "../../../engine/tests/suite_modules/mod.rs"]
mod suite_modules;

#[path = "../common/mod.rs"]
mod common;

mod bad_values_end_with_usage;
mod cli;
mod closed_stderr;
mod closed_stdout;
mod control_characters;
mod delete_counts;
mod edge_whitespace;
mod error_lines;
mod hyphen_values;
mod inspect_damaged_manifest;
mod inspect_truncated_table;
mod inspect_verify;
mod read_flags;
mod scan_bounds_model;
mod scan_limit;
mod scan_limit_damage;
mod scan_swapped_bounds;
mod size_bounds;
mod size_figures;
mod stats_absent_gets;
mod stats_levels_match_inspect;
mod stats_probes_add_up;
mod stats_theoretical_fpr_without_filter;
mod stats_undefined_rates;
mod store_options;
mod study_numbers_agree;
mod text_matches_json;
mod usage_error_lines;
mod verify_damaged_filter;
mod wal_cut_note;
mod wal_cut_note_under_pit;
mod wal_lost_end_note;
mod wal_recovery_flag;
mod zero_counts;

#[test]
fn every_test_file_is_a_module() {
    suite_modules::assert_every_file_is_a_module(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli_suite")),
        include_str!("main.rs"),
    );
}
