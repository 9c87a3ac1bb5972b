//! Crafted counts (every checksum valid): filters whose headers claim
//! more keys than any table holds (`items` near 2^63), and properties
//! blocks claiming more tombstones or distinct keys than entries. The
//! theoretical FPR weights each filter's rate by its `len()`, so the
//! store's figures must stay rates (in 0..=1) and `stats` must not panic,
//! however large the claimed counts are (docs/DESIGN.md, "Stats"); the
//! properties' counts, which `stats` sums as u64, are refused at the
//! table's open (sstable/FORMAT.md, "Properties block").
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::sstable::BlockKind;
use bloomlsm::sstable::fuzzing::{blocks, reseal};
use bloomlsm::{Db, Error, FilterKind, Options};
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

/// Two flushed tables of 100 keys each, closed; their files in order.
fn two_tables(dir: &std::path::Path, options: &Options) -> Vec<std::path::PathBuf> {
    let db = Db::open(dir, options.clone()).unwrap();
    for t in 0..2u32 {
        for i in 0..100u32 {
            db.put(format!("k{t}-{i:03}").as_bytes(), b"v").unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let mut tables: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    tables.sort();
    assert_eq!(tables.len(), 2, "{tables:?}");
    tables
}

/// Rewrites the tombstone count (bytes 20..28 of the properties block,
/// sstable/FORMAT.md) of the table file at `path`, then the block
/// trailers and footer checksum.
fn claim_tombstones(path: &std::path::Path, tombstones: u64) {
    let mut table = std::fs::read(path).unwrap();
    let handles = blocks(&table);
    let (_, h) = handles
        .iter()
        .find(|(kind, _)| *kind == BlockKind::Properties)
        .copied()
        .unwrap();
    let start = h.offset as usize + 20;
    table[start..start + 8].copy_from_slice(&tombstones.to_le_bytes());
    reseal(&mut table, &handles, &[]);
    std::fs::write(path, table).unwrap();
}

/// Together one more than 2^64 tombstones: `stats` summed them in a u64
/// and panicked (debug) or wrapped (release). No table can hold more
/// tombstones than entries: the open refuses a table, naming it.
#[test]
fn claimed_tombstones_past_the_entries_are_refused_at_open() {
    let dir = scratch_dir();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    let tables = two_tables(dir.path(), &options);
    claim_tombstones(&tables[0], 1 << 63);
    claim_tombstones(&tables[1], (1 << 63) + 1);
    match Db::open(dir.path(), options) {
        Err(e @ Error::Table(_)) => {
            assert!(e.is_corruption(), "{e}");
            let text = e.to_string();
            let named = tables
                .iter()
                .any(|t| text.contains(t.file_name().unwrap().to_str().unwrap()));
            assert!(named && text.contains("tombstones"), "{text}");
        }
        Ok(db) => panic!("opened; stats: {:?}", db.stats().total),
        Err(e) => panic!("not a table error: {e:?}"),
    }
}

#[test]
fn claimed_counts_past_u64_in_sum_leave_the_figures_rates() {
    let dir = scratch_dir();
    let options = Options {
        filter_kind: FilterKind::Blocked,
        background_work: false,
        ..Options::default()
    };
    let tables = two_tables(dir.path(), &options);
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
