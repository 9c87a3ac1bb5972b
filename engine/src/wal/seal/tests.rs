//! Which WALs a clean close seals: every live one, frozen or active, and
//! none a read-only store or a flushed memtable left.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::{Path, PathBuf};

use crate::wal::{WalFormat, format_of};
use crate::{Db, Options, SyncMode};

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        background_work: false,
        ..Options::default()
    }
}

fn wals(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

fn format(path: &Path) -> WalFormat {
    format_of(&std::fs::read(path).unwrap())
}

/// Freezes the active memtable without flushing it.
fn freeze(db: &Db) {
    let mut w = db.inner.write.lock();
    db.inner.rotate_memtable(&mut w).unwrap();
}

#[test]
fn a_clean_close_seals_a_frozen_wal_and_the_active_one() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"a", b"1").unwrap();
    freeze(&db);
    let live = wals(dir.path());
    assert_eq!(live.len(), 2, "a frozen WAL and the active one");
    for wal in &live {
        assert_eq!(format(wal), WalFormat::Headed { synced: false });
    }
    db.close().unwrap();
    // The newest holds the close marker, and its header says so.
    let (newest, older) = live.split_last().unwrap();
    for wal in older {
        assert_eq!(format(wal), WalFormat::Headed { synced: true }, "{wal:?}");
    }
    assert_eq!(format(newest), WalFormat::Closed, "{newest:?}");
    let db = Db::open_read_only(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.stats().wal_replay_cut, None);
}

#[test]
fn a_flushed_wal_still_open_for_close_is_not_sealed_nor_recreated() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"a", b"1").unwrap();
    freeze(&db);
    // The flush deletes the frozen WAL; its writer stays among the
    // frozen ones until the next rotation, and close fsyncs it.
    db.flush().unwrap();
    db.put(b"b", b"2").unwrap();
    assert_eq!(db.inner.write.lock().frozen_wals.len(), 1);
    let live = wals(dir.path());
    db.close().unwrap();
    assert_eq!(wals(dir.path()), live, "no WAL created by the seal");
    assert_eq!(live.len(), 1);
    assert_eq!(format(&live[0]), WalFormat::Closed);
}

#[test]
fn closing_a_read_only_store_leaves_its_wals_as_they_are() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = crate::fs::fault::FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), std::sync::Arc::new(fs.clone())).unwrap();
    db.put(b"a", b"1").unwrap();
    // A close whose fsync fails: the WAL keeps its unsynced header.
    fs.fail_only_op(fs.ops());
    assert!(db.close().is_err());
    let wal = wals(dir.path()).pop().unwrap();
    let before = std::fs::read(&wal).unwrap();
    assert_eq!(format_of(&before), WalFormat::Headed { synced: false });
    let db = Db::open_read_only(dir.path(), options()).unwrap();
    db.close().unwrap();
    assert_eq!(std::fs::read(&wal).unwrap(), before);
}

/// A background flush fails while no call of the caller's is running
/// (every put returned Ok before it failed): writes stop, so the close
/// writes no close marker, and it returns the failure rather than Ok, the
/// caller's only chance to hear of it. Every put is still recovered.
#[test]
fn a_background_failure_no_call_saw_is_returned_by_close() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = crate::fs::fault::FaultFs::new();
    let options = Options {
        memtable_bytes: 4 << 10,
        background_work: true,
        ..options()
    };
    let db =
        Db::open_with_fs(dir.path(), options.clone(), std::sync::Arc::new(fs.clone())).unwrap();
    fs.set_refuse_table_files(true);
    // Puts until the first memtable is frozen: its flush, in the
    // background, is refused.
    let mut written = Vec::new();
    while db.inner.current.load().imm.is_empty() {
        let key = format!("key{:05}", written.len()).into_bytes();
        db.put(&key, &[7; 100]).unwrap();
        written.push(key);
    }
    // Waits for the background flush to fail (no call of ours sees it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while db.inner.write_error.lock().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the flush never failed"
        );
        std::thread::yield_now();
    }
    let live = wals(dir.path());
    let closed = db.close();
    assert!(
        matches!(&closed, Err(crate::Error::WritesStopped(why)) if why.contains("refused")),
        "{closed:?}"
    );
    for wal in &live {
        assert_ne!(
            format(wal),
            WalFormat::Closed,
            "{wal:?} closed after writes stopped"
        );
    }
    fs.heal();
    fs.set_refuse_table_files(false);
    let db = Db::open_with_fs(dir.path(), options, std::sync::Arc::new(fs)).unwrap();
    for key in &written {
        assert_eq!(db.get(key).unwrap(), Some(vec![7; 100]), "{key:?}");
    }
    db.close().unwrap();
}

/// The same failure while the close waits for the background threads:
/// the flush stands held before its table file when the close begins, then
/// fails. The close waits for it, and returns its failure.
#[test]
fn a_background_failure_during_the_close_is_returned_by_it() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = crate::fs::fault::FaultFs::new();
    let options = Options {
        memtable_bytes: 4 << 10,
        background_work: true,
        ..options()
    };
    let db =
        Db::open_with_fs(dir.path(), options.clone(), std::sync::Arc::new(fs.clone())).unwrap();
    fs.set_hold_table_files(true);
    let mut written = Vec::new();
    while db.inner.current.load().imm.is_empty() {
        let key = format!("key{:05}", written.len()).into_bytes();
        db.put(&key, &[7; 100]).unwrap();
        written.push(key);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while fs.table_files_waiting() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the flush never started"
        );
        std::thread::yield_now();
    }
    assert!(db.inner.write_error.lock().is_none());
    let close = std::thread::spawn(move || db.close());
    // Refused first, then let go: the held flush fails whenever the close
    // has got to.
    fs.set_refuse_table_files(true);
    fs.set_hold_table_files(false);
    let closed = close.join().unwrap();
    assert!(
        matches!(&closed, Err(crate::Error::WritesStopped(why)) if why.contains("refused")),
        "{closed:?}"
    );
    fs.heal();
    fs.set_refuse_table_files(false);
    let db = Db::open_with_fs(dir.path(), options, std::sync::Arc::new(fs)).unwrap();
    for key in &written {
        assert_eq!(db.get(key).unwrap(), Some(vec![7; 100]), "{key:?}");
    }
    db.close().unwrap();
}
