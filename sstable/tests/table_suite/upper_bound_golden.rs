//! `TableIter::with_upper_bound` on the golden tables of format versions 1
//! and 2 (written by earlier builds, their separators as those wrote
//! them): for every bound (each user key, with 0x00 appended, and the
//! empty key) and every start, the bounded cursor yields every entry the
//! unbounded one yields below the bound, in the same order. It may yield
//! entries at or past the bound from a block already read; none below it
//! is lost.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::PathBuf;
use std::sync::Arc;

use bloomlsm_sstable::{Entry, Table, TableIter};

fn golden(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/golden-v{version}.sst"))
}

fn below(it: TableIter, end: &[u8]) -> Vec<Entry> {
    it.map(|e| e.unwrap())
        .filter(|e| e.user_key.as_slice() < end)
        .collect()
}

#[test]
fn a_bounded_cursor_loses_no_entry_below_its_bound_on_golden_tables() {
    for version in [1, 2] {
        let table = Arc::new(Table::open_path(golden(version), 1, None).unwrap());
        assert!(table.data_block_count() > 1, "v{version}: several blocks");
        let all: Vec<Entry> = TableIter::new(Arc::clone(&table), true)
            .map(|e| e.unwrap())
            .collect();
        let mut points: Vec<Vec<u8>> = vec![Vec::new()];
        for e in &all {
            points.push(e.user_key.clone());
            let mut k = e.user_key.clone();
            k.push(0);
            points.push(k);
        }
        points.dedup();
        for end in &points {
            for start in points.iter().step_by(7) {
                let mut unbounded = TableIter::new(Arc::clone(&table), true);
                unbounded.seek(start).unwrap();
                let mut bounded =
                    TableIter::new(Arc::clone(&table), true).with_upper_bound(Some(end.clone()));
                bounded.seek(start).unwrap();
                assert!(
                    below(bounded, end) == below(unbounded, end),
                    "v{version}: from {start:?} below {end:?}"
                );
            }
        }
    }
}
