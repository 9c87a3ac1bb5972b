//! Raises after a reopen at another average or with another filter kind:
//! the raise rule compares the bits per key a filter was built at (its
//! table's properties) with its target, while "over" and the budget count
//! bytes. Where the two disagree (narrow filters in whole blocks,
//! Standard's 64-bit minimum, Ribbon's two blocks, filters of another
//! kind than the store's) the settle must still end by converging (one
//! more step finds nothing, at the settled and the background
//! tolerance), keep the filters within 1.02 x uniform at the new average
//! at every install (for a reopen at a higher average; at a lower one the
//! tree starts over uniform and must never grow further over it: its
//! filters' excess over uniform's bytes for the same tables never grows
//! from one install to the next),
//! and lose no key.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use bloomlsm_filter::planning::planned_memory_bytes;
use parking_lot::Mutex;

use crate::budget_test_shapes::{
    advance_sequence, live_tables, mix, narrow_options, place, prefixed_key, spread_key as key,
    static_budget_options,
};
use crate::filter_budget::{table_filter_bytes, table_keys, table_targets};
use crate::inner::DbInner;
use crate::rebalance::{BACKGROUND_TOLERANCE, SETTLED_TOLERANCE};
use crate::{Db, FilterKind, Options, Stats};

const FIRST_BITS: f64 = 10.0;
const KINDS: [FilterKind; 3] = [
    FilterKind::Standard,
    FilterKind::Blocked,
    FilterKind::Ribbon,
];

fn options(kind: FilterKind, bits_per_key: f64) -> Options {
    narrow_options(kind, bits_per_key, false)
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Filter bytes of the live tree and uniform's at `bits` for the same
/// tables, each in the kind of its own filter.
#[derive(Clone, Copy, Debug)]
struct Sample {
    filters: u64,
    uniform: u64,
}

fn sample(inner: &DbInner, bits: f64) -> Sample {
    let kind = inner.options.filter_kind;
    let sv = inner.current.load_full();
    let mut s = Sample {
        filters: 0,
        uniform: 0,
    };
    for t in sv.version.levels.iter().flatten() {
        let own = t.table.filter().map_or(kind, |f| f.kind());
        s.filters += table_filter_bytes(t);
        s.uniform += planned_memory_bytes(own, table_keys(t), bits);
    }
    s
}

fn watch(db: &Db, bits: f64) -> Arc<Mutex<Vec<Sample>>> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&samples);
    let inner: Weak<DbInner> = Arc::downgrade(&db.inner);
    db.inner
        .install_hook
        .set(Some(Arc::new(move |_: &Stats, _: &[Vec<u64>]| {
            if let Some(inner) = inner.upgrade() {
                into.lock().push(sample(&inner, bits));
            }
        })));
    samples
}

/// A narrow deep store at `FIRST_BITS` in `kind`, with overwrites and
/// deletes, closed.
fn load(dir: &std::path::Path, kind: FilterKind) -> Model {
    let db = Db::open(dir, options(kind, FIRST_BITS)).unwrap();
    let mut model = Model::new();
    let value = |i: u64, r: u64| format!("v{i}-{r}-{:x}", mix(i ^ r)).into_bytes();
    for i in 0..2_500 {
        db.put(&key(i), &value(i, 0)).unwrap();
        model.insert(key(i), Some(value(i, 0)));
    }
    for i in (0..2_500).step_by(3) {
        if mix(i).is_multiple_of(2) {
            db.delete(&key(i)).unwrap();
            model.insert(key(i), None);
        } else {
            db.put(&key(i), &value(i, 1)).unwrap();
            model.insert(key(i), Some(value(i, 1)));
        }
    }
    db.wait_for_background_work().unwrap();
    db.close().unwrap();
    model
}

