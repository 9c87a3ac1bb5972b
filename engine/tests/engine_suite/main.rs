//! Every integration test of this crate that shares the process with the
//! others, as one test binary (one link of the crate and its dependencies,
//! one compile of the shared helpers). Tests that change or measure
//! process-wide state (a global allocator, the descriptor limit, forks,
//! child processes of the test binary itself, the process's I/O
//! counters) stay binaries of their own beside this directory.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

#[path = "../suite_modules/mod.rs"]
mod suite_modules;
#[path = "../suite_regressions/mod.rs"]
mod suite_regressions;

#[path = "../common/mod.rs"]
mod common;
#[path = "../deep/mod.rs"]
mod deep;
#[path = "../read_truth/mod.rs"]
mod read_truth;

mod acknowledged_tail;
mod bad_input_edges;
mod batch_atomicity_races;
mod batch_semantics;
mod batch_transfer_invariant;
mod bottom_cleanup;
mod cache_size_races;
mod churn_model;
mod close_marker_attack;
mod close_read_race;
mod closed_flag_crash_attack;
mod closed_store_releases;
mod concurrent_crash_prefix;
mod concurrent_reads;
mod db_model;
mod deep_model;
mod deletion_compaction;
mod deletion_compaction_close;
mod direct_reads_attack;
mod durability;
mod embed_trial;
mod ended_iter_releases;
mod fence_keys;
mod file_numbers;
mod filter_bits_edges;
mod filter_rebuild_in_place;
mod filter_swap_attack;
mod filters;
mod flushed_wal_closed;
mod format_v3_upgrade;
mod fresh_dir_crash;
mod fresh_dir_not_ours;
mod level_count_extremes;
mod long_key_deletes;
mod manifest_next_number;
mod manifest_table_named_twice;
mod manifest_wal_number;
mod marker_forgery_attack;
mod model;
mod odd_keys_model;
mod open_files_filter_reopen;
mod open_files_release;
mod open_files_reopen_attack;
mod options_churn_model;
mod options_reopen_attack;
mod pinned_versions;
mod pit_afterlife;
mod policies;
mod read_counters;
mod read_fault_attack;
mod read_only;
mod read_only_frozen_wals;
mod read_only_mount;
mod read_path_attack;
mod readme_snippet;
mod regressions;
mod review11_attack;
mod review_findings;
mod salvage_crash_attack;
mod salvaged_lost_end;
mod scan_concurrency_attack;
mod scan_error_keeps_pairs_read;
mod scan_inclusive_end_at_separator;
mod scan_shapes;
mod scan_upper_bound;
mod scan_upper_bound_model;
mod seal_reopen_attack;
mod sealed_tail_gap;
mod sealed_wal;
mod separator_stats;
mod settle_fixpoint;
mod shared_handle_fault_lifecycle;
mod snapshot_trace;
mod stats_beside_readers;
mod stats_crafted_file_sizes;
mod stats_crafted_filter_items;
mod stats_crafted_sparse_counts;
mod table_format_v1_upgrade;
mod table_records;
mod tree_order;
mod version_stacks_model;
mod wait_under_writes;
mod write_accounting;
mod write_panic_wal;
mod write_path_shapes;
mod write_stop_filter_read;
mod write_stop_kind;
mod written_manifests_decode;

#[test]
fn every_test_file_is_a_module() {
    suite_modules::assert_every_file_is_a_module(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/engine_suite")),
        include_str!("main.rs"),
    );
}

#[test]
fn every_regression_file_is_read() {
    suite_regressions::assert_every_regression_file_is_read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/engine_suite"
    )));
}
