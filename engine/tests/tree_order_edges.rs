//! The tree-order check at open (`Version::check_invariants`) at its
//! boundary: sorted-level tables that touch at one key break the order as
//! much as tables that overlap widely (`tree_order.rs`). The level holds
//! two versions of that key, and the level search reads only the first
//! table's.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

mod common;

use bloomlsm::{Damage, Db, Error, Options, TreeOrderError};
use common::{key, read_manifest, write_manifest};

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
