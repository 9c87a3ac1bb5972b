//! A store whose WAL ends in a torn record (a crash mid-append, written
//! without fsync) opens with the writes before it, as the library does;
//! the command says so on stderr, naming the WAL, the offset and the
//! bytes not replayed: `get`, `scan` and `trace` (read-only: nothing is
//! dropped on disk, and the note says the next `put` or `delete` drops
//! them), and `put` and `delete`, whose open drops them for good. Before,
//! only `stats` showed it (`wal_replay_cut`): a `get` of the torn write said
//! `not found` and a `put` made the loss permanent without a word.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::process::Output;

use bloomlsm::{Db, Options};
use common::bloomlsm;

fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Twenty puts, one WAL record each, copied while the store is open (a
/// crash's image: no close marker), the last record torn by 3 bytes.
/// Returns the copy and its WAL's name and length.
fn crashed_store_with_a_torn_tail() -> (tempfile::TempDir, String, u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..20 {
        db.put(format!("key{i:02}").as_bytes(), b"value").unwrap();
    }
    let copy = bloomlsm_tests::copy_store_dir(dir.path());
    db.close().unwrap();
    let wal = std::fs::read_dir(copy.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wal"))
        .unwrap();
    let len = std::fs::metadata(&wal).unwrap().len() - 3;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len)
        .unwrap();
    let name = wal.file_name().unwrap().to_str().unwrap().to_string();
    (copy, name, len)
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn a_torn_wal_tail_is_noted_by_every_command_that_opens_the_store() {
    let (dir, wal, len) = crashed_store_with_a_torn_tail();
    let d = dir.path().to_str().unwrap();
    let before = files(dir.path());

    // Where replay stopped, as stats reports it.
    let out = bloomlsm(&["--json", "stats", d]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cut = &v["wal_replay_cut"];
    let offset = cut["offset"].as_u64().unwrap();
    let dropped = cut["bytes_not_replayed"].as_u64().unwrap();
    assert_eq!(offset + dropped, len, "{v}");
    let says = |err: &str| {
        err.starts_with("note: ")
            && err.contains(&wal)
            && err.contains(&format!("offset {offset}"))
            && err.contains(&format!("{dropped} bytes"))
            && err.lines().count() == 1
    };

    // The study commands: the answer without the torn write, and the note.
    let out = bloomlsm(&["get", d, "key19"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(says(&err) && err.contains("next put or delete"), "{err}");
    let out = bloomlsm(&["get", d, "key18"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(says(&stderr(&out)), "{out:?}");
    let out = bloomlsm(&["--json", "scan", d]);
    assert!(out.status.success(), "{out:?}");
    let pairs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pairs.as_array().unwrap().len(), 19);
    assert!(says(&stderr(&out)), "{out:?}");
    let out = bloomlsm(&["trace", d, "key19"]);
    assert!(out.status.success() && says(&stderr(&out)), "{out:?}");
    assert_eq!(
        files(dir.path()),
        before,
        "a study command changed the store"
    );

    // put: its open drops the torn record for good, and says so.
    let out = bloomlsm(&["put", d, "new", "v"]);
    assert!(out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert!(says(&err) && err.contains("dropped"), "{err}");

    // Nothing is cut any more: no note, the torn write gone, the new one there.
    let out = bloomlsm(&["get", d, "key19"]);
    assert_eq!((out.status.code(), stderr(&out)), (Some(1), String::new()));
    let out = bloomlsm(&["get", d, "new"]);
    assert_eq!((out.status.code(), stderr(&out)), (Some(0), String::new()));
}

/// A store closed cleanly has nothing cut: no note.
#[test]
fn a_whole_wal_is_not_noted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = bloomlsm(&["put", d, "a", "1"]);
    assert_eq!(stderr(&out), "");
    for args in [vec!["get", d, "a"], vec!["scan", d], vec!["trace", d, "a"]] {
        let out = bloomlsm(&args);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(stderr(&out), "", "{args:?}");
    }
    let out = bloomlsm(&["delete", d, "a"]);
    assert_eq!((out.status.code(), stderr(&out)), (Some(0), String::new()));
}
