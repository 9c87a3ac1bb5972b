//! Every integration test of this crate that shares the process with the
//! others, as one test binary (one link of the crate and its dependencies,
//! one compile of the shared helpers). Tests that change or measure
//! process-wide state (a global allocator, the descriptor limit, forks,
//! child processes of the test binary itself, the process's I/O
//! counters) stay binaries of their own beside this directory.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

#[path = "../../../engine/tests/suite_modules/mod.rs"]
mod suite_modules;

#[path = "../history/mod.rs"]
mod history;
#[path = "../partial/mod.rs"]
mod partial;

mod power_loss;
mod power_loss_after_a_cut;
mod power_loss_big_batch;
mod power_loss_cleanup;
mod power_loss_deletion;
mod power_loss_filter_repair;
mod power_loss_frozen_wals;
mod power_loss_in_place;
mod power_loss_in_place_pages;
mod power_loss_pages;
mod power_loss_partial_writes;
mod power_loss_random;
mod power_loss_rebalance;
mod power_loss_rebuild_twice;
mod power_loss_revived;
mod power_loss_thrice;
mod power_loss_twice;
mod power_loss_twice_pages;
mod power_loss_unsynced_wal_header;
mod store_corruption;
mod stress;
mod stress_history;
mod wal_zeroed_page;

#[test]
fn every_test_file_is_a_module() {
    suite_modules::assert_every_file_is_a_module(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/system_suite")),
        include_str!("main.rs"),
    );
}
