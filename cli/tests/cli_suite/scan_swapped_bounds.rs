//! `scan --from B --to A` with B after A asks for a range that cannot hold
//! a key: it printed `(none)` and exited 0, as if the store held nothing
//! there, so a user who swapped the bounds learned nothing. It is a usage
//! error now: one line naming both bounds, exit status 2 (as clap's usage
//! errors), and nothing on stdout. Equal bounds are a range that is empty
//! by definition (`--from` included, `--to` excluded): still `(none)`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

/// A store holding `a`, `b` and `c`, through the command itself.
fn store_of_abc() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = bloomlsm(&["put", db.to_str().unwrap(), "a", "1", "b", "2", "c", "3"]);
    assert!(out.status.success(), "{out:?}");
    dir
}

#[test]
fn swapped_bounds_are_a_usage_error() {
    let dir = store_of_abc();
    let db = dir.path().join("db");
    for json in [false, true] {
        let mut args = vec!["scan", db.to_str().unwrap(), "--from", "c", "--to", "a"];
        if json {
            args.push("--json");
        }
        let out = bloomlsm(&args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(
            err.contains("--from \"c\"") && err.contains("--to \"a\""),
            "{err}"
        );
    }
}

#[test]
fn equal_bounds_are_an_empty_range() {
    let dir = store_of_abc();
    let db = dir.path().join("db");
    let out = bloomlsm(&["scan", db.to_str().unwrap(), "--from", "b", "--to", "b"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "(none)\n");
    // In order, the same bounds give the pairs between them.
    let out = bloomlsm(&["scan", db.to_str().unwrap(), "--from", "a", "--to", "c"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "key  value\na    1\nb    2\n"
    );
}
