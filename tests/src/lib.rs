//! Shared helpers of the cross-crate reliability tests: deterministic keys
//! and values, a write history with deletes and its model, and checks of a
//! store's directory and contents.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;

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
/// earlier one; or a value never written), naming the first difference
/// from the longest prefix it matches up to there.
pub fn recovered_history(db: &bloomlsm::Db, attempted: u64) -> u64 {
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
        return r;
    }
    // Explain with the longest prefix whose writes are all present.
    let mut model = BTreeMap::new();
    let mut n = 0;
    while n < attempted {
        let (k, v) = history_write(n);
        if got.get(&k) != v.as_ref() && v.is_some() {
            break;
        }
        apply_history_model(&mut model, n);
        n += 1;
    }
    let diff = got
        .iter()
        .find(|(k, v)| model.get(*k) != Some(*v))
        .map(|(k, v)| {
            format!(
                "{} = {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )
        })
        .or_else(|| {
            model
                .keys()
                .find(|k| !got.contains_key(*k))
                .map(|k| format!("{} missing", String::from_utf8_lossy(k)))
        });
    panic!(
        "the store holds no prefix of the history ({} keys, {attempted} writes attempted): \
         after the first {n} writes, first difference: {diff:?}",
        got.len()
    );
}
