//! A filter whose read failed at its table's open and awaits a lookup's
//! retry (`bloomlsm_sstable`'s `table/filter_slot.rs`) counts in the
//! filter budget as the filter it will be once loaded: its bytes (exact,
//! from the block's size), its kind and its bits. So its table's share is
//! not free for a write or a raise to take while the read fails (a retry
//! that then loads it would take the tree past uniform by its bytes), a
//! retry that loads it moves no budget, and rebalancing does not rebuild
//! the table for it (reading the whole table): the retry brings it back.

use std::sync::Arc;

use crate::budget_test_shapes::spread_key as key;
use crate::filter_budget::{rebalance_pick, table_filter_bytes};
use crate::fs::fault::{FaultFs, ReadFault};
use crate::rebalance::SETTLED_TOLERANCE;
use crate::{Db, FilterKind, FilterPolicy, Options};

const KEYS: u64 = 3000;

fn options() -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 10.0 },
        filter_kind: FilterKind::Blocked,
        memtable_bytes: 16 << 10,
        l1_bytes: 48 << 10,
        level_size_ratio: 4,
        target_file_bytes: 8 << 10,
        block_cache_bytes: 0,
        background_work: false,
        ..Options::default()
    }
}

/// The filter bytes the budget counts for the live tables, the numbers
/// of the tables whose filter awaits a retry, and the table a settling
/// rebalance would rebuild.
fn budget(db: &Db) -> (u64, Vec<u64>, Option<u64>) {
    let inner = &db.inner;
    let sv = inner.current.load_full();
    let levels = &sv.version.levels;
    let counted = levels.iter().flatten().map(|t| table_filter_bytes(t)).sum();
    let awaiting = levels
        .iter()
        .flatten()
        .filter(|t| t.table.filter_awaits_retry())
        .map(|t| t.meta.number)
        .collect();
    let policy = inner.filter_policy.read().clone();
    let pick = rebalance_pick(
        &policy,
        inner.options.filter_kind,
        levels,
        0,
        SETTLED_TOLERANCE,
    );
    (counted, awaiting, pick.map(|r| r.table.meta.number))
}

#[test]
fn a_filter_awaiting_its_retry_counts_in_the_budget_as_loaded() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let open = || Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    let db = open();
    for i in 0..KEYS {
        db.put(&key(i), b"value").unwrap();
    }
    db.wait_for_background_work().unwrap();
    db.close().unwrap();
    let db = open();
    let (healthy, none, settled_pick) = budget(&db);
    assert!(none.is_empty());
    db.close().unwrap();
    // The first table's open reads its footer, properties, index, filter.
    fs.fail_reads(ReadFault::Only(fs.reads() + 3));
    let db = open();
    fs.heal();
    let (counted, awaiting, pick) = budget(&db);
    assert_eq!(awaiting.len(), 1, "one filter read failed");
    assert_eq!(db.stats().total.tables_without_usable_filter, 1);
    assert_eq!(
        counted, healthy,
        "counted as loaded while it awaits its retry"
    );
    assert_eq!(pick, settled_pick, "rebalancing rebuilds it");
    // Gets of every key: the first that probes the table loads its filter.
    for i in 0..KEYS {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"value".to_vec()), "{i}");
    }
    let (loaded, awaiting, _) = budget(&db);
    assert!(awaiting.is_empty(), "not retried");
    assert_eq!(loaded, healthy, "a retry that loads it moves the budget");
    db.close().unwrap();
}
