//! A clean close seals the WALs of a `SyncMode::Never` store: once the
//! close has fsynced every live WAL, their headers say "synced", so damage
//! found in them later (a bit flipped on the device) is refused as
//! corruption instead of silently ending the log there. A crash anywhere
//! in the close loses no fsynced write and never fails the open; a store
//! whose writes stopped, or whose close could not fsync, is not sealed.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, OverwriteFate, UnsyncedFate};
use bloomlsm::{Db, Error, Options, SyncMode, WriteBatch};

/// Writes of the history.
const WRITES: u64 = 300;

/// `SyncMode::Never`, small memtables (a WAL rotation every few dozen
/// writes), inline work: the same operations every run.
fn never_options() -> Options {
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 4 << 10,
        background_work: false,
        ..Options::default()
    }
}

use common::{Model, contents};

/// Step `i` of a history with deletes and batches: a put of key `i`;
/// every 5th step also deletes key `i - 3` in the same batch, every 7th
/// step deletes key `i - 1` alone.
fn apply_step(db: &Db, model: &mut Model, i: u64) -> bloomlsm::Result<()> {
    if i % 7 == 6 {
        db.delete(&common::key(i - 1))?;
        model.remove(&common::key(i - 1));
        return Ok(());
    }
    let mut batch = WriteBatch::new();
    batch.put(&common::key(i), &common::value(i));
    if i % 5 == 4 {
        batch.delete(&common::key(i - 3));
    }
    db.write(batch)?;
    model.insert(common::key(i), common::value(i));
    if i % 5 == 4 {
        model.remove(&common::key(i - 3));
    }
    Ok(())
}

/// Runs the history on `db`; returns the model after each step (index 0:
/// before any).
fn run_history(db: &Db) -> Vec<Model> {
    let mut models = vec![Model::new()];
    let mut model = Model::new();
    for i in 0..WRITES {
        apply_step(db, &mut model, i).unwrap();
        models.push(model.clone());
    }
    models
}

fn wals(dir: &Path) -> Vec<PathBuf> {
    common::listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| dir.join(n))
        .collect()
}

/// Whether the WAL at `path` has an intact header with the SYNCED flag
/// (`engine/src/wal/header.rs`: magic, version 3, flags, salt, crc32).
fn says_synced(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..10], b"bloomWAL\x03\x00", "{path:?}");
    let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!(crc, crc32(&bytes[..20]), "{path:?}: a damaged header");
    u16::from_le_bytes([bytes[10], bytes[11]]) & 1 == 1
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The records of WAL bytes `bytes`: how many.
fn record_count(bytes: &[u8]) -> usize {
    let mut n = 0;
    while common::wal_record_offset(bytes, n) < bytes.len() {
        n += 1;
    }
    n
}

/// The corruption error of an open of `dir` (read-only or not), or a
/// panic naming what the open recovered.
fn refusal(read_only: bool, dir: &Path) -> (PathBuf, u64) {
    let opened = common::open_either(dir, Options::default(), read_only);
    match opened {
        Err(Error::Corruption { path, offset, .. }) => (path, offset),
        Err(e) => panic!("read-only {read_only}: not a corruption error: {e}"),
        Ok(db) => panic!(
            "read-only {read_only}: opened with {} keys, cut {:?}",
            contents(&db).len(),
            db.stats().wal_replay_cut
        ),
    }
}

#[test]
fn a_bit_flipped_in_a_cleanly_closed_never_mode_wal_is_refused_by_both_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), never_options()).unwrap();
    run_history(&db);
    let flushes = db.stats().flushes;
    assert!(
        flushes >= 3,
        "writes across several WALs: {flushes} flushes"
    );
    db.close().unwrap();
    let wal = common::newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let records = record_count(&bytes);
    assert!(records >= 10, "{records} records in the live WAL");
    // One bit inside a record's payload in the middle of the WAL.
    let at = common::wal_record_offset(&bytes, records / 2);
    bytes[at + 13] ^= 0x08;
    std::fs::write(&wal, bytes).unwrap();
    let (path, offset) = refusal(true, dir.path());
    assert_eq!((path, offset), (wal.clone(), at as u64));
    let (path, offset) = refusal(false, dir.path());
    assert_eq!((path, offset), (wal, at as u64));
}

/// The operations of a close that crashes nowhere, of the store left by
/// the history: (operations, live WALs it sealed).
fn close_ops() -> (u64, u64) {
    let dir = common::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), never_options(), Arc::new(fs.clone())).unwrap();
    run_history(&db);
    let live = wals(dir.path());
    let before = fs.ops();
    db.close().unwrap();
    for wal in &live {
        assert!(says_synced(wal), "{wal:?} not sealed by the clean close");
    }
    (fs.ops() - before, live.len() as u64)
}

