//! Shared helpers of the cross-crate reliability tests: deterministic keys
//! and values, and checks of a store's directory against its manifest.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

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
