//! What a close returns when an error stopped writes that no call of
//! the caller's saw: a background flush refused before the close, or while
//! the close waits for it. The close writes no marker and returns the
//! failure, not `Ok`; every put is recovered all the same.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fs::fault::FaultFs;
use crate::wal::format_of;
use crate::{Db, Error, Options, Result, SyncMode};

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 4 << 10,
        background_work: true,
        ..Options::default()
    }
}

/// Puts until the first memtable is frozen (its flush then runs in the
/// background); the keys written.
fn fill_until_frozen(db: &Db) -> Vec<Vec<u8>> {
    let mut written = Vec::new();
    while db.inner.current.load().imm.is_empty() {
        let key = format!("key{:05}", written.len()).into_bytes();
        db.put(&key, &[7; 100]).unwrap();
        written.push(key);
    }
    written
}

/// Waits (a minute at most) for a background thread to get to `done`.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::yield_now();
    }
}

/// The close's answer names the refused flush; a reopen holds every put.
fn check_closed_and_recovered(closed: Result<()>, dir: &Path, fs: FaultFs, written: &[Vec<u8>]) {
    assert!(
        matches!(&closed, Err(Error::WritesStopped(why)) if why.message().contains("refused")),
        "{closed:?}"
    );
    fs.heal();
    fs.set_refuse_table_files(false);
    let db = Db::open_with_fs(dir, options(), Arc::new(fs)).unwrap();
    for key in written {
        assert_eq!(db.get(key).unwrap(), Some(vec![7; 100]), "{key:?}");
    }
    db.close().unwrap();
}

/// The flush fails before the close (every put returned Ok before it
/// did): the close is the caller's only chance to hear of it.
#[test]
fn a_background_failure_no_call_saw_is_returned_by_close() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    fs.set_refuse_table_files(true);
    let written = fill_until_frozen(&db);
    wait_for("the flush's failure", || {
        db.inner.write_error.lock().is_some()
    });
    let live: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    let closed = db.close();
    for wal in &live {
        let format = format_of(&std::fs::read(wal).unwrap(), true);
        assert!(!format.is_closed(), "{wal:?} closed after writes stopped");
    }
    check_closed_and_recovered(closed, dir.path(), fs, &written);
}

/// The flush stands held before its table file when the close begins,
/// then fails: the close waits for it, and returns its failure.
#[test]
fn a_background_failure_during_the_close_is_returned_by_it() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    fs.set_hold_table_files(true);
    let written = fill_until_frozen(&db);
    wait_for("the flush's start", || fs.table_files_waiting() > 0);
    assert!(db.inner.write_error.lock().is_none());
    let close = std::thread::spawn(move || db.close());
    // Refused first, then let go: the held flush fails whenever the close
    // has got to.
    fs.set_refuse_table_files(true);
    fs.set_hold_table_files(false);
    check_closed_and_recovered(close.join().unwrap(), dir.path(), fs, &written);
}
