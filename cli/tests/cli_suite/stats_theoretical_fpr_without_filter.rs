//! A level with no usable filter has no theoretical FPR: its probes each
//! read a block (`probes_without_filter`). `stats` printed the library's
//! placeholder, `theoretical_fpr 0`, beside `observed_fpr -` and
//! `bits_per_key 0`: read as filters that never err, where there is no
//! filter at all. It prints `-` (JSON null) now, as the other rates with
//! nothing behind them.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;
use serde_json::Value;

/// A store of one table of 2,000 keys whose filter block has a flipped
/// byte (its checksum fails: the table is read without it).
fn store_with_a_damaged_filter() -> tempfile::TempDir {
    let (dir, table) = bloomlsm_tests::store_with_one_table((0..2000).map(|i| format!("k{i:05}")));
    let out = bloomlsm(&[
        "--json",
        "inspect",
        "--probes",
        "10",
        table.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let offset = v["footer"]["filter"]["offset"].as_u64().unwrap() as usize;
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[offset + 10] ^= 0x10;
    std::fs::write(&table, &bytes).unwrap();
    dir
}

#[test]
fn no_usable_filter_has_no_theoretical_fpr() {
    let dir = store_with_a_damaged_filter();
    let db = dir.path().to_str().unwrap();
    let out = bloomlsm(&["--json", "stats", db, "--absent-gets", "100"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tables_without_usable_filter"], 1, "{v}");
    assert_eq!(v["probes_without_filter"], 100, "{v}");
    assert_eq!(v["theoretical_fpr"], Value::Null, "{v}");
    let level = &v["levels"][0];
    assert_eq!(level["theoretical_fpr"], Value::Null, "{level}");
    // In text: a dash, on the totals' line and in the level's column.
    let out = bloomlsm(&["stats", db]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("theoretical_fpr"))
        .unwrap();
    assert!(line.ends_with(" -"), "{text}");
}

/// A level with its filter keeps its figure.
#[test]
fn a_usable_filter_has_its_theoretical_fpr() {
    let (dir, _) = bloomlsm_tests::store_with_one_table((0..2000).map(|i| format!("k{i:05}")));
    let out = bloomlsm(&["--json", "stats", dir.path().to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fpr = v["theoretical_fpr"].as_f64().unwrap();
    assert!(fpr > 0.0 && fpr < 0.02, "{v}");
    assert_eq!(v["levels"][0]["theoretical_fpr"].as_f64(), Some(fpr), "{v}");
}
