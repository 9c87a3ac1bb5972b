//! Power loss at every crash point around deletion-triggered compactions
//! (`Options::deletion_compaction_ratio`): keys written until the tree is
//! a few levels deep, then key ranges deleted, so tables dense with
//! tombstones over deeper data go down a level at a time (moves and
//! merges). After each crash: reopen, the acknowledged prefix there (or
//! one write more), no deleted key back, no orphan or missing table.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::{scratch_dir, table_files};

const KEYS: u64 = 96;

fn options() -> Options {
    Options {
        sync: SyncMode::Always,
        memtable_bytes: 1024,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        l1_bytes: 1024,
        level_size_ratio: 3,
        target_file_bytes: 512,
        block_size: 128,
        num_levels: 5,
        background_work: false,
        deletion_compaction_ratio: Some(0.3),
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The workload as (key, value or delete), in order: every key in a
/// scattered order, then ranges of them deleted (a fifth kept).
fn workload() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
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

/// Runs the workload until the injected crash; returns the operations
/// acknowledged, the deletion-triggered picks if the settle returned, and
/// the file-system operations done before the first delete.
fn run_until_crash(dir: &std::path::Path, fs: &FaultFs) -> (usize, u64, u64) {
    let Ok(db) = Db::open_with_fs(dir, options(), Arc::new(fs.clone())) else {
        return (0, 0, 0);
    };
    let mut acked = 0;
    let mut loaded = 0;
    let w = workload();
    for (n, (k, v)) in w.iter().enumerate() {
        if n as u64 == KEYS {
            loaded = fs.ops();
        }
        let r = match v {
            Some(v) => db.put(k, v),
            None => db.delete(k),
        };
        if r.is_err() {
            break;
        }
        acked = n + 1;
        if (n + 1) % 20 == 0 && db.flush().is_err() {
            break;
        }
    }
    let mut picks = 0;
    if acked == w.len() && db.flush().is_ok() && db.wait_for_background_work().is_ok() {
        picks = db.stats().deletion_compactions;
    }
    drop(db);
    (acked, picks, loaded)
}

fn model(ops: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (k, v) in workload().into_iter().take(ops) {
        match v {
            Some(v) => m.insert(k, v),
            None => m.remove(&k),
        };
    }
    m
}

#[test]
fn every_crash_point_around_deletion_picks_recovers_the_acknowledged_state() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let (acked, picks, loaded) = run_until_crash(dir.path(), &fs);
    assert_eq!(acked, workload().len());
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
        let (acked, _, _) = run_until_crash(dir.path(), &fs);
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
        let live = db.stats().total.tables;
        drop(db);
        assert_eq!(
            table_files(dir.path()) as u64,
            live,
            "crash at {crash_at}: orphan or missing table"
        );
    }
    println!(
        "{} crash points after the load, {picks} deletion-triggered picks in the full run",
        total_ops - loaded
    );
}
