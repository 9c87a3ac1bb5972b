//! History stress: deletes, batches, held snapshots, filter rebuilds and
//! reopens on a deep tree of narrow tables (5 to 7 levels below L0 in
//! use), every answer checked against per-key histories (`history/`).
//!
//! - Timed, on real threads: writers (puts, deletes, batches, runs of
//!   deletes; about 40% deletes), readers of the live store (gets, scans,
//!   and a scan kept open across their other reads), a holder of
//!   snapshots re-read across flushes, compactions and rebuilds, and a
//!   thread rebuilding filters at changing policies, flushing and
//!   settling, while the background threads (or, in one configuration's
//!   first half, the writers inline) flush and compact. A read is never
//!   older than what was acknowledged before it began, never a value not
//!   written; a snapshot answers the same every time; reads at one point
//!   in time fit one prefix of each writer's writes (no part of a batch).
//!   Halfway the store is closed and opened with another filter kind and
//!   sync mode; at the end the whole store equals the final histories,
//!   live, read-only reopened and reopened. 3 s per configuration, or
//!   `BLOOMLSM_STRESS_HISTORY_SECONDS`; the seed is printed
//!   (`BLOOMLSM_STRESS_HISTORY_SEED` sets it, though thread timing differs).
//! - Seeded, on one thread with inline background work: the same mix and
//!   reopens in the middle (each with its own narrow shape, filter kind,
//!   policy and sync mode), a fixed number of operations per seed, every
//!   answer exact, so a failure names a seed that reproduces it.
//!   `BLOOMLSM_STRESS_HISTORY_SEED` runs that seed alone;
//!   `BLOOMLSM_STRESS_HISTORY_OPS` (default 3000).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::history;

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use bloomlsm::{FilterKind, SyncMode};
use history::run::{Config, run_threads};
use history::seeded::run_seed;

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn seconds() -> u64 {
    env("BLOOMLSM_STRESS_HISTORY_SECONDS").unwrap_or(3)
}

fn seed() -> u64 {
    env("BLOOMLSM_STRESS_HISTORY_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    })
}

#[test]
fn threads_blocked_filters_without_fsync() {
    let config = Config {
        kind: FilterKind::Blocked,
        sync: SyncMode::Never,
        deletion_compaction_ratio: None,
        writers: 2,
        l0_heavy: false,
        inline_first_half: false,
        target_file_bytes: 1024,
        max_open_files: None,
    };
    run_threads(&config, seconds(), seed());
}

#[test]
fn threads_ribbon_filters_fsync_deletion_compactions_and_a_wide_l0() {
    let config = Config {
        kind: FilterKind::Ribbon,
        sync: SyncMode::Always,
        deletion_compaction_ratio: Some(0.6),
        writers: 3,
        l0_heavy: true,
        inline_first_half: false,
        target_file_bytes: 1024,
        max_open_files: Some(2),
    };
    run_threads(&config, seconds(), seed());
}

#[test]
fn threads_standard_filters_tiny_tables_inline_work_then_background_threads() {
    let config = Config {
        kind: FilterKind::Standard,
        sync: SyncMode::Never,
        deletion_compaction_ratio: Some(0.3),
        writers: 2,
        l0_heavy: false,
        inline_first_half: true,
        target_file_bytes: 192,
        max_open_files: Some(1),
    };
    run_threads(&config, seconds(), seed());
}

fn one_seed(seed: u64, ops: u64) {
    let mut at = 0;
    match catch_unwind(AssertUnwindSafe(|| run_seed(seed, ops, &mut at))) {
        Ok(figures) => eprintln!("seed {seed}: {ops} ops, {figures:?}"),
        Err(panic) => {
            eprintln!("seed {seed} failed at operation {at} (BLOOMLSM_STRESS_HISTORY_SEED={seed})");
            resume_unwind(panic)
        }
    }
}

#[test]
fn seeded_single_thread_with_reopens() {
    let ops = env("BLOOMLSM_STRESS_HISTORY_OPS").unwrap_or(3000);
    match env("BLOOMLSM_STRESS_HISTORY_SEED") {
        Some(seed) => one_seed(seed, ops),
        None => (1..=4).for_each(|seed| one_seed(seed, ops)),
    }
}

#[test]
fn keys_sort_as_their_numbers_and_parse_back() {
    use history::{KEYS, key, key_index};
    for k in 0..KEYS {
        assert_eq!(key_index(&key(k)), Ok(k));
        if k > 0 {
            assert!(key(k - 1) < key(k), "{k}");
        }
    }
    assert!(key_index(b"hist00120").is_err());
}
