//! Keys and values written by an application may hold newlines, tabs and
//! NULs; the text output escapes them, so a record stays one line of its
//! table (JSON escapes them by itself).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

#[test]
fn a_value_with_a_newline_stays_on_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    db.put(b"tab\tkey", b"line1\nline2").unwrap();
    db.put(b"nul\0key", b"v").unwrap();
    db.close().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["scan", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // A header and one row per pair.
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains(r"line1\nline2"), "{text}");
    assert!(text.contains(r"tab\tkey"), "{text}");
    assert!(text.contains(r"nul\u{0}key"), "{text}");
}

/// A backslash is escaped too (`\\`), so an escape reads one way: a key
/// holding a newline and a key holding a backslash then `n` printed the
/// same `a\nb`, two rows a reader could not tell apart.
#[test]
fn a_backslash_in_a_key_is_not_read_as_an_escape() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    db.put(b"a\nb", b"newline").unwrap();
    db.put(b"a\\nb", b"backslash").unwrap();
    db.close().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["scan", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let keys: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(keys, [r"a\nb", r"a\\nb"], "{text}");
}
