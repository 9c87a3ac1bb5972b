//! A scan bounded above reads no data block past its range: once a table's
//! cursor leaves the last block that can hold a key in range (the next
//! block's keys are all at or past the separator before it, which is past
//! the bound), it ends instead of reading that block. Shown with a damaged
//! block just past the bound: the scan answers without error, in L0 and in
//! a deeper level, through `Db::scan` and `Snapshot::scan`, forward from
//! any start. Before, every bounded scan ending in the block before read
//! the damaged block and failed.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::ops::Bound;

use bloomlsm::Db;
use common::damaged_block::{damaged_store, options, read};

const KEYS: u64 = 3000;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn check(deeper: bool) {
    let dir = damaged_store((0..KEYS).map(|i| (key(i), b"value".to_vec())), deeper);
    let db = Db::open(dir.path(), options()).unwrap();
    let (before, failed) = read(db.scan::<Vec<u8>, _>(..).unwrap());
    assert!(failed, "the damage is read by an unbounded scan");
    let n = before.len() as u64;
    assert!(
        n > 16 && n < KEYS,
        "damage in a middle block: {n} keys before"
    );
    let last = key(n - 1);
    let snapshot = db.snapshot();
    for from in [0, n / 2, n - 1] {
        let start = Bound::Included(key(from));
        let expected: Vec<Vec<u8>> = (from..n).map(key).collect();
        let range = (start.clone(), Bound::Included(last.clone()));
        assert_eq!(
            read(db.scan(range.clone()).unwrap()),
            (expected.clone(), false),
            "deeper {deeper}: from {from} to the last key before the damaged block"
        );
        assert_eq!(
            read(snapshot.scan(range).unwrap()),
            (expected.clone(), false),
            "deeper {deeper}: snapshot, from {from}"
        );
        let range = (start, Bound::Excluded(last.clone()));
        assert_eq!(
            read(db.scan(range).unwrap()),
            (expected[..expected.len() - 1].to_vec(), false),
            "deeper {deeper}: from {from}, excluding the last key"
        );
    }
    // Past the separator the damaged block may hold keys in range: read.
    let (_, failed) = read(db.scan(..key(n + 1)).unwrap());
    assert!(
        failed,
        "deeper {deeper}: a range into the damaged block reads it"
    );
}

#[test]
fn a_bounded_scan_in_l0_reads_no_block_past_its_range() {
    check(false);
}

#[test]
fn a_bounded_scan_in_a_deeper_level_reads_no_block_past_its_range() {
    check(true);
}
