//! A key or value with a space (or other whitespace) at either end prints
//! it escaped (`\u{20}`): the text output trims each line's end and pads
//! columns with spaces, so `get` printed the value `v ` as `v`, unlike its
//! JSON, and `scan` printed the keys `a` and `a ` as two identical rows.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

/// A store of `a`, `a ` and ` a` (values `plain`, `trailing`, `leading`)
/// and `v` holding `v ` (a trailing space).
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    db.put(b"a", b"plain").unwrap();
    db.put(b"a ", b"trailing").unwrap();
    db.put(b" a", b"leading").unwrap();
    db.put(b"v", b"v ").unwrap();
    db.put(b"nbsp", "x\u{a0}".as_bytes()).unwrap();
    db.close().unwrap();
    dir
}

fn text(args: &[&str]) -> String {
    let out = bloomlsm(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn scan_tells_keys_with_edge_spaces_apart() {
    let dir = store();
    let db = dir.path().to_str().unwrap();
    let out = text(&["scan", db, "--to", "b"]);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(
        rows,
        [r"\u{20}a  leading", r"a        plain", r"a\u{20}  trailing"],
        "{out}"
    );
}

#[test]
fn get_prints_a_trailing_space() {
    let dir = store();
    let db = dir.path().to_str().unwrap();
    let out = text(&["get", db, "v"]);
    assert!(out.contains("value  v\\u{20}\n"), "{out}");
    let out = text(&["get", db, "nbsp"]);
    assert!(out.contains("value  x\\u{a0}\n"), "{out}");
}
