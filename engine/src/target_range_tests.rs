//! Every filter budget `Optimized` hands out is a bits per key the policy
//! accepts (finite, in 0..=100): targets for runs of very different sizes
//! (a one-key level over a large one, many one-key levels, levels of
//! tombstones only), at averages near the ends of the range. Monkey gives
//! a run ln(N / n_i) / s bits above the deep level's, so at b = 100 a
//! one-key run over 20,000 keys was priced at about 119 bits per key and
//! `rebuild_filters` built its filter there.

use std::sync::Arc;

use bloomlsm_sstable::EntryKind;

use crate::budget_test_shapes::{
    advance_sequence, place, place_entries, prefixed_key, static_budget_options,
};
use crate::filter_budget::{Plan, PlannedWrite, plan_write, rebalance_pick, table_targets};
use crate::rebalance::SETTLED_TOLERANCE;
use crate::scratch_dirs::scratch_dir;
use crate::version::TableHandle;
use crate::{Db, FilterKind, FilterPolicy, Options};

fn options(kind: FilterKind, bits: f64) -> Options {
    Options {
        num_levels: 10,
        ..static_budget_options(kind, bits)
    }
}

/// Every live table's target, and its filter's recorded bits, within the
/// accepted range.
fn assert_in_range(db: &Db, policy: &FilterPolicy, what: &str) {
    let kind = db.inner.options.filter_kind;
    let sv = db.inner.current.load_full();
    for (t, bits) in table_targets(policy, kind, &sv.version.levels) {
        assert!(
            bits.is_finite() && (0.0..=100.0).contains(&bits),
            "{what}: L{} table {} targeted at {bits} bits per key",
            t.meta.level,
            t.meta.number
        );
        let built = t.table.properties().bits_per_key;
        assert!(
            built.is_finite() && (0.0..=100.0).contains(&built),
            "{what}: L{} table {} built at {built} bits per key",
            t.meta.level,
            t.meta.number
        );
    }
}

/// A one-key L2 over a 20,000-key L3, rebuilt under `Optimized` at 100.
#[test]
fn a_one_key_run_over_a_large_one_at_100_bits_stays_in_range() {
    for kind in [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ] {
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options(kind, 100.0)).unwrap();
        let deep: Vec<_> = (0..20_000).map(|i| prefixed_key("d", i)).collect();
        place(&db, 3, &deep, 1, 10.0);
        place(&db, 2, &[prefixed_key("a", 0)], 30_000, 10.0);
        advance_sequence(&db, 40_000);
        let policy = FilterPolicy::Optimized {
            bits_per_key: 100.0,
        };
        db.rebuild_filters(policy.clone()).unwrap();
        assert_in_range(&db, &policy, &format!("{kind:?}"));
        assert!(db.get(&prefixed_key("a", 0)).unwrap().is_some());
        assert!(db.get(&prefixed_key("d", 19_999)).unwrap().is_some());
    }
}

/// Writes `keys` (ascending) as one table of tombstones at `level`,
/// sequences from `first_seq`, with a filter at 10 bits, and installs it.
fn place_tombstones(db: &Db, level: usize, keys: &[Vec<u8>], first_seq: u64) -> Arc<TableHandle> {
    place_entries(
        db,
        level,
        keys,
        first_seq,
        &Plan::unbounded(10.0),
        EntryKind::Delete,
    )
}

fn in_range(bits: f64) -> bool {
    bits.is_finite() && (0.0..=100.0).contains(&bits)
}

/// Ten levels: empty ones between one-key levels, a level of tombstones
/// only (deleting keys of a deeper level), a two-key level, large deep
/// levels. At averages from below the smallest filter to 100, every
/// target, every write's plan (a one-key and a no-key flush, a compaction
/// of the deep levels) and every rebalancing rebuild is within range, and
/// `rebuild_filters` keeps every answer (the deleted keys stay deleted).
#[test]
fn one_key_levels_empty_levels_and_tombstone_levels_get_budgets_in_range() {
    for kind in [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ] {
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options(kind, 10.0)).unwrap();
        let deep: Vec<_> = (0..5000).map(|i| prefixed_key("j", i)).collect();
        let l6: Vec<_> = (0..1000).map(|i| prefixed_key("g", i)).collect();
        let deleted: Vec<_> = (0..50).map(|i| prefixed_key("g", i * 2)).collect();
        place(&db, 9, &deep, 1, 10.0);
        place(&db, 8, &[prefixed_key("i", 0)], 6000, 10.0);
        place_tombstones(&db, 7, &[prefixed_key("h", 0)], 6001);
        place(&db, 6, &l6, 7000, 10.0);
        // Tombstones over half of L6's first 100 keys.
        place_tombstones(&db, 2, &deleted, 9000);
        place(
            &db,
            3,
            &[prefixed_key("c", 0), prefixed_key("c", 1)],
            9500,
            10.0,
        );
        place(&db, 5, &[prefixed_key("e", 0)], 9600, 10.0);
        place(&db, 0, &[prefixed_key("z", 0)], 9700, 10.0);
        advance_sequence(&db, 10_000);
        for bits in [0.0, 0.5, 1.0, 1.02, 1.049, 2.5, 10.0, 33.3, 99.99, 100.0] {
            let policy = FilterPolicy::Optimized { bits_per_key: bits };
            let what = format!("{kind:?} at {bits}");
            let sv = db.inner.current.load_full();
            let levels = &sv.version.levels;
            for (t, b) in table_targets(&policy, kind, levels) {
                assert!(in_range(b), "{what}: L{} target {b}", t.meta.level);
            }
            let deep_tables: Vec<_> = levels[6].iter().chain(&levels[9]).cloned().collect();
            for write in [
                PlannedWrite {
                    level: 0,
                    keys: 1,
                    removed: &[],
                },
                PlannedWrite {
                    level: 0,
                    keys: 0,
                    removed: &[],
                },
                PlannedWrite {
                    level: 9,
                    keys: 6000,
                    removed: &deep_tables,
                },
            ] {
                let plan = plan_write(&policy, kind, levels, write, 0);
                assert!(
                    in_range(plan.bits_per_key),
                    "{what}: a write of {} keys into L{} planned at {}",
                    write.keys,
                    write.level,
                    plan.bits_per_key
                );
            }
            if let Some(r) = rebalance_pick(&policy, kind, levels, 0, SETTLED_TOLERANCE) {
                assert!(
                    in_range(r.plan.bits_per_key),
                    "{what}: a rebuild at {}",
                    r.plan.bits_per_key
                );
            }
            db.rebuild_filters(policy.clone()).unwrap();
            assert_in_range(&db, &policy, &what);
            for (k, want) in [
                (prefixed_key("g", 0), false),
                (prefixed_key("g", 1), true),
                (prefixed_key("g", 98), false),
                (prefixed_key("g", 999), true),
                (prefixed_key("h", 0), false),
                (prefixed_key("j", 4999), true),
                (prefixed_key("c", 1), true),
                (prefixed_key("e", 0), true),
                (prefixed_key("i", 0), true),
                (prefixed_key("z", 0), true),
            ] {
                assert_eq!(
                    db.get(&k).unwrap().is_some(),
                    want,
                    "{what}: {}",
                    k.escape_ascii()
                );
            }
        }
    }
}
