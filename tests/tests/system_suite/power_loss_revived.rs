//! Files whose unlink a power loss undid (no directory fsync after it)
//! come back beside the live ones: the tables a compaction replaced,
//! holding older versions and a value since deleted, or the WAL of a
//! flushed memtable, holding a version older than one in the live WAL.
//! The store must answer as if they had stayed gone, and the next open
//! removes them.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use bloomlsm::Db;
use bloomlsm::fs::fault::{FaultFs, Revival};
use bloomlsm_tests::crash_workload::synced_inline_options;
use bloomlsm_tests::{scratch_dir, table_files, wal_files};

/// A store over a `FaultFs` whose power loss brings back every unlink no
/// directory fsync made durable, holding `k` = "old" and `gone`.
fn store_bringing_back_every_unlink() -> (tempfile::TempDir, FaultFs, Db) {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    let db = Db::open_with_fs(dir.path(), synced_inline_options(), Arc::new(fs.clone())).unwrap();
    db.put(b"k", b"old").unwrap();
    db.put(b"gone", b"x").unwrap();
    (dir, fs, db)
}

/// Reopens the store after the power loss: `k` overwritten with "new" and
/// `gone` deleted, whatever files came back.
fn reopened_with_the_newer_answers(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, synced_inline_options()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(b"gone").unwrap(), None, "a deleted key came back");
    db
}

#[test]
fn revived_obsolete_tables_change_no_answer() {
    let (dir, fs, db) = store_bringing_back_every_unlink();
    db.flush().unwrap();
    db.put(b"k", b"new").unwrap();
    db.delete(b"gone").unwrap();
    db.flush().unwrap();
    // L0 at its trigger: merged into the bottom level, the tombstone and
    // the older versions dropped, both L0 tables unlinked.
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.compactions >= 1, "{stats:?}");
    let live_tables = stats.total.tables;
    drop(db);
    assert_eq!(table_files(dir.path()) as u64, live_tables);
    fs.simulate_power_loss().unwrap();
    let revived = table_files(dir.path()) as u64 - live_tables;
    assert!(
        revived >= 2,
        "the replaced tables must be back for the test to mean anything: {revived}"
    );
    let db = reopened_with_the_newer_answers(dir.path());
    let live = db.stats().total.tables;
    drop(db);
    assert_eq!(table_files(dir.path()) as u64, live, "orphan left");
    assert_eq!(wal_files(dir.path()), 1, "an obsolete WAL left");
}

#[test]
fn a_revived_wal_of_a_flushed_memtable_is_not_replayed_over_newer_writes() {
    let (dir, fs, db) = store_bringing_back_every_unlink();
    // Its WAL unlinked once the manifest no longer needs it.
    db.flush().unwrap();
    // Into the live WAL, synced; no directory fsync since the unlink.
    db.put(b"k", b"new").unwrap();
    db.delete(b"gone").unwrap();
    drop(db);
    assert_eq!(wal_files(dir.path()), 1);
    fs.simulate_power_loss().unwrap();
    assert_eq!(
        wal_files(dir.path()),
        2,
        "the flushed memtable's WAL must be back for the test to mean anything"
    );
    let db = reopened_with_the_newer_answers(dir.path());
    drop(db);
    assert_eq!(wal_files(dir.path()), 1, "an obsolete WAL left");
}
