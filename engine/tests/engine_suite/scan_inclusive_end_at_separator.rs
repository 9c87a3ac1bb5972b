//! A scan with an inclusive end `k` reads no data block past `k` when a
//! block's separator is `k` itself with sequence 0, the common case: the
//! writer keeps the last user key as the separator whenever it and the next
//! block's first key differ only in their last byte. Every entry of the
//! next block sorts after `(k, 0)`, which sorts after every version of
//! `k`, so its user keys are `> k`: none is in `..=k`. Shown with a damaged
//! block right after such a separator: the scan answers without error, in
//! L0 and a deeper level, through `Db::scan` and `Snapshot::scan`. Before,
//! the end `k` became the exclusive `k ++ [0]`, which a separator `k` is
//! below, so the damaged block was read and the scan failed.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::Db;
use common::damaged_block::{damaged_store, options, read};

/// Two-byte keys `[b'k', i]`: consecutive keys differ only in their last
/// byte, so every block's separator is its last key, sequence 0.
const KEYS: u8 = 200;

fn key(i: u8) -> Vec<u8> {
    vec![b'k', i]
}

fn check(deeper: bool) {
    let dir = damaged_store((0..KEYS).map(|i| (key(i), vec![b'v'; 100])), deeper);
    let db = Db::open(dir.path(), options()).unwrap();
    let (before, failed) = read(db.scan::<Vec<u8>, _>(..).unwrap());
    assert!(failed, "the damage is read by an unbounded scan");
    // The keys before the damaged block: a get reads the one block that
    // can hold its key, so it fails exactly for the damaged block's keys.
    // `key(n - 1)` ends the block before, whose separator it is (sequence
    // 0).
    let n = (0..KEYS).position(|i| db.get(&key(i)).is_err()).unwrap() as u8;
    assert!(before.len() <= n as usize);
    assert!(
        n > 8 && n < KEYS,
        "damage in a middle block: {n} keys before"
    );
    let last = key(n - 1);
    let snapshot = db.snapshot();
    for from in [0, n / 2, n - 1] {
        let expected: Vec<Vec<u8>> = (from..n).map(key).collect();
        assert_eq!(
            read(db.scan(key(from)..=last.clone()).unwrap()),
            (expected.clone(), false),
            "deeper {deeper}: from {from} through the separator"
        );
        assert_eq!(
            read(snapshot.scan(key(from)..=last.clone()).unwrap()),
            (expected, false),
            "deeper {deeper}: snapshot, from {from} through the separator"
        );
    }
    // One past the separator's key may be in the damaged block: read.
    let (_, failed) = read(db.scan(..=key(n)).unwrap());
    assert!(
        failed,
        "deeper {deeper}: a range into the damaged block reads it"
    );
}

#[test]
fn an_inclusive_end_at_a_separator_in_l0_reads_no_block_past_it() {
    check(false);
}

#[test]
fn an_inclusive_end_at_a_separator_in_a_deeper_level_reads_no_block_past_it() {
    check(true);
}
