//! Corruption sweeps on a real store: a flipped byte in a table (any
//! block), the manifest or the WAL is detected or harmless; it is never
//! returned as data. A flipped filter block never causes a false negative.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::{key, value};

const KEYS: u64 = 400;

fn options() -> Options {
    Options {
        memtable_bytes: 8 << 10,
        block_size: 512,
        l0_compaction_trigger: 8,
        background_work: false,
        ..Options::default()
    }
}

/// A store with several tables, and the last 40 writes only in the WAL,
/// written with `sync`, then closed cleanly (which seals the WAL as
/// synced, `engine/src/wal/seal.rs`).
fn build(dir: &Path, sync: SyncMode) {
    let db = Db::open(dir, Options { sync, ..options() }).unwrap();
    write_all(&db);
    db.close().unwrap();
}

/// [`build`] in `SyncMode::Never`, the store ended as a crash ends it:
/// the close's WAL fsync fails, so the WAL's header still says it was
/// never fsynced, while every byte written is in it (`FaultFs` writes
/// through, and no power loss is simulated).
fn build_unsealed(dir: &Path) {
    let fs = FaultFs::new();
    let never = Options {
        sync: SyncMode::Never,
        ..options()
    };
    let db = Db::open_with_fs(dir, never, Arc::new(fs.clone())).unwrap();
    write_all(&db);
    fs.fail_only_op(fs.ops());
    assert!(db.close().is_err(), "the close's fsync was to fail");
}

fn write_all(db: &Db) {
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    for i in KEYS..KEYS + 40 {
        db.put(&key(i), &value(i)).unwrap();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    RefusedAtOpen,
    ReadError,
    AllCorrect,
    WalTailDropped,
}

/// Which writes a flipped byte may cost without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MayLose {
    /// None (a table or the manifest).
    Nothing,
    /// Only the last write: in a WAL whose records were each fsynced,
    /// only the last record may be taken for a torn tail.
    LastWrite,
    /// A suffix of the WAL's writes: in a WAL written without fsync and
    /// not sealed by a clean close, damage ends the log at the damaged
    /// record (what a power loss writing pages back out of order leaves).
    WalSuffix,
}

/// Opens the damaged copy and reads every key: any value returned must be
/// the one written, and missing keys only as `may_lose` allows.
fn check(dir: &Path, may_lose: MayLose, what: &str) -> Outcome {
    let Ok(db) = Db::open(dir, options()) else {
        return Outcome::RefusedAtOpen;
    };
    let mut outcome = Outcome::AllCorrect;
    let mut first_lost = None;
    for i in 0..KEYS + 40 {
        match db.get(&key(i)) {
            Ok(Some(v)) => {
                assert_eq!(v, value(i), "wrong value returned for key {i}");
                assert!(
                    first_lost.is_none(),
                    "{what}: key {i} recovered after lost key {first_lost:?}: a hole"
                );
            }
            Ok(None) => {
                // One write per record.
                let allowed = match may_lose {
                    MayLose::Nothing => false,
                    MayLose::LastWrite => i == KEYS + 39,
                    MayLose::WalSuffix => i >= KEYS,
                };
                assert!(allowed, "{what}: key {i} silently lost");
                first_lost.get_or_insert(i);
                outcome = Outcome::WalTailDropped;
            }
            Err(e) => {
                assert!(
                    e.is_corruption() || matches!(e, bloomlsm::Error::Table(_)),
                    "{e}"
                );
                outcome = Outcome::ReadError;
            }
        }
    }
    outcome
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == ext) || p.file_name().is_some_and(|n| n == ext)
        })
        .collect();
    v.sort();
    v
}

fn sweep(
    original: &Path,
    file_name: &std::ffi::OsStr,
    stride: usize,
    may_lose: MayLose,
) -> std::collections::BTreeMap<String, usize> {
    let len = std::fs::metadata(original.join(file_name)).unwrap().len() as usize;
    let mut counts = std::collections::BTreeMap::new();
    for at in (0..len).step_by(stride) {
        let work = tempfile::tempdir().unwrap();
        copy_dir(original, work.path());
        let path = work.path().join(file_name);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at] ^= 0x41;
        std::fs::write(&path, bytes).unwrap();
        *counts
            .entry(format!(
                "{:?}",
                check(work.path(), may_lose, &format!("{file_name:?} byte {at}"))
            ))
            .or_insert(0) += 1;
    }
    counts
}

