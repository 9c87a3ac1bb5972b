//! `Db::stats` over filters whose headers claim more keys than any table
//! holds (crafted bytes: every checksum valid, `items` near 2^63). The
//! theoretical FPR weights each filter's rate by its `len()`, so the
//! store's figures must stay rates (in 0..=1) and `stats` must not panic,
//! however large the claimed counts are (docs/DESIGN.md, "Stats").
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use bloomlsm::sstable::BlockKind;
use bloomlsm::sstable::fuzzing::{blocks, reseal};
use bloomlsm::{Db, FilterKind, Options};
use common::scratch_dir;

/// Rewrites the filter header's item count (bytes 28..36 of the filter,
/// `filter/src/codec.rs`) of the table file at `path`, then its filter
/// checksum, block trailer and footer checksum.
fn claim_items(path: &std::path::Path, items: u64) {
    let mut table = std::fs::read(path).unwrap();
    let handles = blocks(&table);
    let (_, h) = handles
        .iter()
        .find(|(kind, _)| *kind == BlockKind::Filter)
        .copied()
        .unwrap();
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    table[start + 28..start + 36].copy_from_slice(&items.to_le_bytes());
    let crc = crc32fast::hash(&table[start..end - 4]);
    table[end - 4..end].copy_from_slice(&crc.to_le_bytes());
    reseal(&mut table, &handles, &[]);
    std::fs::write(path, table).unwrap();
}

#[test]
fn claimed_counts_past_u64_in_sum_leave_the_figures_rates() {
    let dir = scratch_dir();
    let options = Options {
        filter_kind: FilterKind::Blocked,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for t in 0..2u32 {
        for i in 0..100u32 {
            db.put(format!("k{t}-{i:03}").as_bytes(), b"v").unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let mut tables: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    tables.sort();
    assert_eq!(tables.len(), 2, "{tables:?}");
    // Together one more than 2^64: a u64 sum wraps to 1.
    claim_items(&tables[0], 1 << 63);
    claim_items(&tables[1], (1 << 63) + 1);
    let db = Db::open(dir.path(), options).unwrap();
    let stats = db.stats();
    for l in stats.levels.iter().chain([&stats.total]) {
        assert!(
            (0.0..=1.0).contains(&l.theoretical_fpr),
            "theoretical FPR {}",
            l.theoretical_fpr
        );
    }
    // Each filter says "maybe" to nearly every key: the keys are found.
    assert_eq!(db.get(b"k1-007").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
}
