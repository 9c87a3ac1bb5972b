//! Shared helpers of the cross-crate reliability tests: deterministic keys
//! and values, a write history with deletes and its model, and checks of a
//! store's directory and contents.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

pub mod crash_workload;
pub mod rebuild_workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A copy of a store directory in a new [`scratch_dir`]: its files, all
/// but `LOCK` (a store is opened in its copy, which no one holds).
pub fn copy_store_dir(from: &Path) -> tempfile::TempDir {
    let to = scratch_dir();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.path().join(entry.file_name())).unwrap();
        }
    }
    to
}

/// A directory for a store driven through `FaultFs`: in memory
/// (`/dev/shm`) where there is one, or under `BLOOMLSM_TEST_TMPDIR`.
/// `FaultFs` keeps what was not synced and drops it at a simulated power
/// loss, so the device's own fsync adds nothing but time (hundreds of
/// crash points of synced writes: minutes on a disk, seconds in memory).
pub fn scratch_dir() -> tempfile::TempDir {
    let base = std::env::var_os("BLOOMLSM_TEST_TMPDIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::tempdir_in(base).unwrap()
}

/// The key of write number `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// The value of write number `i` (long enough to fill blocks quickly).
pub fn value(i: u64) -> Vec<u8> {
    format!("value-{i:08}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// Table files (`*.sst`) in a store directory.
pub fn table_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sst")
        })
        .count()
}

/// The one table file (`*.sst`) in a store directory. Panics (the failure
/// report) when there is none.
pub fn only_table(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap()
}

/// A store of one table, flushed from `keys` (each put with the value
/// `value`) and closed: its directory and the table's path.
pub fn store_with_one_table(
    keys: impl IntoIterator<Item = String>,
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for k in keys {
        db.put(k.as_bytes(), b"value").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let table = only_table(dir.path());
    (dir, table)
}

/// Closes `db`, open on `dir`, and checks that its live tables are
/// exactly the table files left in `dir`: no orphan, none missing.
pub fn close_with_no_orphan_table(db: bloomlsm::Db, dir: &Path, what: &str) {
    let live = db.stats().total.tables;
    drop(db);
    assert_eq!(
        table_files(dir) as u64,
        live,
        "{what}: orphan or missing table"
    );
}

/// WAL files (`*.wal`) in a store directory.
pub fn wal_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")
        })
        .count()
}

/// The number of writes recovered: the length of the prefix 0..n of keys
/// present with their values. Panics on a hole (a later key present while
/// an earlier one is missing) or a wrong value.
pub fn recovered_prefix(db: &bloomlsm::Db, attempted: u64) -> u64 {
    let mut n = 0;
    while n < attempted && db.get(&key(n)).unwrap().is_some() {
        assert_eq!(
            db.get(&key(n)).unwrap(),
            Some(value(n)),
            "wrong value for write {n}"
        );
        n += 1;
    }
    for later in n..attempted {
        assert_eq!(
            db.get(&key(later)).unwrap(),
            None,
            "hole: write {later} survived but write {n} did not"
        );
    }
    n
}

/// Write number `i` of a history with deletes: `Some(value)` puts `key(i)`;
/// every third write (`i % 3 == 2`, the `m`-th delete) is `None`, a delete
/// of the key of the `m`-th put, about half-way back (by then usually in a
/// table, often deep). Every key is put once and deleted at most once, and
/// every delete removes a present key, so no two prefixes of the history
/// leave the same contents: the contents name the prefix.
pub fn history_write(i: u64) -> (Vec<u8>, Option<Vec<u8>>) {
    if i % 3 != 2 {
        return (key(i), Some(value(i)));
    }
    let m = i / 3;
    (key(3 * (m / 2) + m % 2), None)
}

/// Applies write `i` of [`history_write`] to `db`.
pub fn apply_history_write(db: &bloomlsm::Db, i: u64) -> bloomlsm::Result<()> {
    match history_write(i) {
        (k, Some(v)) => db.put(&k, &v),
        (k, None) => db.delete(&k),
    }
}

/// Applies write `i` of [`history_write`] to a model.
pub fn apply_history_model(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, i: u64) {
    match history_write(i) {
        (k, Some(v)) => model.insert(k, v),
        (k, None) => model.remove(&k),
    };
}

/// The store's contents by a full scan.
pub fn contents(db: &bloomlsm::Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// The number of writes of [`history_write`] recovered: the `r <=
/// attempted` such that the store holds exactly writes `0..r`. Panics when
/// it holds no prefix of the history (a hole: a later write survived an
/// earlier one; or a value never written), naming the keys that differ
/// from the closest prefix.
pub fn recovered_history(db: &bloomlsm::Db, attempted: u64) -> u64 {
    history_prefix(db, attempted).unwrap_or_else(|why| panic!("{why}"))
}

/// [`recovered_history`], with the explanation as an error instead of a panic.
pub fn history_prefix(db: &bloomlsm::Db, attempted: u64) -> Result<u64, String> {
    let got = contents(db);
    let mut model = BTreeMap::new();
    let mut best = (got == model).then_some(0);
    for i in 0..attempted {
        apply_history_model(&mut model, i);
        if got == model {
            best = Some(i + 1);
        }
    }
    if let Some(r) = best {
        return Ok(r);
    }
    // Explain with the prefix closest to the store: fewest keys differing.
    let mut model = BTreeMap::new();
    let mut differing = got.len();
    let mut best = (differing, 0);
    for i in 0..attempted {
        let k = history_write(i).0;
        let before = got.get(&k) != model.get(&k);
        apply_history_model(&mut model, i);
        let after = got.get(&k) != model.get(&k);
        differing = differing + usize::from(after) - usize::from(before);
        if differing < best.0 {
            best = (differing, i + 1);
        }
    }
    let n = best.1;
    let mut model = BTreeMap::new();
    for i in 0..n {
        apply_history_model(&mut model, i);
    }
    let diff = first_differences(&got, &model, "prefix");
    Err(format!(
        "the store holds no prefix of the history ({} keys, {attempted} writes attempted): \
         closest is the first {n} writes, {} keys differ: {diff:?}",
        got.len(),
        best.0
    ))
}

/// Up to four keys on which `got` (a store's contents) and `want` (a model
/// of writes, named `want_name`) differ, each with both values, for a
/// failure message.
pub fn first_differences(
    got: &BTreeMap<Vec<u8>, Vec<u8>>,
    want: &BTreeMap<Vec<u8>, Vec<u8>>,
    want_name: &str,
) -> Vec<String> {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    keys.into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .take(4)
        .map(|k| {
            format!(
                "{}: store {:?}, {want_name} {:?}",
                s(k),
                got.get(k).map(|v| s(v)),
                want.get(k).map(|v| s(v))
            )
        })
        .collect()
}
