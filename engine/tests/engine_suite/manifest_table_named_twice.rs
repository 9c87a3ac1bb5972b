//! A manifest that names one table file twice (checksummed, so only a bug
//! or a hand edit makes one) is refused at open. Opened, the two records
//! are two tables that share one file: a compaction that replaces either
//! deletes the file, which the other record still names, so every read of
//! that table fails and the next open refuses the store (file missing).
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Damage, Db, Error, ManifestDamage, Options};
use common::{Record, key, listing, read_manifest, write_manifest};

/// Seven levels of narrow tables, work inline (each write runs the
/// compactions it makes due), no size compaction for a few KiB.
fn options() -> Options {
    Options {
        num_levels: 7,
        memtable_bytes: 2048,
        target_file_bytes: 1024,
        block_size: 128,
        background_work: false,
        ..Options::default()
    }
}

/// A closed store whose tables all sit in L1 and hold garbage a
/// bottommost cleanup would drop: overwritten versions and tombstones,
/// kept by a snapshot while they were compacted.
fn l1_tables_with_garbage() -> tempfile::TempDir {
    let dir = common::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..60 {
        db.put(&key(i), b"old").unwrap();
    }
    let held = db.snapshot();
    for i in 0..60 {
        db.put(&key(i), b"new").unwrap();
    }
    for i in 0..20 {
        db.delete(&key(i * 3)).unwrap();
    }
    // The deepest level in use is L1: the whole tree goes there, every
    // version the snapshot sees kept.
    db.compact().unwrap();
    drop(held);
    db.close().unwrap();
    dir
}

#[test]
fn a_manifest_naming_a_table_twice_is_refused() {
    let dir = l1_tables_with_garbage();
    let mut m = read_manifest(dir.path());
    assert!(m.tables.iter().all(|t| t.level == 1), "all in L1");
    let first = &m.tables[0];
    let number = first.numbers[0];
    // The same table again, two levels down: every level stays sorted and
    // disjoint, so the tree's order checks pass.
    let again = Record {
        level: 3,
        numbers: first.numbers,
        keys: first.keys.clone(),
    };
    m.tables.push(again);
    write_manifest(dir.path(), &m);
    let file = format!("{number:06}.sst");
    match Db::open(dir.path(), options()) {
        Err(Error::Corruption {
            reason: Damage::Manifest(ManifestDamage::DuplicateTable { number: named }),
            path,
            ..
        }) => {
            assert_eq!(named, number);
            assert!(path.ends_with("MANIFEST"), "{}", path.display());
        }
        Err(other) => panic!("expected the duplicate record refused, got {other}"),
        Ok(db) => {
            // What an open of it leads to: a write's inline work cleans the
            // L3 record's table (nothing below it), and deletes its file.
            db.put(b"zzz", b"1").unwrap();
            let still_there = listing(dir.path()).contains(&file);
            let read = db.get(&key(1)).map_err(|e| e.to_string());
            db.close().unwrap();
            let reopen = Db::open(dir.path(), options()).map(drop);
            panic!(
                "opened a manifest naming {file} twice; after one write the file \
                 is there: {still_there}; get: {read:?}; reopen: {reopen:?}"
            );
        }
    }
    // Refused before anything was written: the store is as it was.
    assert!(listing(dir.path()).contains(&file));
}
