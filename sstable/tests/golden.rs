//! A table written by format version 1 (checked in) must keep decoding to
//! the same entries, so the format cannot change by accident.
//! (Regenerate only for a new format version:
//! `cargo run -p bloomlsm-sstable --example write_golden_table`.)
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use bloomlsm_filter::{Filter, FilterKind, KeyHash};
use bloomlsm_sstable::{EntryKind, FilterStatus, Outcome, Table, TableIter};

#[test]
fn golden_table_still_decodes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden-v1.sst");
    let table = Arc::new(Table::open_path(&path, 1, None).unwrap());
    let status = table.filter_status();
    assert!(matches!(status, FilterStatus::Loaded), "{status:?}");
    let p = table.properties();
    assert_eq!((p.entries, p.distinct_keys, p.tombstones), (110, 100, 10));
    assert_eq!(p.filter_kind, Some(FilterKind::Blocked));
    assert_eq!(table.filter().unwrap().len(), 100);
    assert_eq!(p.smallest_key, b"golden0000");
    assert_eq!(p.largest_key, b"golden0099");
    let entries: Vec<_> = TableIter::new(Arc::clone(&table), false)
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
