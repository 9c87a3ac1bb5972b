//! A manifest whose tables break the tree's order (checksummed, so only a
//! bug or a hand edit makes one) is refused at open with a typed reason:
//! a lookup in such a tree could return an older version of a key.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Damage, Db, Error, Options, TreeOrderError};
use common::{fill, key, read_manifest, write_manifest};

/// A closed store with two L0 tables holding the same keys, the second
/// written after the first.
fn two_l0_tables() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    fill(&db, 500);
    db.flush().unwrap();
    for i in 0..500 {
        db.put(&key(i), b"newer").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let m = read_manifest(dir.path());
    assert_eq!(m.tables.len(), 2);
    assert!(m.tables.iter().all(|t| t.level == 0));
    dir
}

fn tree_order_reason(err: Error) -> TreeOrderError {
    match err {
        Error::Corruption {
            reason: Damage::TreeOrder(reason),
            ..
        } => reason,
        other => panic!("expected a tree-order refusal, got {other}"),
    }
}

#[test]
fn l0_tables_with_overlapping_sequences_are_refused() {
    let dir = two_l0_tables();
    let mut m = read_manifest(dir.path());
    let oldest_start = m.tables.iter().map(|t| t.numbers[3]).min().unwrap();
    for t in &mut m.tables {
        t.numbers[3] = oldest_start; // both ranges now start at the first write
    }
    write_manifest(dir.path(), &m);
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.to_string().contains("MANIFEST"), "{err}");
    assert!(matches!(
        tree_order_reason(err),
        TreeOrderError::L0Sequences { .. }
    ));
}

#[test]
fn sorted_level_tables_sharing_keys_are_refused() {
    let dir = two_l0_tables();
    let mut m = read_manifest(dir.path());
    for t in &mut m.tables {
        t.level = 1; // both hold key(0)..key(499)
    }
    write_manifest(dir.path(), &m);
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    let numbers = [m.tables[0].numbers[0], m.tables[1].numbers[0]];
    match tree_order_reason(err) {
        TreeOrderError::LevelKeys {
            level: 1,
            first,
            second,
        } => assert!(numbers.contains(&first) && numbers.contains(&second) && first != second),
        other => panic!("expected two L1 tables sharing keys, got {other}"),
    }
}

#[test]
fn the_untouched_manifest_opens() {
    let dir = two_l0_tables();
    let m = read_manifest(dir.path());
    write_manifest(dir.path(), &m);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(&key(7)).unwrap().as_deref(), Some(&b"newer"[..]));
    db.close().unwrap();
}

// At the boundary: sorted-level tables that touch at one key break the
// order as much as tables that overlap widely. The level holds two
// versions of that key, and the level search reads only the first table's.

/// A closed store with two L0 tables: the older holds `key(0)..=key(250)`
/// = "old", the newer `key(250)..key(500)` = "new". They share exactly
/// `key(250)`, the older's largest key and the newer's smallest.
fn tables_touching_at_one_key() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..=250 {
        db.put(&key(i), b"old").unwrap();
    }
    db.flush().unwrap();
    for i in 250..500 {
        db.put(&key(i), b"new").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let m = read_manifest(dir.path());
    assert_eq!(m.tables.len(), 2);
    assert!(m.tables.iter().all(|t| t.level == 0));
    dir
}

#[test]
fn sorted_level_tables_sharing_only_their_boundary_key_are_refused() {
    let dir = tables_touching_at_one_key();
    let mut m = read_manifest(dir.path());
    for t in &mut m.tables {
        t.level = 1;
    }
    let (older, newer) = if m.tables[0].numbers[4] < m.tables[1].numbers[4] {
        (&m.tables[0], &m.tables[1])
    } else {
        (&m.tables[1], &m.tables[0])
    };
    // The one shared key: the older table's last, the newer's first.
    assert_eq!(older.keys[1], key(250));
    assert_eq!(newer.keys[0], key(250));
    let numbers = [older.numbers[0], newer.numbers[0]];
    write_manifest(dir.path(), &m);
    // Opened, a get of key(250) would find the older table first
    // ("old"), though "new" was written after it.
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    match tree_order_reason(err) {
        TreeOrderError::LevelKeys {
            level: 1,
            first,
            second,
        } => assert_eq!([first, second], numbers),
        other => panic!("expected two L1 tables sharing a key, got {other}"),
    }
}