/// Reopens at `bits` in `kind`, settles, and checks convergence, memory
/// (every install within 1.02 x uniform or the bytes opened with, the
/// settled tree within 1.02 x uniform) and keys.
fn reopen(dir: &std::path::Path, kind: FilterKind, bits: f64, model: &Model, what: &str) {
    let db = Db::open(dir, options(kind, bits)).unwrap();
    let samples = watch(&db, bits);
    let opened = sample(&db.inner, bits);
    let tables = live_tables(&db).len();
    db.wait_for_background_work().unwrap();
    let rebuilt = db.stats().filters_rebalanced;
    // The settle ended because nothing is left, not at its bound.
    let again = db.inner.rebalance_filters_step(SETTLED_TOLERANCE).unwrap();
    let mut background = 0;
    while db
        .inner
        .rebalance_filters_step(BACKGROUND_TOLERANCE)
        .unwrap()
    {
        background += 1;
        assert!(
            background <= tables,
            "{what}: background cycles keep rebuilding ({background} after the settle, \
             {tables} tables)"
        );
    }
    let samples = samples.lock().clone();
    let last = sample(&db.inner, bits);
    let worst = samples
        .iter()
        .map(|s| s.filters as f64 / s.uniform.max(1) as f64)
        .fold(0.0f64, f64::max);
    println!(
        "{what}: {tables} tables, {rebuilt} rebuilt, opened {opened:?} \
         (x{:.3}), worst install x{worst:.3}, last {last:?} (x{:.3}), \
         background rebuilds after the settle {background}",
        opened.filters as f64 / opened.uniform.max(1) as f64,
        last.filters as f64 / last.uniform.max(1) as f64
    );
    assert!(
        !again,
        "{what}: a settled tree still rebuilds ({rebuilt} rebuilt by a settle bounded at {})",
        3 * tables + 8
    );
    assert_eq!(
        background, 0,
        "{what}: background cycles rebuild a settled tree"
    );
    // Over uniform by at most 2%, or by no more than the tree was before
    // this install (at first, the excess it opened with): past 1.02 x the
    // excess never grows, install after install, so what rebalancing has
    // paid back no write spends again. A write may add its own share (a
    // compaction cutting narrow tables adds their smallest filters to the
    // filters and to uniform alike): the bound is on the excess, not the
    // bytes.
    let mut excess_before = opened.filters.saturating_sub(opened.uniform);
    for (i, s) in samples.iter().enumerate() {
        let bound = (1.02 * s.uniform as f64).max((s.uniform + excess_before) as f64);
        assert!(
            s.filters as f64 <= bound,
            "{what}: install {i} of {}: {s:?} over 1.02 x uniform at {bits} \
             and over uniform by more than the {excess_before} bytes before it",
            samples.len(),
        );
        excess_before = excess_before.min(s.filters.saturating_sub(s.uniform));
    }
    assert!(
        last.filters as f64 <= 1.02 * last.uniform as f64,
        "{what}: settled at {last:?}, over 1.02 x uniform at {bits}"
    );
    for (k, v) in model {
        assert_eq!(&db.get(k).unwrap(), v, "{what}: key {k:?}");
    }
    db.close().unwrap();
}

fn reopen_every_way(first: FilterKind) {
    for second in KINDS {
        for bits in [15.0, 6.0] {
            let dir = crate::scratch_dirs::scratch_dir();
            let model = load(dir.path(), first);
            let what = format!("{first} at {FIRST_BITS} reopened as {second} at {bits}");
            reopen(dir.path(), second, bits, &model, &what);
            // And back: the first kind at the first average (filters of
            // another kind over the lower average settle under it too,
            // `foreign_filters_over_a_lower_average_are_lowered`).
            let what = format!("{what}, back to {first} at {FIRST_BITS}");
            reopen(dir.path(), first, FIRST_BITS, &model, &what);
        }
    }
}

#[test]
fn standard_store_reopened_at_other_averages_and_kinds_settles() {
    reopen_every_way(FilterKind::Standard);
}

#[test]
fn blocked_store_reopened_at_other_averages_and_kinds_settles() {
    reopen_every_way(FilterKind::Blocked);
}

#[test]
fn ribbon_store_reopened_at_other_averages_and_kinds_settles() {
    reopen_every_way(FilterKind::Ribbon);
}

