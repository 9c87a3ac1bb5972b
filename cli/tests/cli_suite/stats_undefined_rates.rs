//! A rate with nothing to divide prints `-` (JSON `null`), not 0. `stats`
//! printed `observed_fpr 0` where no filter had been asked (no absent
//! gets, or only tables of one key, whose fences answer first) and
//! `data_blocks_read_per_get 0` where no get ran: read as "the filters
//! never erred" and "gets read no block", two claims nothing measured.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;
use serde_json::Value;

fn stats(db: &str, absent_gets: &str) -> Value {
    let out = bloomlsm(&["--json", "stats", db, "--absent-gets", absent_gets]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Two tables of one key each (two `put` calls of one pair; the second
/// writes the first's WAL out as a table), and two pairs in the WAL.
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    for pairs in [&["a", "1"][..], &["b", "2"], &["c", "3", "d", "4"]] {
        let out = bloomlsm(&[&["put", db][..], pairs].concat());
        assert!(out.status.success(), "{out:?}");
    }
    dir
}

#[test]
fn rates_of_nothing_are_null() {
    let dir = store();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    // No get at all.
    let v = stats(db, "0");
    assert_eq!(v["gets"], 0, "{v}");
    assert_eq!(v["observed_fpr"], Value::Null, "{v}");
    assert_eq!(v["data_blocks_read_per_get"], Value::Null, "{v}");
    // Gets, but no filter asked: each table holds one key.
    let v = stats(db, "100");
    assert_eq!(v["gets"], 100, "{v}");
    assert_eq!(v["table_probes"], 0, "{v}");
    assert_eq!(v["observed_fpr"], Value::Null, "{v}");
    assert_eq!(v["data_blocks_read_per_get"], 0.0, "{v}");
    for level in v["levels"].as_array().unwrap() {
        assert_eq!(level["observed_fpr"], Value::Null, "{level}");
    }
    // In text: a dash.
    let out = bloomlsm(&["stats", db]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("observed_fpr"))
        .unwrap();
    assert!(line.ends_with(" -"), "{text}");
}
