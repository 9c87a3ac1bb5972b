//! Values that start with `-` reach the option they were given to.
//!
//! `scan --from -x` (a key starting with `-`) was refused as an unknown
//! flag, with clap's tip `use '-- -x'`, which does not work for an option's
//! value (`scan DB --from -- -x` is refused too): only `--from=-x` read
//! the key. Negative numbers were values only after the command's name, so
//! `bloomlsm --max-open-files -1 scan DB` was "unexpected argument '-1'"
//! with the top-level usage, where `scan DB --max-open-files -1` named the
//! flag and its bound.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

/// A store holding `-x`, `-y` and `b`, through the command itself.
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = bloomlsm(&[
        "put",
        db.to_str().unwrap(),
        "--",
        "-x",
        "1",
        "-y",
        "2",
        "b",
        "3",
    ]);
    assert!(out.status.success(), "{out:?}");
    dir
}

/// The keys `scan` prints, from its JSON.
fn scanned(args: &[&str]) -> Vec<String> {
    let out = bloomlsm(&[&["--json", "scan"][..], args].concat());
    assert!(out.status.success(), "{args:?}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn scan_bounds_may_start_with_a_hyphen() {
    let dir = store();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    assert_eq!(scanned(&[db, "--from", "-y"]), ["-y", "b"]);
    assert_eq!(scanned(&[db, "--to", "-y"]), ["-x"]);
    assert_eq!(scanned(&[db, "--from", "-x", "--to", "-y"]), ["-x"]);
    assert_eq!(
        scanned(&[db, "--from", "-", "--to", "-y", "--limit", "5"]),
        ["-x"]
    );
}

#[test]
fn a_global_flag_before_the_command_takes_a_negative_number() {
    for flag in ["--max-open-files", "--num-levels"] {
        let out = bloomlsm(&[flag, "-1", "scan", "db"]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert_eq!(err.lines().count(), 1, "{flag}: {err}");
        assert!(
            err.contains(&format!("invalid value '-1' for '{flag}")),
            "{flag}: {err}"
        );
    }
}
