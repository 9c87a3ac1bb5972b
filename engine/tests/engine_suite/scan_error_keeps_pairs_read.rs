//! A scan that meets a damaged block yields every pair before it, then the
//! error, then nothing: the pair whose source's next read fails was read
//! intact and is returned before that failure (as RocksDB's iterator
//! shows its current key before `Next` fails). The merge pulls a source's
//! next entry when it returns one; before, an error in that pull took the
//! place of the entry in hand, so a scan of the pairs before a damaged
//! block failed one pair early (and `bloomlsm scan --limit N` with exactly
//! those N pairs exited 2 instead of printing them with a note).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::Db;
use common::damaged_block::{damaged_store, options};

const KEYS: u8 = 200;

fn key(i: u8) -> Vec<u8> {
    vec![b'k', i]
}

fn check(deeper: bool) {
    let dir = damaged_store((0..KEYS).map(|i| (key(i), vec![b'v'; 100])), deeper);
    let db = Db::open(dir.path(), options()).unwrap();
    // The keys before the damaged block: a get reads the one block that
    // can hold its key, so it fails exactly for the damaged block's keys.
    let n = (0..KEYS).position(|i| db.get(&key(i)).is_err()).unwrap() as u8;
    assert!(
        n > 8 && n < KEYS - 8,
        "damage in a middle block: {n} keys before"
    );
    assert!(db.get(&key(n - 1)).unwrap().is_some());
    // A key in the memtable past the damage: once the table's source has
    // failed, the scan must not go on with the other sources.
    db.put(&key(KEYS), b"in the memtable").unwrap();
    for from in [0, n - 1] {
        let mut it = db.scan(key(from)..).unwrap();
        let read: Vec<Vec<u8>> = it
            .by_ref()
            .take((n - from) as usize)
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(
            read,
            (from..n).map(key).collect::<Vec<_>>(),
            "deeper {deeper}: from {from}"
        );
        let e = it.next().unwrap().unwrap_err();
        assert!(e.is_corruption(), "deeper {deeper}: {e}");
        assert!(
            it.next().is_none(),
            "deeper {deeper}: nothing after the error"
        );
    }
}

#[test]
fn a_scan_in_l0_yields_every_pair_before_a_damaged_block() {
    check(false);
}

#[test]
fn a_scan_in_a_deeper_level_yields_every_pair_before_a_damaged_block() {
    check(true);
}
