//! `Db::wait_for_background_work` promises that background flushes and
//! compactions "have nothing left to do" when it returns. Under
//! `FilterPolicy::Optimized` it did not: `settle_background_work`
//! (`engine/src/background.rs`) flushed, compacted while a level needed
//! it, then settled the filters (`settle_filters`) once; the rebalancing
//! rebuilds change the tables' file sizes (filters of other sizes, bytes
//! left unused by in-place appends), and level budgets count file sizes
//! (`compaction::pick::level_bytes`), so a level can be over its budget
//! again when the wait returned. Inline (no background threads) a second
//! wait, with no write in between, then ran more compactions (before the
//! fix: round 11, compactions 312 -> 314, tables per level
//! `[0, 0, 1, 3, 6, 12, 42]` -> `[.., 5, ..]`; with `Uniform` all 40 rounds
//! passed); with the background threads the compaction thread ran them
//! right after the wait returned (seen as a table write taking a fault
//! armed for the close that followed). Now the settle repeats its rounds
//! until one installs nothing.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};
use common::{Rng, scratch_dir};

fn counts(db: &Db) -> (u64, u64, u64, u64, Vec<u64>) {
    let s = db.stats();
    (
        s.compactions,
        s.trivial_moves,
        s.bottom_cleanups,
        s.filters_rebalanced,
        s.levels.iter().map(|l| l.tables).collect(),
    )
}

#[test]
fn a_second_wait_finds_nothing_to_do() {
    let options = Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 9.9 },
        filter_kind: FilterKind::Ribbon,
        block_size: 64,
        memtable_bytes: 700,
        target_file_bytes: 500,
        l1_bytes: 800,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 7,
        background_work: false,
        ..Options::default()
    };
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options).unwrap();
    let mut rng = Rng(9);
    for round in 0..40 {
        for n in 0..100u64 {
            let k = format!("k{:05}", rng.below(300)).into_bytes();
            if rng.below(5) < 2 {
                db.delete(&k).unwrap();
            } else {
                let mut v = format!("v{round}-{n}-").into_bytes();
                v.resize(v.len() + rng.below(60) as usize, b'.');
                db.put(&k, &v).unwrap();
            }
        }
        db.wait_for_background_work().unwrap();
        let settled = counts(&db);
        db.wait_for_background_work().unwrap();
        let again = counts(&db);
        assert_eq!(
            settled, again,
            "round {round}: a second wait, with no write between, did more work \
             (compactions, trivial moves, cleanups, rebalanced filters, tables per level)"
        );
    }
}
