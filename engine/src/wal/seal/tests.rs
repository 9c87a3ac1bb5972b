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
    format_of(&std::fs::read(path).unwrap(), true)
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
    let salts: Vec<Option<u64>> = live.iter().map(|wal| format(wal).salt()).collect();
    for (wal, &salt) in live.iter().zip(&salts) {
        assert!(salt.is_some(), "{wal:?} has no salt (version 3)");
        assert_eq!(
            format(wal),
            WalFormat::Headed {
                synced: false,
                salt
            }
        );
    }
    assert_ne!(salts[0], salts[1], "two WAL files with one salt");
    db.close().unwrap();
    // The newest holds the close marker, and its header says so; the
    // rewrite keeps each file's salt, which its records' checksums cover.
    let (newest, older) = live.split_last().unwrap();
    for (wal, &salt) in older.iter().zip(&salts) {
        assert_eq!(
            format(wal),
            WalFormat::Headed { synced: true, salt },
            "{wal:?}"
        );
    }
    let salt = salts[salts.len() - 1];
    assert_eq!(format(newest), WalFormat::Closed { salt }, "{newest:?}");
    let db = Db::open_read_only(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.stats().wal_replay_cut, None);
}

#[test]
fn a_flushed_wal_is_not_sealed_nor_recreated() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"a", b"1").unwrap();
    freeze(&db);
    // The flush deletes the frozen WAL and closes its writer with it
    // (`install.rs`): the close has nothing of it to fsync or seal.
    db.flush().unwrap();
    db.put(b"b", b"2").unwrap();
    assert_eq!(db.inner.frozen_wals.lock().len(), 0);
    let live = wals(dir.path());
    db.close().unwrap();
    assert_eq!(wals(dir.path()), live, "no WAL created by the seal");
    assert_eq!(live.len(), 1);
    assert!(format(&live[0]).is_closed());
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
    assert!(matches!(
        format_of(&before, true),
        WalFormat::Headed { synced: false, .. }
    ));
    let db = Db::open_read_only(dir.path(), options()).unwrap();
    db.close().unwrap();
    assert_eq!(std::fs::read(&wal).unwrap(), before);
}
