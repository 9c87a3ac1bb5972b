//! A WAL that a clean close sealed (its header says a close marker ends
//! it) but whose end is gone, cut at a record boundary: under
//! `--wal-recovery point-in-time` the library opens the store with what
//! is left and reports a cut of 0 bytes (`Stats::wal_replay_cut`: "its
//! end, marker and maybe writes, is lost", no byte of it left to count).
//! Writes may be lost there, so `get`, `scan`, `trace` say so on stderr as
//! for any other cut, and `put` / `delete`, whose open makes the loss
//! permanent, say so too. Before, a cut of 0 bytes was taken for "nothing
//! lost" and never noted: a get of the lost write answered `not found`
//! and a put made the loss permanent without a word.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;
use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// Where replay stopped, as `stats` reports it: (wal, offset, bytes).
fn cut(d: &str) -> (String, u64, u64) {
    let out = bloomlsm(&["--json", "--wal-recovery", "point-in-time", "stats", d]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["wal_replay_cut"];
    (
        c["wal"].as_str().unwrap().to_string(),
        c["offset"].as_u64().unwrap(),
        c["bytes_not_replayed"].as_u64().unwrap(),
    )
}

#[test]
fn a_sealed_wal_whose_end_is_gone_is_noted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // `a` goes to a table at the second put's open; `b` stays in the
    // newest WAL, sealed by the clean close with a close marker.
    assert!(bloomlsm(&["put", d, "a", "1"]).status.success());
    assert!(bloomlsm(&["put", d, "b", "2"]).status.success());
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .max()
        .unwrap();
    // Keep the WAL's 24-byte header (version 3) only: `b`'s record and the marker are
    // gone, cut at a record boundary (no torn byte left).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(24)
        .unwrap();
    let (cut_wal, offset, bytes) = cut(d);
    assert!(cut_wal.ends_with(wal.file_name().unwrap().to_str().unwrap()));
    assert_eq!((offset, bytes), (24, 0), "the scenario: a cut of 0 bytes");
    let says = |err: &str| {
        err.starts_with("note: ")
            && err.contains(&cut_wal)
            && err.contains("offset 24")
            && err.lines().count() == 1
    };

    // The study commands: `b` is not found, and the note says why.
    let pit = ["--wal-recovery", "point-in-time"];
    let out = bloomlsm(&[&pit[..], &["get", d, "b"]].concat());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(
        says(&err) && err.contains("next put or delete under --wal-recovery point-in-time"),
        "{err}"
    );
    for args in [vec!["scan", d], vec!["trace", d, "b"]] {
        let out = bloomlsm(&[&pit[..], &args].concat());
        assert!(out.status.success(), "{out:?}");
        assert!(says(&stderr(&out)), "{args:?}: {out:?}");
    }

    // put: its open makes the loss permanent, and says so.
    let out = bloomlsm(&[&pit[..], &["put", d, "c", "3"]].concat());
    assert!(out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert!(says(&err) && err.contains("this open"), "{err}");

    // Nothing is cut any more: no note.
    let out = bloomlsm(&["get", d, "c"]);
    assert_eq!((out.status.code(), stderr(&out)), (Some(0), String::new()));
}
