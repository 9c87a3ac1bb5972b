//! `Error::WritesStopped` says which operation failed and what kind of
//! failure stopped writes (`WriteStop`): a full disk under the WAL or under a background flush
//! keeps its `StorageFull` through every later refusal and the close, and
//! damage a compaction found is corruption, so a caller can free space and
//! reopen, or repair, without parsing a message. Every acknowledged write
//! is in the reopened store.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Error, Options, StopCause, SyncMode, WriteStop};

use common::{key, scratch_dir, value};

fn options(background_work: bool) -> Options {
    Options {
        sync: SyncMode::Always,
        memtable_bytes: 8 << 10,
        background_work,
        ..Options::default()
    }
}

/// The stop `r` was refused with; panics (the failure report) otherwise.
fn stop_of<T: std::fmt::Debug>(r: bloomlsm::Result<T>, what: &str) -> WriteStop {
    match r {
        Err(Error::WritesStopped(stop)) => stop,
        other => panic!("{what}: expected WritesStopped, got {other:?}"),
    }
}

/// Reopens `dir` on a healed `fs`: every key of `written` reads its value,
/// and the store takes writes again.
fn reopen_holds(dir: &Path, fs: FaultFs, written: u64) {
    fs.heal();
    fs.set_refuse_table_files(false);
    let db = Db::open_with_fs(dir, options(false), Arc::new(fs)).unwrap();
    for i in 0..written {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}

#[test]
fn a_full_disk_under_the_wal_stops_writes_as_storage_full() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(false), Arc::new(fs.clone())).unwrap();
    for i in 0..50 {
        db.put(&key(i), &value(i)).unwrap();
    }
    fs.set_fault_kind(ErrorKind::StorageFull);
    fs.fail_from_op(fs.ops());
    let failed = db.put(&key(50), &value(50)).unwrap_err();
    assert_eq!(failed.io_kind(), Some(ErrorKind::StorageFull), "{failed}");
    assert!(!matches!(failed, Error::WritesStopped(_)), "{failed}");

    let stop = stop_of(db.put(&key(51), &value(51)), "the next put");
    assert_eq!(stop.io_kind(), Some(ErrorKind::StorageFull), "{stop}");
    assert_eq!(stop.operation(), "WAL append", "{stop}");
    assert!(stop.message().contains("injected fault"), "{stop}");
    assert!(!stop.is_corruption() && !stop.is_forked_copy(), "{stop:?}");
    for (what, r) in [
        ("flush", db.flush()),
        ("compact", db.compact()),
        ("delete", db.delete(&key(0))),
        ("wait", db.wait_for_background_work()),
    ] {
        let err = r.unwrap_err();
        // The refusal is not itself an I/O failure: retrying cannot help.
        assert_eq!(err.io_kind(), None, "{what}: {err}");
        assert_eq!(stop_of::<()>(Err(err), what), stop, "{what}");
    }
    // Reads go on.
    assert_eq!(db.get(&key(7)).unwrap(), Some(value(7)));
    // Space freed: the close's fsyncs succeed, and it names the stop.
    fs.heal();
    let closed = stop_of(db.close(), "the close");
    assert_eq!(closed, stop);
    reopen_holds(dir.path(), fs, 50);
}

/// No call of the caller's sees the background flush fail: the first it
/// hears of it is a later write's refusal (once the frozen memtables are
/// full), which names the full disk, as the close does.
#[test]
fn a_full_disk_under_a_background_flush_is_named_by_later_writes_and_the_close() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(true), Arc::new(fs.clone())).unwrap();
    fs.set_fault_kind(ErrorKind::StorageFull);
    fs.set_refuse_table_files(true);
    let mut written = 0;
    let stop = loop {
        assert!(written < 100_000, "writes never stopped");
        match db.put(&key(written), &value(written)) {
            Ok(()) => written += 1,
            Err(e) => break stop_of::<()>(Err(e), "a put"),
        }
    };
    assert_eq!(stop.io_kind(), Some(ErrorKind::StorageFull), "{stop}");
    assert_eq!(stop.operation(), "background work", "{stop}");
    assert!(stop.message().contains("refused"), "{stop}");
    assert!(!stop.is_corruption(), "{stop:?}");
    assert_eq!(stop_of(db.close(), "the close"), stop);
    reopen_holds(dir.path(), fs, written);
}

/// A data block damaged on disk: the compaction that reads it fails as
/// corruption, and every later write is refused as corruption too (not as
/// an I/O error), while the undamaged tables still answer.
#[test]
fn damage_a_compaction_reads_stops_writes_as_corruption() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(false)).unwrap();
    for i in 0..40 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    for i in 40..80 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    // The oldest table's first data block (it starts at offset 0).
    let tables = common::table_files(dir.path());
    assert_eq!(tables.len(), 2, "{tables:?}");
    let oldest = dir.path().join(&tables[0]);
    let mut bytes = std::fs::read(&oldest).unwrap();
    bytes[20] ^= 0x40;
    std::fs::write(&oldest, &bytes).unwrap();

    let db = Db::open(dir.path(), options(false)).unwrap();
    let failed = db.compact().unwrap_err();
    assert!(failed.is_corruption(), "{failed}");
    assert_eq!(failed.io_kind(), None, "{failed}");
    let stop = stop_of(db.put(b"new", b"write"), "a put after the damage");
    assert!(stop.is_corruption(), "{stop:?}");
    assert_eq!(stop.io_kind(), None, "{stop:?}");
    assert_eq!(stop.operation(), "compaction", "{stop}");
    assert_eq!(stop.cause(), StopCause::Corruption);
    // The refusal itself names no damaged file.
    let refused = db.put(b"new", b"write").unwrap_err();
    assert!(!refused.is_corruption(), "{refused}");
    // The newer table's keys still read.
    for i in 40..80 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    assert_eq!(stop_of(db.close(), "the close"), stop);
}
