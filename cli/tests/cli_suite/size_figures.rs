//! `bloomlsm size` figures say what they count, the same way everywhere.
//! Its Ribbon line printed `bits_per_key` as the solution's bits per key
//! (the fixed header left out) beside `filter_bytes` with it, where its
//! Bloom line and `lecture`'s Ribbon rows mean all the filter's bits:
//! 256 "bits per key" beside 368 bytes for 10 items (294 bits each).
//! Refusals name the bound that was broken so it cannot be read two ways.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

fn size_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json", "size"];
    all.extend_from_slice(args);
    let out = bloomlsm(&all);
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Bits per key times items is the filter's bits (its bytes rounded up),
/// for the Bloom filter and the Ribbon filter alike.
#[test]
fn bits_per_key_counts_every_byte_of_the_filter() {
    for (items, target) in [
        ("10", ["--bits-per-key", "10"]),
        ("1000", ["--fpr", "0.01"]),
        ("1000", ["--memory", "2000"]),
    ] {
        let mut args = vec!["--items", items];
        args.extend_from_slice(&target);
        let v = size_json(&args);
        let n: f64 = items.parse().unwrap();
        for filter in [&v, &v["ribbon"]] {
            let bits = f(&filter["bits_per_key"]) * n;
            let bytes = f(&filter["filter_bytes"]);
            assert!(
                (bits / 8.0 - bytes).abs() < 1.0,
                "{args:?}: {bits} bits vs {bytes} bytes\n{v}"
            );
        }
        // The solution alone, what `--bits-per-key` asks a Ribbon filter for.
        let solution = f(&v["ribbon"]["solution_bits_per_key"]);
        assert!(solution < f(&v["ribbon"]["bits_per_key"]), "{v}");
    }
    let v = size_json(&["--items", "10", "--bits-per-key", "10"]);
    assert_eq!(f(&v["ribbon"]["solution_bits_per_key"]), 256.0, "{v}");
}

fn refusal(args: &[&str]) -> String {
    let mut all = vec!["size"];
    all.extend_from_slice(args);
    let out = bloomlsm(&all);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

/// `--fpr 0 must be between 0 and 1` read as a contradiction (0 is
/// between 0 and 1, bounds included); the bounds are excluded.
#[test]
fn an_fpr_out_of_range_names_excluded_bounds() {
    for fpr in ["0", "1", "2", "NaN"] {
        let err = refusal(&["--items", "10", "--fpr", fpr]);
        assert!(
            err.contains("more than 0 and less than 1"),
            "--fpr {fpr}: {err}"
        );
    }
}

/// A bits-per-key past any filter printed all 301 digits of 1e300.
#[test]
fn a_huge_bits_per_key_is_short_in_the_refusal() {
    let err = refusal(&["--items", "10", "--bits-per-key", "1e300"]);
    assert!(err.len() < 160, "{err}");
    assert!(err.contains("1e300"), "{err}");
}