#[test]
fn table_manifest_and_wal_flips() {
    let original = tempfile::tempdir().unwrap();
    build(original.path(), SyncMode::Always);
    let table = files(original.path(), "sst").remove(0);
    let name = table.file_name().unwrap().to_owned();
    // Every 7th byte of a table: data, filter, index, properties, footer.
    let counts = sweep(original.path(), &name, 7, MayLose::Nothing);
    println!("table {name:?}: {counts:?}");
    let manifest = sweep(
        original.path(),
        std::ffi::OsStr::new("MANIFEST"),
        1,
        MayLose::Nothing,
    );
    println!("manifest (every byte): {manifest:?}");
    assert_eq!(
        manifest.get("AllCorrect"),
        None,
        "a manifest flip went unnoticed"
    );
    let wal = files(original.path(), "wal").pop().unwrap();
    let wal_counts = sweep(
        original.path(),
        wal.file_name().unwrap(),
        3,
        MayLose::LastWrite,
    );
    println!("wal, each record fsynced (every 3rd byte): {wal_counts:?}");
    assert!(wal_counts.contains_key("RefusedAtOpen"), "{wal_counts:?}");

    let unsynced = tempfile::tempdir().unwrap();
    build_unsealed(unsynced.path());
    let wal = files(unsynced.path(), "wal").pop().unwrap();
    let wal_counts = sweep(
        unsynced.path(),
        wal.file_name().unwrap(),
        3,
        MayLose::WalSuffix,
    );
    println!("wal, never fsynced (every 3rd byte): {wal_counts:?}");
    assert!(wal_counts.contains_key("WalTailDropped"), "{wal_counts:?}");

    // Written without fsync, then closed cleanly: the close fsynced every
    // record and sealed the header, so a flip is read as strictly as in a
    // WAL whose records were each fsynced.
    let sealed = tempfile::tempdir().unwrap();
    build(sealed.path(), SyncMode::Never);
    let wal = files(sealed.path(), "wal").pop().unwrap();
    let wal_counts = sweep(
        sealed.path(),
        wal.file_name().unwrap(),
        3,
        MayLose::LastWrite,
    );
    println!("wal, never fsynced, sealed at close (every 3rd byte): {wal_counts:?}");
    assert!(wal_counts.contains_key("RefusedAtOpen"), "{wal_counts:?}");
}

#[test]
fn damaged_filter_block_degrades_to_reading_the_table() {
    let original = tempfile::tempdir().unwrap();
    build(original.path(), SyncMode::Never);
    for table in files(original.path(), "sst") {
        let t = bloomlsm_sstable::Table::open_path(&table, 0, None).unwrap();
        let filter = t.footer().filter;
        let mut bytes = std::fs::read(&table).unwrap();
        for at in (filter.offset..filter.offset + filter.size).step_by(13) {
            bytes[at as usize] ^= 0xff;
        }
        std::fs::write(&table, bytes).unwrap();
    }
    let db = Db::open(original.path(), options()).unwrap();
    for i in 0..KEYS + 40 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
    let stats = db.stats();
    assert!(stats.total.tables_without_usable_filter > 0);
    println!(
        "{} tables read without their filter; every key found",
        stats.total.tables_without_usable_filter
    );
}

#[test]
fn table_size_mismatch_and_newer_format_are_refused_untouched() {
    let original = tempfile::tempdir().unwrap();
    build(original.path(), SyncMode::Never);
    // A table shorter than its manifest record is refused, untouched.
    let work = tempfile::tempdir().unwrap();
    copy_dir(original.path(), work.path());
    let table = files(work.path(), "sst").remove(0);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&table)
        .unwrap();
    let cut = f.metadata().unwrap().len() - 10;
    f.set_len(cut).unwrap();
    drop(f);
    let err = Db::open(work.path(), options()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("the manifest recorded"), "{err}");
    assert_eq!(std::fs::metadata(&table).unwrap().len(), cut);

    // Bytes past the recorded size (an in-place filter rebuild that never
    // reached the manifest) are not the table's: it opens as recorded,
    // every answer right.
    let work = tempfile::tempdir().unwrap();
    copy_dir(original.path(), work.path());
    let table = files(work.path(), "sst").remove(0);
    let mut bytes = std::fs::read(&table).unwrap();
    let recorded = bytes.len();
    // A whole stale table end: another table's last 200 bytes (its
    // properties and footer) and junk.
    let other = std::fs::read(files(work.path(), "sst").remove(1)).unwrap();
    bytes.extend_from_slice(&other[other.len() - 200..]);
    bytes.extend_from_slice(&[0xa5; 10]);
    std::fs::write(&table, &bytes).unwrap();
    assert_eq!(
        check(work.path(), MayLose::Nothing, "stale table end"),
        Outcome::AllCorrect
    );
    assert!(std::fs::metadata(&table).unwrap().len() > recorded as u64);

    // A manifest from a newer store format: refused with a typed error.
    let work = tempfile::tempdir().unwrap();
    copy_dir(original.path(), work.path());
    let path = work.path().join("MANIFEST");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    let mut h = crc32(&bytes[8..16]);
    h = crc32_continue(h, &bytes[20..]);
    bytes[16..20].copy_from_slice(&(!h).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let before: Vec<_> = files(work.path(), "sst");
    let err = Db::open(work.path(), options()).unwrap_err();
    assert!(
        matches!(err, bloomlsm::Error::UnsupportedFormat { found: 99, .. }),
        "{err}"
    );
    assert_eq!(files(work.path(), "sst"), before, "tables untouched");
}

fn crc32(bytes: &[u8]) -> u32 {
    crc32_continue(!0, bytes)
}

fn crc32_continue(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    crc
}
