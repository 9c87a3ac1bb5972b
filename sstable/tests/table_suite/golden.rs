//! A table written by each format version (checked in) must keep decoding
//! to the same entries, so the format cannot change by accident.
//! (Regenerate only for a new format version:
//! `cargo run -p bloomlsm-sstable --example write_golden_table -- N`.)
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::Arc;

use bloomlsm_filter::{Filter, FilterKind, KeyHash};
use bloomlsm_sstable::{
    EntryKind, FilterStatus, Outcome, Table, TableIter, append_filter, rebuild_filter,
};

fn golden(version: u32) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/golden-v{version}.sst"))
}

#[test]
fn golden_tables_still_decode() {
    for version in [1, 2] {
        let table = Arc::new(Table::open_path(golden(version), 1, None).unwrap());
        assert_eq!(table.footer().version, version);
        holds_the_golden_entries(&table);
    }
    // The same entries, blocks and filter: version 2 differs in its index
    // block alone, and that block is smaller.
    let [v1, v2] = [1, 2].map(|v| Table::open_path(golden(v), 1, None).unwrap());
    assert_eq!(v1.footer().filter.size, v2.footer().filter.size);
    assert!(
        v2.footer().index.size * 2 < v1.footer().index.size,
        "{:?} against {:?}",
        v2.footer().index,
        v1.footer().index
    );
}

/// A version 1 table given a new filter, in its own file or a copy, stays
/// a version 1 table: its index block is kept or copied as it is, so a
/// footer naming version 2 would make the table unreadable.
#[test]
fn filters_rebuilt_on_a_version_1_table_keep_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("appended.sst");
    std::fs::copy(golden(1), &path).unwrap();
    let table = Arc::new(Table::open_path(&path, 1, None).unwrap());
    let file = OpenOptions::new().append(true).open(&path).unwrap();
    // The golden table's 100 keys get a blocked filter of the same size.
    let appended = append_filter(&table, file, &path, FilterKind::Blocked, 10.0).unwrap();
    let file = Arc::new(std::fs::File::open(&path).unwrap());
    let table = Arc::new(Table::open_at(file, &path, appended.file_size, 2, None).unwrap());
    assert_eq!(table.footer().version, 1);
    holds_the_golden_entries(&table);

    let copy = dir.path().join("copy.sst");
    let file = std::fs::File::create(&copy).unwrap();
    rebuild_filter(&table, file, &copy, FilterKind::Blocked, 10.0).unwrap();
    let table = Arc::new(Table::open_path(&copy, 3, None).unwrap());
    assert_eq!(table.footer().version, 1);
    holds_the_golden_entries(&table);
}

/// The golden entries (`examples/write_golden_table.rs`), read every way.
fn holds_the_golden_entries(table: &Arc<Table>) {
    let status = table.filter_status();
    assert!(matches!(status, FilterStatus::Loaded), "{status:?}");
    let p = table.properties();
    assert_eq!((p.entries, p.distinct_keys, p.tombstones), (110, 100, 10));
    assert_eq!(p.filter_kind, Some(FilterKind::Blocked));
    assert_eq!(table.filter().unwrap().len(), 100);
    assert_eq!(p.smallest_key, b"golden0000");
    assert_eq!(p.largest_key, b"golden0099");
    let entries: Vec<_> = TableIter::new(Arc::clone(table), false)
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(entries.len(), 110);
    for i in 0..100u64 {
        let key = format!("golden{i:04}").into_bytes();
        let l = table.get(&key, KeyHash::of(&key), u64::MAX >> 8).unwrap();
        if i % 10 == 3 {
            assert_eq!(
                l.outcome,
                Outcome::Found {
                    seq: 1000 + i,
                    value: None
                }
            );
            let older = table.get(&key, KeyHash::of(&key), 999).unwrap();
            assert_eq!(
                older.outcome,
                Outcome::Found {
                    seq: i + 1,
                    value: Some(format!("value-{i}").into_bytes())
                }
            );
        } else {
            assert_eq!(
                l.outcome,
                Outcome::Found {
                    seq: i + 1,
                    value: Some(format!("value-{i}").into_bytes())
                }
            );
        }
    }
    assert!(
        entries
            .iter()
            .filter(|e| e.kind == EntryKind::Delete)
            .count()
            == 10
    );
}
