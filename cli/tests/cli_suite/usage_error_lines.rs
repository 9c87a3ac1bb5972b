//! Bad arguments are one line on stderr, like every other error: `error: `,
//! what is wrong, then the command's usage, exit status 2 and nothing on
//! stdout. clap printed its error over four to seven lines (the error, a
//! list of the missing arguments, a blank line, the usage, a blank line
//! and "For more information, try '--help'."), where the README and
//! `--help` promise an error on one line.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

#[test]
fn bad_arguments_are_one_line() {
    let cases: [(&[&str], &[&str]); 7] = [
        (&["get", "db"], &["<KEY>", "usage: bloomlsm get"]),
        (&["scan", "db", "--limit", "x"], &["--limit", "'x'"]),
        (
            &["scan", "db", "--limit", "99999999999999999999999"],
            &["--limit"],
        ),
        (&["bogus"], &["'bogus'"]),
        (&["size"], &["--items"]),
        (&["stats", "db", "--absent-gets", "-1"], &["'-1'"]),
        (&["lecture", "--items", "0"], &["--items", "0"]),
    ];
    for (args, names) in cases {
        let out = bloomlsm(args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        for name in names {
            assert!(err.contains(name), "{args:?}: {name} not in {err}");
        }
    }
}

/// Help and version are answers, not errors: on stdout, exit status 0.
#[test]
fn help_and_version_still_print_on_stdout() {
    for args in [
        &["--help"][..],
        &["get", "--help"],
        &["--version"],
        &["help", "scan"],
    ] {
        let out = bloomlsm(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
    }
}

/// A negative number is a value, not an unknown flag: `--fpr -1` was
/// "unexpected argument '-1' found" with a tip (`-- -1`) that does not
/// work for an option's value; it is refused by its bounds now, and `get
/// DB -1` reads the key `-1`.
#[test]
fn negative_numbers_are_values() {
    let out = bloomlsm(&["size", "--items", "10", "--fpr", "-1"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--fpr -1 must be"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    assert!(bloomlsm(&["put", db, "-1", "-2"]).status.success());
    let out = bloomlsm(&["--json", "get", db, "-1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["value"], "-2");
}
