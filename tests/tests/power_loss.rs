//! Power loss at every crash point: a fault-injecting file system fails
//! every operation from the N-th on (the "crash"), then drops everything
//! that was never synced. After each: reopen, no acknowledged (synced) write
//! lost, no hole, no live file missing, no orphan left.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::{key, recovered_prefix, table_files, value};

const WRITES: u64 = 150;

fn options() -> Options {
    Options {
        sync: SyncMode::Always,
        memtable_bytes: 1024,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        l1_bytes: 4096,
        target_file_bytes: 1024,
        block_size: 256,
        background_work: false,
        ..Options::default()
    }
}

/// Runs the workload until the injected crash; returns writes acknowledged.
fn run_until_crash(dir: &std::path::Path, fs: &FaultFs) -> u64 {
    let Ok(db) = Db::open_with_fs(dir, options(), Arc::new(fs.clone())) else {
        return 0;
    };
    let mut acked = 0;
    for i in 0..WRITES {
        if db.put(&key(i), &value(i)).is_err() {
            break;
        }
        acked = i + 1;
    }
    drop(db);
    acked
}

#[test]
fn every_crash_point_recovers_every_synced_write() {
    // Count the operations of an uninterrupted run.
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    assert_eq!(run_until_crash(dir.path(), &fs), WRITES);
    let total_ops = fs.ops();
    let mut crash_points = 0;
    let mut lost_tail_writes = 0;
    for crash_at in 0..total_ops {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let acked = run_until_crash(dir.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("reopen after a crash at operation {crash_at} failed: {e}"));
        let recovered = recovered_prefix(&db, WRITES);
        assert!(
            recovered >= acked,
            "crash at {crash_at}: {acked} writes acknowledged, {recovered} recovered"
        );
        assert!(
            recovered <= acked + 1,
            "crash at {crash_at}: a write that never started came back"
        );
        lost_tail_writes += recovered - acked;
        let live = db.stats().total.tables;
        drop(db);
        assert_eq!(
            table_files(dir.path()) as u64,
            live,
            "crash at {crash_at}: orphan or missing table"
        );
        crash_points += 1;
    }
    println!(
        "{crash_points} crash points over {total_ops} file-system operations; {lost_tail_writes} in-flight writes recovered; 0 acknowledged writes lost"
    );
}

#[test]
fn a_failed_write_stops_writes_and_reads_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    for i in 0..20 {
        db.put(&key(i), &value(i)).unwrap();
    }
    fs.fail_from_op(fs.ops());
    assert!(db.put(&key(20), &value(20)).is_err());
    fs.heal();
    let err = db.put(&key(21), &value(21)).unwrap_err();
    assert!(matches!(err, bloomlsm::Error::WritesStopped(_)), "{err}");
    for i in 0..20 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
}

#[test]
fn short_reads_are_errors_not_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(
        dir.path(),
        Options {
            block_cache_bytes: 0,
            ..options()
        },
        Arc::new(fs.clone()),
    )
    .unwrap();
    for i in 0..100 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    fs.set_short_reads(true);
    let mut errors = 0;
    for i in 0..100 {
        match db.get(&key(i)) {
            Ok(v) => assert_eq!(
                v,
                Some(value(i)),
                "a short read must never look like a missing key"
            ),
            Err(_) => errors += 1,
        }
    }
    fs.set_short_reads(false);
    assert!(errors > 0);
    for i in 0..100 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
    println!("{errors} short reads reported as errors, 0 wrong values");
}

#[test]
fn an_unwritable_directory_is_refused_and_left_intact() {
    // Root ignores permission bits, so a read-only directory is simulated
    // with a file system on which every mutating call fails.
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..50 {
            db.put(&key(i), &value(i)).unwrap();
        }
        db.close().unwrap();
    }
    let listing = |p: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = listing(dir.path());
    let fs = FaultFs::new();
    fs.fail_from_op(0);
    let err = Db::open_with_fs(dir.path(), options(), Arc::new(fs)).unwrap_err();
    assert!(matches!(err, bloomlsm::Error::Io { .. }), "{err}");
    println!("refused with: {err}");
    assert_eq!(listing(dir.path()), before);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(recovered_prefix(&db, 50), 50);
}
