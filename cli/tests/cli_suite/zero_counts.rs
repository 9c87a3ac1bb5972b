//! A count of zero keys or probes is refused as a bad argument: `lecture
//! --items 0` printed a formula rate of 0 beside every lecture figure, and
//! `--probes 0` a measured rate of 0, as if no key were ever wrongly
//! called present. `scan --limit 0` printed `(none)` and a note that the
//! limit was reached, where a reader of other tools takes 0 for "no
//! limit".
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

fn refused(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn zero_items_or_probes_are_refused() {
    refused(&["lecture", "--items", "0"]);
    refused(&["lecture", "--probes", "0"]);
    refused(&["inspect", "any.sst", "--probes", "0"]);
}

#[test]
fn a_zero_scan_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["put", db, "a", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    refused(&["scan", db, "--limit", "0"]);
}