#[test]
fn a_crash_anywhere_in_a_clean_close_keeps_every_fsynced_write() {
    let (ops, sealed) = close_ops();
    // A fsync of each WAL writer (one may be of a WAL already flushed and
    // deleted), then of each live WAL its header's overwrite and fsync.
    let fsyncs = ops - 2 * sealed;
    assert!(
        sealed >= 1 && fsyncs >= sealed,
        "{ops} operations, {sealed} WALs sealed"
    );
    let fates = [
        (OverwriteFate::Lost, UnsyncedFate::Truncated),
        (OverwriteFate::Applied, UnsyncedFate::Truncated),
        (OverwriteFate::Seeded(1), UnsyncedFate::Truncated),
        (OverwriteFate::Seeded(2), UnsyncedFate::Pages(2)),
        (OverwriteFate::Lost, UnsyncedFate::Pages(1)),
        (OverwriteFate::Applied, UnsyncedFate::Pages(3)),
    ];
    for crash_at in 0..=ops {
        for (overwrite, unsynced) in fates {
            let what =
                format!("crash at close op {crash_at} of {ops}, {overwrite:?}, {unsynced:?}");
            let dir = common::scratch_dir();
            let fs = FaultFs::new();
            fs.set_overwrite_fate(overwrite);
            fs.set_unsynced_fate(unsynced);
            let db = Db::open_with_fs(dir.path(), never_options(), Arc::new(fs.clone())).unwrap();
            let models = run_history(&db);
            fs.fail_from_op(fs.ops() + crash_at);
            let closed = db.close();
            assert_eq!(closed.is_ok(), crash_at == ops, "{what}: {closed:?}");
            fs.simulate_power_loss().unwrap();
            let recovered = |db: &Db| {
                let got = contents(db);
                if crash_at >= fsyncs {
                    // Every WAL fsync of the close returned.
                    assert!(got == models[WRITES as usize], "{what}: a write lost");
                } else {
                    assert!(models.contains(&got), "{what}: not a prefix");
                }
                got
            };
            let ro = Db::open_read_only(dir.path(), Options::default())
                .unwrap_or_else(|e| panic!("{what}: read-only open: {e}"));
            let ro_got = recovered(&ro);
            ro.close().unwrap();
            let rw = Db::open(dir.path(), Options::default())
                .unwrap_or_else(|e| panic!("{what}: open: {e}"));
            assert_eq!(recovered(&rw), ro_got, "{what}");
        }
    }
}

#[test]
fn a_close_whose_wal_fsync_fails_seals_nothing() {
    let dir = common::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), never_options(), Arc::new(fs.clone())).unwrap();
    run_history(&db);
    fs.fail_only_op(fs.ops());
    assert!(db.close().is_err());
    for wal in wals(dir.path()) {
        assert!(!says_synced(&wal), "{wal:?} sealed after a failed fsync");
    }
}

/// The operation number of the fsync of the header of the first WAL the
/// history starts by a rotation, and the step whose write rotates.
fn first_rotation_header_fsync() -> (u64, u64) {
    let dir = common::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), never_options(), Arc::new(fs.clone())).unwrap();
    let mut model = Model::new();
    let first = common::newest_wal(dir.path());
    for i in 0..WRITES {
        let before = fs.ops();
        apply_step(&db, &mut model, i).unwrap();
        if common::newest_wal(dir.path()) != first {
            // The append, the new WAL's create, its header's write, then
            // the header's fsync.
            return (before + 3, i);
        }
    }
    panic!("no rotation in {WRITES} writes");
}

#[test]
fn a_store_whose_writes_stopped_after_a_failed_fsync_is_not_sealed() {
    let (header_fsync, step) = first_rotation_header_fsync();
    let dir = common::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), never_options(), Arc::new(fs.clone())).unwrap();
    fs.fail_only_op(header_fsync);
    let mut model = Model::new();
    for i in 0..step {
        apply_step(&db, &mut model, i).unwrap();
    }
    // The write that rotates stands; the rotation's failure stops writes.
    apply_step(&db, &mut model, step).unwrap();
    assert_eq!(fs.faults_injected(), 1);
    let err = apply_step(&db, &mut model, step + 1).unwrap_err();
    assert!(
        matches!(&err, Error::WritesStopped(why) if why.operation() == "creating a new WAL"),
        "{err}"
    );
    // Every fsync of the close succeeds, yet the store is not healthy:
    // the close seals nothing and says why.
    let closed = db.close();
    assert!(
        matches!(&closed, Err(Error::WritesStopped(why)) if why.operation() == "creating a new WAL"),
        "{closed:?}"
    );
    let live = wals(dir.path());
    assert!(!live.is_empty());
    for wal in live {
        if std::fs::metadata(&wal).unwrap().len() >= 16 {
            assert!(!says_synced(&wal), "{wal:?} sealed after writes stopped");
        }
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(contents(&db), model);
}

