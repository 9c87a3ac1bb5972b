//! The live tables of a closed store, read from its files: for tests that
//! check what compactions left where.

use std::path::Path;
use std::sync::Arc;

use bloomlsm_sstable::{EntryKind, Table, TableIter};

use super::read_manifest;

/// One live table as its file says: level, key range, entries (user key,
/// sequence, tombstone?), and its properties' counts.
pub struct LiveTable {
    pub level: u32,
    pub number: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub entries: Vec<(Vec<u8>, u64, bool)>,
    pub tombstones: u64,
    pub shadowed: u64,
}

/// Every table the manifest of the closed store in `dir` names.
pub fn live_tables(dir: &Path) -> Vec<LiveTable> {
    read_manifest(dir)
        .tables
        .into_iter()
        .map(|r| {
            let path = dir.join(format!("{:06}.sst", r.numbers[0]));
            let table = Arc::new(Table::open_path(&path, r.numbers[0], None).unwrap());
            let p = table.properties().clone();
            let entries = TableIter::new(table, false)
                .map(|e| {
                    let e = e.unwrap();
                    (e.user_key, e.seq, e.kind == EntryKind::Delete)
                })
                .collect();
            LiveTable {
                level: r.level,
                number: r.numbers[0],
                smallest: r.keys[0].clone(),
                largest: r.keys[1].clone(),
                entries,
                tombstones: p.tombstones,
                shadowed: p.entries - p.distinct_keys,
            }
        })
        .collect()
}
