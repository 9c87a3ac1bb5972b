//! A manifest record that disagrees with its table's own properties (a
//! checksummed manifest, so only a bug or a hand edit makes one) is refused
//! at open with a typed reason naming the table: the read path finds a
//! sorted level's table by its recorded range and does not compare the key
//! with the table's own range again, so a record narrower than its table
//! would make keys it holds unreadable.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

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

/// Every file of the store: name and bytes.
fn contents(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    common::listing(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

/// A store of many narrow tables over several levels (flushes, trivial
/// moves, compactions with output cuts, a filter rebuild) and writes still
/// only in its WAL, with one record's entry count or largest key changed:
/// the open is refused before the WAL is replayed, and every file is as it
/// was (no replay table, no new WAL or manifest, no LOCK, no orphan
/// removed). With the record restored the store opens with every write.
#[test]
fn a_refused_record_leaves_every_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 8 << 10,
        target_file_bytes: 4 << 10,
        block_size: 256,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    fill(&db, 3_000);
    db.wait_for_background_work().unwrap();
    db.rebuild_filters(bloomlsm::FilterPolicy::PerLevel(vec![12.0, 8.0, 5.0]))
        .unwrap();
    db.wait_for_background_work().unwrap();
    // Written after the last flush: these live only in the WAL.
    for i in 3_000..3_050 {
        db.put(&key(i), &common::value(i)).unwrap();
    }
    drop(db);
    let healthy = read_manifest(dir.path());
    assert!(healthy.tables.len() > 4, "{} tables", healthy.tables.len());
    assert!(healthy.tables.iter().any(|t| t.level > 1));
    let wal = common::newest_wal(dir.path());
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "writes in the WAL"
    );
    // A leftover that a successful open would remove.
    std::fs::write(dir.path().join("999999.sst"), b"orphan").unwrap();

    for t in [0, healthy.tables.len() - 1] {
        for edit in 0..2 {
            let mut m = read_manifest(dir.path());
            match edit {
                0 => m.tables[t].numbers[2] += 1,
                _ => m.tables[t].keys[1].push(b'!'),
            }
            write_manifest(dir.path(), &m);
            let before = contents(dir.path());
            let (field, _) = refusal(Db::open(dir.path(), options.clone()).unwrap_err());
            let expected = [TableRecordField::Entries, TableRecordField::LargestKey][edit];
            assert_eq!(field, expected);
            assert!(
                contents(dir.path()) == before,
                "a refused open changed the store: {:?} -> {:?}",
                before.iter().map(|(n, _)| n).collect::<Vec<_>>(),
                common::listing(dir.path())
            );
            write_manifest(dir.path(), &healthy);
        }
    }
    let db = Db::open(dir.path(), options).unwrap();
    common::all_present(&db, 3_050);
    db.close().unwrap();
    assert!(!dir.path().join("999999.sst").exists(), "orphan removed");
}
