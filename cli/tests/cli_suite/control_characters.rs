//! Keys and values written by an application may hold newlines, tabs and
//! NULs; the text output escapes them, so a record stays one line of its
//! table (JSON escapes them by itself).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

/// What `scan` prints (text) for a store holding `pairs`.
fn scan_text(pairs: &[(&[u8], &[u8])]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for (k, v) in pairs {
        db.put(k, v).unwrap();
    }
    db.close().unwrap();
    let out = bloomlsm(&["scan", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_value_with_a_newline_stays_on_its_row() {
    let text = scan_text(&[(b"tab\tkey", b"line1\nline2"), (b"nul\0key", b"v")]);
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
    let text = scan_text(&[(b"a\nb", b"newline"), (b"a\\nb", b"backslash")]);
    let keys: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(keys, [r"a\nb", r"a\\nb"], "{text}");
}
