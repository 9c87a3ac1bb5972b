//! A count of zero keys or probes is refused as a bad argument: `lecture
//! --items 0` printed a formula rate of 0 beside every lecture figure, and
//! `--probes 0` a measured rate of 0, as if no key were ever wrongly
//! called present.
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
