//! Hunt 27: one store closed and opened again and again, each open with
//! options drawn anew among those a user may change (filter kind, policy
//! and bits per key, fractional and below the one-bit floor, Monkey's
//! `Optimized` or uniform or per level; block, memtable, table and L1
//! sizes; size ratio, dynamic budgets and the number of levels; sync and
//! WAL recovery modes; block cache from 0 bytes; open-file bound; key and
//! value limits under what the store holds; damaged-filter policy;
//! deletion compactions; direct reads where the directory serves
//! `O_DIRECT`; background work), on a deep tree of narrow tables.
//!
//! Between opens: opens that must be refused (every invalid option, fewer
//! levels than the deepest table needs, direct reads on a file system
//! refusing them), each checked to be typed and to change no file, and
//! read-only opens with options of their own, every change refused.
//! Stores end by a clean close, a drop, or a close whose first fsync
//! fails (WALs left unsealed, as a crash leaves them).
//!
//! Within an open: puts, deletes of live and absent keys, overwrites,
//! batches writing one key twice, gets, bounded scans (inclusive,
//! exclusive, open, inverted), snapshots held across flushes,
//! compactions and `rebuild_filters` (on a file system that sometimes
//! cannot append, so rebuilds copy), iterators held across all of it, and
//! a reader thread beside the writer reading the held snapshots exactly
//! and the live store for what cannot change. Every answer is checked
//! against a `BTreeMap` model. Never a full `compact()`, never a sleep.
//!
//! `BLOOMLSM_OPTIONS_CHURN_SEEDS=N` runs N seeds per test (default 2, 1
//! on disk) from `BLOOMLSM_OPTIONS_CHURN_FIRST` (0);
//! `BLOOMLSM_OPTIONS_CHURN_OPS` sets the operations per seed (default
//! 2500, a fifth of it on disk);
//! `BLOOMLSM_OPTIONS_CHURN_VERBOSE` prints each seed's counts.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

mod draw;
mod filters_applied;
mod keys;
mod readers;
mod refusals;
mod run;

use draw::Work;
use run::Run;

fn ops() -> u64 {
    std::env::var("BLOOMLSM_OPTIONS_CHURN_OPS").map_or(2500, |s| s.parse().unwrap())
}

fn churn(
    work: Work,
    salt: u64,
    default_seeds: u64,
    ops: u64,
    dir: fn() -> Option<tempfile::TempDir>,
) {
    let seeds = common::env_seeds(
        "BLOOMLSM_OPTIONS_CHURN_SEEDS",
        "BLOOMLSM_OPTIONS_CHURN_FIRST",
        default_seeds,
    );
    for seed in seeds {
        let Some(dir) = dir() else { return };
        let seed = seed * 16 + salt;
        let mut run = Run::new(seed, work, dir);
        run.run(ops);
        let c = &run.counts;
        if std::env::var_os("BLOOMLSM_OPTIONS_CHURN_VERBOSE").is_some() {
            eprintln!("seed {seed} ({work:?}): {c:?}");
        }
        assert!(c.reopens >= ops / 500, "seed {seed}: {c:?}");
        assert!(
            ops < 2000 || c.max_levels_in_use >= 5,
            "seed {seed}: the tree stayed shallow: {c:?}"
        );
    }
}

#[test]
fn options_churn_inline() {
    churn(Work::Inline, 1, 2, ops(), || Some(common::scratch_dir()));
}

#[test]
fn options_churn_background() {
    churn(
        Work::Background,
        2,
        2,
        ops(),
        || Some(common::scratch_dir()),
    );
}

#[test]
fn options_churn_mixed() {
    churn(Work::Mixed, 3, 2, ops(), || Some(common::scratch_dir()));
}

/// On a disk file system, where direct reads have alignment rules (the
/// other runs are in memory); skipped, saying so, where there is none.
/// One seed of a fifth of the operations by default: each of the many
/// flushes of tiny memtables fsyncs a table, a manifest and the directory.
#[test]
fn options_churn_on_disk() {
    churn(Work::Mixed, 4, 1, ops() / 5, common::disk_dir);
}
