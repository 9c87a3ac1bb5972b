//! Power loss at every file-system operation of a run whose filter
//! rebuilds append to the tables' own files: between the append and the
//! manifest naming the new size, after it, in the middle of an append.
//! After each: the reopen (which checks every table against its record)
//! succeeds and holds a prefix of the history with every acknowledged
//! write, no orphan is left, and a table file is never shorter than its
//! record; a rebuild on the reopened store (which cuts what an unfinished
//! append left) and another reopen keep the same answers.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, FilterPolicy, Options};
use bloomlsm_tests::crash_workload::synced_inline_options;
use bloomlsm_tests::rebuild_workload::{RebuildRun, run_with_rebuilds};
use bloomlsm_tests::{
    apply_history_write, close_with_no_orphan_table, contents, recovered_history, scratch_dir,
};

const WRITES: u64 = 1_200;

/// A filter rebuild after every `REBUILD_EVERY` writes.
const REBUILD_EVERY: u64 = 150;

/// Crash points outside the rebuilds: every `STEP`-th operation (inside
/// them, every one).
const STEP: u64 = 9;

/// Synced inline work, with tables of a few KiB (so an append's unused
/// bytes stay within the bound and rebuilds are in place) over L0 to L2;
/// at most `max_open_files` table files open (`Some(1)`: the file a rebuild
/// appends to is held or closed by the set as reads come, across the crash
/// and the recovery). The bound opens files, which are no operations of
/// the `FaultFs`: crash points name the same operations either way.
fn options(max_open_files: Option<usize>) -> Options {
    Options {
        max_open_files,
        memtable_bytes: 12 << 10,
        l1_bytes: 12 << 10,
        level_size_ratio: 4,
        target_file_bytes: 4 << 10,
        ..synced_inline_options()
    }
}

fn policy(round: u64) -> FilterPolicy {
    match round % 3 {
        0 => FilterPolicy::Uniform { bits_per_key: 16.0 },
        1 => FilterPolicy::Optimized { bits_per_key: 8.0 },
        _ => FilterPolicy::PerLevel(vec![4.0, 12.0, 7.0]),
    }
}

fn run_until_crash(dir: &Path, fs: &FaultFs, max_open_files: Option<usize>) -> RebuildRun {
    run_with_rebuilds(
        dir,
        fs,
        options(max_open_files),
        WRITES,
        REBUILD_EVERY,
        policy,
    )
}

/// Opens the crashed store on the real file system and checks it; returns
/// its contents.
fn reopen_and_check(
    dir: &Path,
    acked: u64,
    max_open_files: Option<usize>,
    what: &str,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, options(max_open_files))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let recovered = recovered_history(&db, WRITES);
    assert!(
        (acked..=acked + 1).contains(&recovered),
        "{what}: {acked} writes acknowledged, {recovered} recovered"
    );
    let got = contents(&db);
    close_with_no_orphan_table(db, dir, what);
    got
}

#[test]
fn every_crash_point_around_in_place_filter_rebuilds_keeps_every_answer() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs, None);
    assert_eq!(full.acked, WRITES);
    assert!(
        full.appended >= 10,
        "only {} tables rebuilt in place",
        full.appended
    );
    let total_ops = fs.ops();
    let crash_points: Vec<u64> = (0..total_ops)
        .filter(|op| op % STEP == 0 || full.rebuilds.iter().any(|r| r.contains(op)))
        .collect();
    for (n, &crash_at) in crash_points.iter().enumerate() {
        // Every other crash point with one table file open.
        let bound = (n % 2 == 1).then_some(1);
        let what = format!("crash at {crash_at}, open files {bound:?}");
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let acked = run_until_crash(dir.path(), &fs, bound).acked;
        fs.simulate_power_loss().unwrap();
        let got = reopen_and_check(dir.path(), acked, bound, &what);

        // A rebuild over whatever an unfinished append left, then another
        // reopen: the same answers.
        let db = Db::open(dir.path(), options(bound)).unwrap();
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 11.0 })
            .unwrap_or_else(|e| panic!("{what}: rebuild after the reopen failed: {e}"));
        assert_eq!(contents(&db), got, "{what}: after a rebuild");
        drop(db);
        let db = Db::open(dir.path(), options(bound)).unwrap();
        assert_eq!(contents(&db), got, "{what}: reopened after the rebuild");
    }
    println!(
        "{} crash points of {total_ops} operations (every one of {} rebuilds'); \
         {} tables rebuilt in place in the full run",
        crash_points.len(),
        full.rebuilds.len(),
        full.appended
    );
}

/// One operation of a rebuild fails (an append half written, unsynced, or
/// synced and never installed; the store stops writes) and the process
/// goes on: the store is reopened on the same file system without a power
/// loss, the history continues with its rebuilds (each cutting what the
/// failed append left, then appending at the same offset), and then the
/// power goes. Every acknowledged write is there and every table whole,
/// with and without the unlinks the power loss may revive.
#[test]
fn a_rebuild_failing_once_then_appended_again_survives_a_power_loss() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs, None);
    let ops: Vec<u64> = full.rebuilds.iter().flat_map(|r| r.clone()).collect();
    for (n, &op) in ops.iter().enumerate() {
        // Revived unlinks every other operation, one table file open every
        // other pair: each mix of the two.
        let bound = (n / 2 % 2 == 1).then_some(1);
        let what = format!("operation {op} failed, open files {bound:?}");
        let dir = scratch_dir();
        let fs = FaultFs::new();
        if n % 2 == 1 {
            fs.set_revival(bloomlsm::fs::fault::Revival::All);
        }
        fs.fail_only_op(op);
        let acked = run_until_crash(dir.path(), &fs, bound).acked;
        let db = Db::open_with_fs(dir.path(), options(bound), Arc::new(fs.clone()))
            .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        assert_eq!(recovered_history(&db, WRITES), acked, "{what}");
        for i in acked..WRITES {
            // The failed rebuild (before write `acked`) is done again.
            if i > 0 && i % REBUILD_EVERY == 0 {
                db.rebuild_filters(policy(i / REBUILD_EVERY))
                    .unwrap_or_else(|e| panic!("{what}: rebuild at {i}: {e}"));
            }
            apply_history_write(&db, i).unwrap();
        }
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 5.0 })
            .unwrap();
        drop(db);
        fs.simulate_power_loss().unwrap();
        reopen_and_check(dir.path(), WRITES, bound, &what);
    }
}
