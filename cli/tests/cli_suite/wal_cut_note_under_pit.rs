//! Under `--wal-recovery point-in-time` a study command opens a store past
//! damage that a plain open refuses (a damaged record mid-WAL in a WAL
//! fsynced record by record). Its note must not say that "the next put or
//! delete" drops the writes past the cut: a plain `put` refuses the store
//! (exit 2) and drops nothing; only one under the same flag drops them.
//! Before, the note said "the next put or delete drops them for good".
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options, SyncMode};
use common::bloomlsm;

/// Forty puts, each fsynced, copied while the store is open (a crash's
/// image), one byte in the middle of its WAL flipped (inside a record,
/// with intact records after it: damage, not a torn tail).
fn crashed_store_with_damage_mid_wal() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        sync: SyncMode::Always,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..40 {
        db.put(format!("key{i:02}").as_bytes(), b"value").unwrap();
    }
    let copy = bloomlsm_tests::copy_store_dir(dir.path());
    db.close().unwrap();
    let wal = std::fs::read_dir(copy.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wal"))
        .unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&wal, bytes).unwrap();
    copy
}

#[test]
fn the_note_says_which_put_drops_what_point_in_time_skipped() {
    let dir = crashed_store_with_damage_mid_wal();
    let d = dir.path().to_str().unwrap();
    // The scenario: a plain open refuses the store.
    let out = bloomlsm(&["get", d, "key00"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let out = bloomlsm(&["--wal-recovery", "point-in-time", "get", d, "key00"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("note: WAL replay stopped"), "{err}");
    assert!(
        err.contains("the next put or delete under --wal-recovery point-in-time drops them"),
        "{err}"
    );

    // What the note promises: a plain put refuses, dropping nothing.
    let out = bloomlsm(&["put", d, "new", "v"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = bloomlsm(&["--wal-recovery", "point-in-time", "put", d, "new", "v"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("this open dropped them for good"), "{err}");
}