/// Ribbon at 10, reopened as Standard at 15 (the settle rebuilds every
/// narrow filter as Standard at about 15), then as Ribbon at 10 again.
/// Found in review of d6138ec as "foreign filters over a lower average
/// are never lowered": "over" measured a Standard filter against Ribbon's
/// bytes at its target (a narrow Ribbon filter takes two blocks), and
/// lowering it meant rebuilding it as Ribbon. Now such a filter is
/// lowered in its own kind; but here the narrow Standard filters take
/// their 512-bit minimum, their share at 10 bits, and the tree stayed at
/// 1.024 x for another reason: the three Ribbon tables left at L3 and L4
/// sit at their targets (12.6 and 14.3 bits, above the average), which
/// the deep Standard filters, priced under the average, cannot pay for.
/// No filter is over its target; the settle now lowers, while the tree
/// is past uniform, the filters above their share (in their own kind).
#[test]
fn foreign_filters_over_a_lower_average_are_lowered() {
    let dir = crate::scratch_dirs::scratch_dir();
    let model = load(dir.path(), FilterKind::Ribbon);
    let what = "ribbon at 10 reopened as standard at 15";
    reopen(dir.path(), FilterKind::Standard, 15.0, &model, what);
    let what = "then as ribbon at 10";
    reopen(dir.path(), FilterKind::Ribbon, FIRST_BITS, &model, what);
}

/// A narrow Standard filter far over its target in a store reopened as
/// Ribbon, in a tree within uniform (so no filter is lowered for the
/// budget): 40 keys at 30 bits take 152 bytes, Standard's bytes at the
/// target (19.3 bits) 104, Ribbon's (two blocks) several times more. Rebuilt as Ribbon, the
/// filter would take more than it does, so in the store's kind it is
/// never over its target; the settle must still bring it there (in its
/// own kind), as `wait_for_background_work` promises for every filter.
#[test]
fn a_foreign_filter_over_its_target_in_a_tree_within_uniform_is_lowered() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(
        dir.path(),
        static_budget_options(FilterKind::Standard, 10.0),
    )
    .unwrap();
    // Sequences up to 100 made durable by a flush (one L0 table of one
    // key), then the narrow table under them.
    for _ in 0..100 {
        db.put(b"zz", b"v").unwrap();
    }
    db.flush().unwrap();
    let narrow: Vec<_> = (0..40).map(|i| prefixed_key("n", i)).collect();
    place(&db, 2, &narrow, 1, 30.0);
    db.close().unwrap();

    let db = Db::open(dir.path(), static_budget_options(FilterKind::Ribbon, 10.0)).unwrap();
    let deep: Vec<_> = (0..20_000).map(|i| prefixed_key("d", i)).collect();
    advance_sequence(&db, 40_000);
    place(&db, 3, &deep, 20_000, 9.0);
    db.wait_for_background_work().unwrap();

    let policy = db.inner.filter_policy.read().clone();
    let sv = db.inner.current.load_full();
    let mut tables = Vec::new();
    let (mut filters, mut uniform) = (0, 0);
    for (t, target) in table_targets(&policy, FilterKind::Ribbon, &sv.version.levels) {
        let own = t.table.filter().map_or(FilterKind::Ribbon, |f| f.kind());
        let bits = t.table.properties().bits_per_key;
        filters += table_filter_bytes(&t);
        uniform += planned_memory_bytes(own, table_keys(&t), 10.0);
        tables.push((t.meta.level, table_keys(&t), own, bits, target));
    }
    assert!(filters <= uniform, "{filters} > {uniform}: {tables:?}");
    for &(level, keys, own, bits, target) in &tables {
        assert!(
            bits <= target + SETTLED_TOLERANCE.over,
            "L{level}: {keys} keys {own} at {bits} bits per key, target {target:.2} \
             (level, keys, kind, bits, target) {tables:?}"
        );
    }
    for k in narrow.iter().chain(&deep) {
        assert_eq!(db.get(k).unwrap(), Some(b"v".to_vec()));
    }
}
