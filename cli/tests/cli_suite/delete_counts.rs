//! `delete` says what it wrote: a tombstone per key given. It printed
//! `deleted 1` for a key the store never held, read as "one key removed"
//! where nothing was (deleting an absent key is no error, and writes a
//! tombstone all the same).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

#[test]
fn delete_counts_tombstones_not_keys_removed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    assert!(bloomlsm(&["put", db, "a", "1"]).status.success());
    let out = bloomlsm(&["delete", db, "never-written", "a"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "tombstones_written  2\nsmallest_key        a\nlargest_key         never-written\n"
    );
}
