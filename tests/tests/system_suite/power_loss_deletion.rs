//! Power loss at every crash point around deletion-triggered compactions
//! (`Options::deletion_compaction_ratio`): keys written until the tree is
//! a few levels deep, then key ranges deleted, so tables dense with
//! tombstones over deeper data go down a level at a time (moves and
//! merges). After each crash: reopen, the acknowledged prefix there (or
//! one write more), no deleted key back, no orphan or missing table.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options};
use bloomlsm_tests::crash_workload::{
    self, CrashRun, Write, contents_after, synced_inline_options,
};
use bloomlsm_tests::{close_with_no_orphan_table, scratch_dir};

const KEYS: u64 = 96;

fn options() -> Options {
    Options {
        l1_bytes: 1024,
        level_size_ratio: 3,
        target_file_bytes: 512,
        block_size: 128,
        num_levels: 5,
        deletion_compaction_ratio: Some(0.3),
        ..synced_inline_options()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The workload as (key, value or delete), in order: every key in a
/// scattered order, then ranges of them deleted (a fifth kept).
fn workload() -> Vec<Write> {
    let mut w = Vec::new();
    for n in 0..KEYS {
        let i = n * 37 % KEYS;
        w.push((key(i), Some(format!("value-{i:06}").into_bytes())));
    }
    for range in [2, 0, 3] {
        for i in range * 24..(range + 1) * 24 {
            if i % 5 != 0 {
                w.push((key(i), None));
            }
        }
    }
    w
}

/// Runs the workload until the injected crash, flushing every 20 writes;
/// `ops_at_mark` is the file-system operations done before the first
/// delete.
fn run_until_crash(dir: &std::path::Path, fs: &FaultFs) -> CrashRun {
    crash_workload::run_until_crash(dir, fs, options(), &workload(), 20, KEYS as usize)
}

fn model(ops: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    contents_after(&workload(), ops)
}

#[test]
fn every_crash_point_around_deletion_picks_recovers_the_acknowledged_state() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs);
    assert_eq!(full.acked, workload().len());
    let picks = full.settled.map_or(0, |s| s.deletion_compactions);
    let loaded = full.ops_at_mark;
    assert!(
        picks > 0,
        "the workload must reach deletion-triggered picks"
    );
    let total_ops = fs.ops();
    // The crash points of the load before the deletes are the other
    // power-loss tests' cases.
    for crash_at in loaded..total_ops {
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let acked = run_until_crash(dir.path(), &fs).acked;
        fs.simulate_power_loss().unwrap();
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("reopen after a crash at operation {crash_at} failed: {e}"));
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db
            .scan::<Vec<u8>, _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        // Synced each write: the acknowledged prefix, or one more.
        assert!(
            got == model(acked) || got == model(acked + 1),
            "crash at {crash_at}: {acked} acknowledged, the store is neither prefix"
        );
        for i in 0..KEYS {
            let k = key(i);
            assert_eq!(
                db.get(&k).unwrap(),
                got.get(&k).cloned(),
                "crash at {crash_at}: get {i} differs from the scan"
            );
        }
        // The picks the crash interrupted run again and end.
        db.wait_for_background_work().unwrap();
        let after: BTreeMap<Vec<u8>, Vec<u8>> = db
            .scan::<Vec<u8>, _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            after, got,
            "crash at {crash_at}: settling changed the answers"
        );
        close_with_no_orphan_table(db, dir.path(), &format!("crash at {crash_at}"));
    }
    println!(
        "{} crash points after the load, {picks} deletion-triggered picks in the full run",
        total_ops - loaded
    );
}
