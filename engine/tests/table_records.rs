//! A manifest record that disagrees with its table's own properties (a
//! checksummed manifest, so only a bug or a hand edit makes one) is refused
//! at open with a typed reason naming the table: the read path finds a
//! sorted level's table by its recorded range and does not compare the key
//! with the table's own range again, so a record narrower than its table
//! would make keys it holds unreadable.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

mod common;

use bloomlsm::{Damage, Db, Error, Options, TableRecordField};
use common::{fill, key, read_manifest, write_manifest};

/// A closed store whose only table, holding key(0)..key(499), is in L1.
fn one_table_in_l1() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    fill(&db, 500);
    db.flush().unwrap();
    db.close().unwrap();
    let mut m = read_manifest(dir.path());
    assert_eq!(m.tables.len(), 1);
    m.tables[0].level = 1;
    write_manifest(dir.path(), &m);
    dir
}

fn refusal(err: Error) -> (TableRecordField, String) {
    let text = err.to_string();
    match err {
        Error::Corruption {
            reason: Damage::TableRecord { field, .. },
            path,
            ..
        } => {
            assert!(path.to_string_lossy().ends_with(".sst"), "{text}");
            (field, text)
        }
        other => panic!("expected a table-record refusal, got {other}"),
    }
}

#[test]
fn the_moved_table_opens_and_reads() {
    let dir = one_table_in_l1();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(db.get(&key(300)).unwrap().is_some());
    db.close().unwrap();
}

#[test]
fn a_record_narrower_than_its_table_is_refused() {
    let dir = one_table_in_l1();
    let mut m = read_manifest(dir.path());
    m.tables[0].keys[1] = key(100); // the table holds up to key(499)
    write_manifest(dir.path(), &m);
    let (field, text) = refusal(Db::open(dir.path(), Options::default()).unwrap_err());
    assert_eq!(field, TableRecordField::LargestKey);
    assert!(
        text.contains("user0000000499") && text.contains("user0000000100"),
        "{text}"
    );

    let mut m = read_manifest(dir.path());
    m.tables[0].keys[1] = key(499);
    m.tables[0].keys[0] = key(1);
    write_manifest(dir.path(), &m);
    let (field, _) = refusal(Db::open(dir.path(), Options::default()).unwrap_err());
    assert_eq!(field, TableRecordField::SmallestKey);
}

#[test]
fn sequence_ranges_and_entry_counts_are_compared() {
    // Each edit stays within what the manifest's own checks accept (a
    // largest sequence past the store's last is refused before this).
    for (slot, delta, expected) in [
        (2, 1, TableRecordField::Entries),
        (3, 1, TableRecordField::SmallestSeq),
        (4, -1, TableRecordField::LargestSeq),
    ] {
        let dir = one_table_in_l1();
        let mut m = read_manifest(dir.path());
        m.tables[0].numbers[slot] = m.tables[0].numbers[slot].checked_add_signed(delta).unwrap();
        write_manifest(dir.path(), &m);
        let (field, _) = refusal(Db::open(dir.path(), Options::default()).unwrap_err());
        assert_eq!(field, expected);
    }
}