/// A clean close's header rewrite torn inside its sector on every live
/// WAL (a device that tears a sector anyway): the new flags, the old
/// header's checksum. The default open refuses each such WAL (a damaged
/// header, offset 0), and `WalRecovery::PointInTime` opens the store with
/// every acknowledged write, read-only and then read-write (the salt at
/// bytes 12..20 is the same in both headers). Failed before
/// `wal::salvaged_records`: the point-in-time open cut each WAL at byte 0
/// and lost every write not yet in a table.
#[test]
fn a_seal_rewrite_torn_inside_its_sector_opens_whole_at_a_point_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), never_options()).unwrap();
    let models = run_history(&db);
    db.close().unwrap();
    let records = record_count(&std::fs::read(common::newest_wal(dir.path())).unwrap());
    assert!(records >= 10, "{records} records in the live WAL");
    for wal in wals(dir.path()) {
        assert!(says_synced(&wal), "{wal:?} not sealed");
        let mut bytes = std::fs::read(&wal).unwrap();
        // The header before the seal: flags 0 (SyncMode::Never), same salt.
        let mut old = bytes[..24].to_vec();
        old[10..12].fill(0);
        let crc = crc32(&old[..20]);
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&wal, bytes).unwrap();
    }
    for read_only in [true, false] {
        let (_, offset) = refusal(read_only, dir.path());
        assert_eq!(offset, 0, "read-only {read_only}");
    }
    let pit = Options {
        wal_recovery: bloomlsm::WalRecovery::PointInTime,
        ..Options::default()
    };
    let torn = wals(dir.path());
    for read_only in [true, false] {
        let db = common::open_either(dir.path(), pit.clone(), read_only).unwrap();
        assert!(
            contents(&db) == models[WRITES as usize],
            "read-only {read_only}: acknowledged writes lost"
        );
        // The open says which headers it read past.
        let stats = db.stats();
        assert_eq!(stats.wal_headers_salvaged, torn, "read-only {read_only}");
        assert_eq!(stats.wal_replay_cut, None, "read-only {read_only}");
        db.close().unwrap();
    }
    // The read-write open flushed them: a default open finds them too,
    // and no damaged header.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(contents(&db) == models[WRITES as usize]);
    assert!(db.stats().wal_headers_salvaged.is_empty());
}

/// review27: a clean close of a `SyncMode::Never` store whose live WAL
/// holds no write (the reopen flushed every replayed write into a table)
/// still rewrites that WAL's header (unsynced to synced), with nothing
/// after it. The rewrite torn inside its sector leaves a 24-byte file
/// that never held a record: every open, both modes, read-only or not,
/// holds every write and reports no `wal_replay_cut`. Failed before
/// `wal::header::header_only`: each open reported a cut of the header's
/// 24 bytes at offset 0 (`TornTail` or `PointInTime`), a warning that
/// writes were dropped where none was.
#[test]
fn a_torn_seal_of_a_wal_holding_no_write_is_no_cut() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), never_options()).unwrap();
    let models = run_history(&db);
    db.close().unwrap();
    // The reopen turns the WALs into a table; its own WAL stays empty.
    Db::open(dir.path(), never_options())
        .unwrap()
        .close()
        .unwrap();
    let live = wals(dir.path());
    assert_eq!(live.len(), 1, "{live:?}");
    let mut bytes = std::fs::read(&live[0]).unwrap();
    assert_eq!(bytes.len(), 24, "a WAL of a header alone");
    assert!(says_synced(&live[0]), "sealed");
    // The new flags (synced) over the old header's checksum (flags 0).
    let mut old = bytes[..24].to_vec();
    old[10..12].fill(0);
    let crc = crc32(&old[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&live[0], bytes).unwrap();
    for mode in [
        bloomlsm::WalRecovery::TolerateTornTail,
        bloomlsm::WalRecovery::PointInTime,
    ] {
        let options = Options {
            wal_recovery: mode,
            ..Options::default()
        };
        let db = common::open_either(dir.path(), options, true).unwrap();
        assert!(contents(&db) == models[WRITES as usize], "{mode:?}");
        assert_eq!(
            db.stats().wal_replay_cut,
            None,
            "{mode:?}: no write dropped"
        );
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(contents(&db) == models[WRITES as usize]);
    assert_eq!(
        db.stats().wal_replay_cut,
        None,
        "read-write: no write dropped"
    );
}
