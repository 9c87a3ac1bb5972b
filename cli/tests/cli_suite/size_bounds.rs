//! `bloomlsm size` refuses what it cannot size with an error line, never a
//! panic or a bit count that silently saturated.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

fn refused(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    err
}

#[test]
fn item_counts_past_any_filter_are_refused_not_a_panic() {
    // Was a panic (exit status 101): multiply with overflow in
    // `bloomlsm_filter::ribbon_sizing`.
    for target in [
        ["--bits-per-key", "0.1"],
        ["--fpr", "0.5"],
        ["--memory", "1000"],
    ] {
        let mut args = vec!["size", "--items", "18446744073709551615"];
        args.extend_from_slice(&target);
        let err = refused(&args);
        assert!(err.contains("--items"), "{err}");
    }
}

#[test]
fn filters_whose_bit_count_overflows_are_refused() {
    // Was `m_bits 18446744073709551615`: the bit count saturated.
    let err = refused(&["size", "--items", "1000000000000", "--bits-per-key", "1e9"]);
    assert!(err.contains("bits"), "{err}");
    let err = refused(&[
        "size",
        "--items",
        "1000",
        "--memory",
        "18446744073709551615",
    ]);
    assert!(err.contains("--memory"), "{err}");
}

#[test]
fn a_zero_memory_budget_is_named() {
    // Was "give one of --fpr, --bits-per-key or --memory", though it was given.
    let err = refused(&["size", "--items", "10", "--memory", "0"]);
    assert!(err.contains("--memory 0"), "{err}");
}
