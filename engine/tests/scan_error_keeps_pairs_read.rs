//! A scan that meets a damaged block yields every pair before it, then the
//! error, then nothing: the pair whose source's next read fails was read
//! intact and is returned before that failure (as RocksDB's iterator
//! shows its current key before `Next` fails). The merge pulls a source's
//! next entry when it returns one; before, an error in that pull took the
//! place of the entry in hand, so a scan of the pairs before a damaged
//! block failed one pair early (and `bloomlsm scan --limit N` with exactly
//! those N pairs exited 2 instead of printing them with a note).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::path::{Path, PathBuf};

use bloomlsm::{Db, Options};
use common::scratch_dir;

const KEYS: u8 = 200;

fn key(i: u8) -> Vec<u8> {
    vec![b'k', i]
}

fn options() -> Options {
    Options {
        block_size: 512,
        background_work: false,
        ..Options::default()
    }
}

fn only_table(dir: &Path) -> PathBuf {
    let mut tables: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert_eq!(tables.len(), 1, "{tables:?}");
    tables.pop().unwrap()
}

/// `KEYS` keys (100-byte values, a few a block) in one table, in L0 or
/// below it, with one byte flipped in the middle of its data.
fn damaged_store(deeper: bool) -> tempfile::TempDir {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &[b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    if deeper {
        // Only to place the one table below L0: nothing is shadowed.
        db.compact().unwrap();
        assert_eq!(db.stats().levels[0].tables, 0);
    }
    db.close().unwrap();
    let table = only_table(dir.path());
    let data_bytes = bloomlsm_sstable::Table::open_path(&table, 1, None)
        .unwrap()
        .properties()
        .data_bytes;
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[data_bytes as usize / 2] ^= 0x04;
    std::fs::write(&table, bytes).unwrap();
    dir
}

fn check(deeper: bool) {
    let dir = damaged_store(deeper);
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
