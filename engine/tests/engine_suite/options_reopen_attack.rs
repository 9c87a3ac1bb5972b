//! Review attack: a store reopened again and again with different
//! `Options` (dynamic level budgets switched on and off over a tree with
//! data in L1..Lk, size ratio, L1 budget, table, memtable and block sizes,
//! filter kind and policy, background work, direct reads, more levels),
//! written between reopens with heavy deletes and overwrites while
//! snapshots are held, compacting on its own (inline and on the background
//! threads), with `rebuild_filters` in between. Every get (present,
//! deleted, never written), scan and snapshot read is checked against a
//! model at every step, and the tree's shape after every close. Never a
//! full `compact()`.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Error, FilterKind, FilterPolicy, Options, Snapshot};
use common::tree_shape::check_tree_shape;
use common::{
    Model, Rng, direct_reads_work, pairs, scratch_dir, short_absent as absent, short_key as key,
};

/// Keys written: `KEYS` of them, so most writes overwrite or delete.
const KEYS: u64 = 400;

fn value(rng: &mut Rng, step: u64, i: u64) -> Vec<u8> {
    let pad = rng.below(48) as usize;
    let mut v = format!("v{step}-{i}-").into_bytes();
    v.resize(v.len() + pad, b'a' + (step % 26) as u8);
    v
}

fn random_policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(5) {
        0 => FilterPolicy::Uniform { bits_per_key: 0.0 },
        1 => FilterPolicy::Uniform {
            bits_per_key: *rng.pick(&[4.5, 10.0]),
        },
        2 => FilterPolicy::PerLevel(
            (0..rng.below(6))
                .map(|_| rng.below(14) as f64 * 0.75)
                .collect::<Vec<_>>()
                .into_iter()
                .chain([7.0])
                .collect(),
        ),
        _ => FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&[3.0, 8.0, 10.0]),
        },
    }
}

/// Narrow, deep options; `min_levels` is the fewest the tree allows.
fn random_options(rng: &mut Rng, min_levels: usize, background_work: bool) -> Options {
    let l0_compaction_trigger = 1 + rng.below(4) as usize;
    let l0_slowdown_trigger = l0_compaction_trigger + rng.below(3) as usize;
    let num_levels = (5 + rng.below(4) as usize).max(min_levels);
    // Now and then the smallest sizes the options accept: every write a
    // flush, every table one key, every level over budget.
    let tiny = rng.below(8) == 0;
    let size = |rng: &mut Rng, sizes: &[u64]| if tiny { 1 } else { *rng.pick(sizes) };
    let (memtable_bytes, l1_bytes, target_file_bytes) = (
        size(rng, &[512, 1024, 2048, 4096]) as usize,
        size(rng, &[1024, 2048, 4096, 8192]),
        size(rng, &[512, 1024, 2048, 4096]),
    );
    Options {
        filter_policy: random_policy(rng),
        filter_kind: *rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]),
        block_size: *rng.pick(&[64, 128, 256, 1024, 4096]),
        memtable_bytes,
        max_immutable_memtables: 1 + rng.below(2) as usize,
        block_cache_bytes: *rng.pick(&[0, 4096, 1 << 20]),
        l0_compaction_trigger,
        l0_slowdown_trigger,
        l0_stop_trigger: l0_slowdown_trigger + 4,
        l1_bytes,
        level_size_ratio: 2 + rng.below(3),
        dynamic_level_bytes: rng.below(2) == 0,
        num_levels,
        target_file_bytes,
        background_work,
        use_direct_reads: rng.below(4) == 0,
        deletion_compaction_ratio: *rng.pick(&[None, Some(0.2), Some(0.6)]),
        ..Options::default()
    }
}

fn in_range(model: &Model, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A few gets (present, deleted, never written) of the store and of every
/// held snapshot.
fn spot_check(db: &Db, model: &Model, snaps: &[(Snapshot, Model)], rng: &mut Rng, at: &str) {
    for _ in 0..12 {
        let i = rng.below(KEYS);
        assert_eq!(
            db.get(&key(i)).unwrap(),
            model.get(&key(i)).cloned(),
            "{at}: get {i}"
        );
        assert_eq!(db.get(&absent(i)).unwrap(), None, "{at}: get absent {i}");
        for (s, m) in snaps {
            assert_eq!(
                s.get(&key(i)).unwrap(),
                m.get(&key(i)).cloned(),
                "{at}: get {i} at snapshot {}",
                s.sequence()
            );
        }
    }
}

/// Every key, the whole scan, a few range scans, for the store and for
/// every held snapshot.
fn full_check(db: &Db, model: &Model, snaps: &[(Snapshot, Model)], rng: &mut Rng, at: &str) {
    for i in 0..KEYS {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            model.get(&key(i)).cloned(),
            "{at}: get {i}"
        );
        assert_eq!(db.get(&absent(i)).unwrap(), None, "{at}: get absent {i}");
    }
    let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(pairs(db.scan::<&[u8], _>(..).unwrap()) == all, "{at}: scan");
    for _ in 0..4 {
        let a = rng.below(KEYS);
        let b = a + rng.below(KEYS / 4);
        let (lo, hi) = (key(a), absent(b));
        assert!(
            pairs(db.scan(lo.clone()..hi.clone()).unwrap()) == in_range(model, &lo, &hi),
            "{at}: scan {a}..{b}"
        );
        for (s, m) in snaps {
            assert!(
                pairs(s.scan(lo.clone()..hi.clone()).unwrap()) == in_range(m, &lo, &hi),
                "{at}: scan {a}..{b} at snapshot {}",
                s.sequence()
            );
        }
    }
    for (s, m) in snaps {
        let all: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(
            pairs(s.scan::<&[u8], _>(..).unwrap()) == all,
            "{at}: scan at snapshot {}",
            s.sequence()
        );
        for i in 0..KEYS {
            assert_eq!(
                s.get(&key(i)).unwrap(),
                m.get(&key(i)).cloned(),
                "{at}: snap get {i}"
            );
        }
    }
    let stats = db.stats();
    assert_eq!(
        stats.levels.len(),
        db.options().num_levels,
        "{at}: stats levels"
    );
    let tables: u64 = stats.levels.iter().map(|l| l.tables).sum();
    assert_eq!(stats.total.tables, tables, "{at}: stats total");
    stats_totals_sane(&stats, at);
}

/// The totals of `stats` are the levels' figures together: bits per key
/// and the formula's FPR are averages over the levels, so they lie between
/// the levels' own (those with tables; for the FPR, those with filters).
fn stats_totals_sane(stats: &bloomlsm::Stats, at: &str) {
    let within = |what: &str, total: f64, per_level: Vec<f64>| {
        if per_level.is_empty() {
            return;
        }
        let lo = per_level.iter().copied().fold(f64::MAX, f64::min);
        let hi = per_level.iter().copied().fold(f64::MIN, f64::max);
        assert!(
            total.is_finite() && total >= lo * (1.0 - 1e-9) && total <= hi * (1.0 + 1e-9),
            "{at}: total {what} {total} outside the levels' {per_level:?}"
        );
    };
    let with_tables = stats.levels.iter().filter(|l| l.tables > 0);
    within(
        "bits_per_key",
        stats.total.bits_per_key,
        with_tables.clone().map(|l| l.bits_per_key).collect(),
    );
    within(
        "theoretical_fpr",
        stats.total.theoretical_fpr,
        with_tables
            .filter(|l| l.filter_bytes > 0)
            .map(|l| l.theoretical_fpr)
            .collect(),
    );
    for (i, l) in stats.levels.iter().enumerate() {
        // Each probe of a table has one verdict; each that is not a
        // negative searches one data block, from the cache or the file.
        let searched = l.filter_true_positives + l.filter_false_positives + l.probes_without_filter;
        assert_eq!(
            l.table_probes,
            l.filter_negatives + searched,
            "{at}: L{i} probes"
        );
        assert_eq!(
            l.data_blocks_read + l.block_cache_hits,
            searched,
            "{at}: L{i} blocks"
        );
        assert!(l.tombstones <= l.entries, "{at}: L{i} tombstones");
        assert!((0.0..=1.0).contains(&l.theoretical_fpr), "{at}: L{i} fpr");
    }
}

fn open(dir: &std::path::Path, mut opts: Options, direct_ok: bool) -> (Db, Options) {
    if opts.use_direct_reads && !direct_ok {
        opts.use_direct_reads = false;
    }
    (Db::open(dir, opts.clone()).unwrap(), opts)
}

/// `epochs` opens of one store, each with new options and `ops` writes.
fn attack(seed: u64, epochs: u64, ops: u64, background: Option<bool>) {
    let mut rng = Rng(seed);
    let tmp = scratch_dir();
    let dir = tmp.path();
    let direct_ok = direct_reads_work(dir);
    let mut model = Model::new();
    let mut min_levels = 2;
    let mut step = 0u64;
    for epoch in 0..epochs {
        let bg = background.unwrap_or_else(|| rng.below(2) == 0);
        let (db, opts) = open(dir, random_options(&mut rng, min_levels, bg), direct_ok);
        let at = format!("seed {seed} epoch {epoch} ({opts:?})");
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        full_check(&db, &model, &snaps, &mut rng, &format!("{at} after open"));
        for op in 0..ops {
            step += 1;
            let i = rng.below(KEYS);
            match rng.below(100) {
                0..=54 => {
                    let v = value(&mut rng, step, i);
                    db.put(&key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
                55..=86 => {
                    db.delete(&key(i)).unwrap();
                    model.remove(&key(i));
                }
                87..=89 => {
                    // A key-ordered run, all deletes or all overwrites: a
                    // memtable of it is a table disjoint from the others
                    // (trivial moves), or a table of tombstones only.
                    let delete = rng.below(2) == 0;
                    for j in i..(i + 10 + rng.below(50)).min(KEYS) {
                        if delete {
                            db.delete(&key(j)).unwrap();
                            model.remove(&key(j));
                        } else {
                            let v = value(&mut rng, step, j);
                            db.put(&key(j), &v).unwrap();
                            model.insert(key(j), v);
                        }
                    }
                }
                90..=93 => {
                    if snaps.len() >= 3 {
                        snaps.remove(rng.below(3) as usize);
                    }
                    snaps.push((db.snapshot(), model.clone()));
                }
                94..=96 => {
                    if !snaps.is_empty() {
                        // The oldest, often: its release makes cleanups due.
                        let at = if rng.below(2) == 0 {
                            0
                        } else {
                            rng.below(snaps.len() as u64) as usize
                        };
                        snaps.remove(at);
                    }
                }
                97 => {
                    if rng.below(8) == 0 {
                        db.rebuild_filters(random_policy(&mut rng)).unwrap();
                    }
                }
                _ => {
                    if bg && rng.below(4) == 0 {
                        db.wait_for_background_work().unwrap();
                    }
                }
            }
            if op % 40 == 39 {
                spot_check(&db, &model, &snaps, &mut rng, &format!("{at} op {op}"));
            }
        }
        full_check(&db, &model, &snaps, &mut rng, &format!("{at} end"));
        if bg {
            db.wait_for_background_work().unwrap();
            full_check(&db, &model, &snaps, &mut rng, &format!("{at} settled"));
        }
        // A snapshot and an iterator held across close fail with Closed.
        let it = db.scan::<&[u8], _>(..).unwrap();
        let snap = db.snapshot();
        db.close().unwrap();
        assert!(matches!(snap.get(&key(0)), Err(Error::Closed)), "{at}");
        assert!(
            matches!(snap.scan::<&[u8], _>(..), Err(Error::Closed)),
            "{at}"
        );
        assert!(
            matches!(it.take(1).next(), Some(Err(Error::Closed))),
            "{at}"
        );
        drop(snaps);
        min_levels = check_tree_shape(dir, opts.num_levels, &at).fewest_levels;
        if std::env::var_os("ATTACK_DEBUG").is_some() {
            eprintln!(
                "seed {seed} epoch {epoch}: depth {min_levels} dyn {} levels {}",
                opts.dynamic_level_bytes, opts.num_levels
            );
        }
    }
}

#[test]
fn reopened_with_other_options_inline() {
    for seed in [1, 2, 3] {
        attack(seed, 6, 700, Some(false));
    }
}

#[test]
fn reopened_with_other_options_background() {
    for seed in [11, 12, 13] {
        attack(seed, 6, 700, Some(true));
    }
}

#[test]
fn reopened_with_other_options_mixed() {
    for seed in [21, 22, 23, 24] {
        attack(seed, 8, 500, None);
    }
}

/// Many seeds, for hunting: `ATTACK_SEEDS=from..to cargo test ... -- --ignored`.
#[test]
#[ignore]
fn reopened_with_other_options_seed_sweep() {
    let range = std::env::var("ATTACK_SEEDS").unwrap_or_else(|_| "100..110".into());
    let (a, b) = range.split_once("..").unwrap();
    for seed in a.parse::<u64>().unwrap()..b.parse::<u64>().unwrap() {
        attack(seed, 8, 800, None);
    }
}

/// Finding: `Stats::total` averaged bits per key over entries (every
/// version and tombstone) where each level averages over distinct keys,
/// and weighted the formula's FPR by entries, tables without a filter
/// included, where each level weights by its filters' keys. A store
/// written without filters, reopened with them, reported a total FPR far
/// below that of its only filtered level, and a one-level store with
/// overwrites held by a snapshot a total bits per key below its level's.
#[test]
fn stats_totals_agree_with_levels_across_a_policy_change() {
    let tmp = scratch_dir();
    let unfiltered = Options {
        filter_policy: FilterPolicy::Uniform { bits_per_key: 0.0 },
        l0_compaction_trigger: 2,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(tmp.path(), unfiltered.clone()).unwrap();
    for round in 0..2 {
        for i in 0..300 {
            db.put(&key(i), format!("{round}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    db.put(&key(0), b"last").unwrap(); // the inline compaction runs after a write
    let stats = db.stats();
    assert_eq!(
        stats.levels[0].tables, 0,
        "L0 compacted into the last level"
    );
    assert_eq!(stats.total.filter_bytes, 0);
    db.close().unwrap();

    let filtered = Options {
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        ..unfiltered
    };
    let db = Db::open(tmp.path(), filtered).unwrap();
    // The reopen flushed the WAL's one write: an L0 table of one key.
    let snapshot = db.snapshot();
    for round in 0..2 {
        for i in 1000..1300 {
            db.put(&key(i), format!("{round}").as_bytes()).unwrap();
        }
    }
    db.flush().unwrap();
    let stats = db.stats();
    let l0 = &stats.levels[0];
    assert!(l0.tables >= 1 && l0.filter_bytes > 0, "{stats:?}");
    let filtered_levels: Vec<_> = stats.levels.iter().filter(|l| l.filter_bytes > 0).collect();
    assert_eq!(filtered_levels.len(), 1, "only L0 has filters: {stats:?}");
    assert!(
        (stats.total.theoretical_fpr - l0.theoretical_fpr).abs() <= 1e-12,
        "total FPR {} but the only filtered level's is {}",
        stats.total.theoretical_fpr,
        l0.theoretical_fpr
    );
    stats_totals_sane(&stats, "after the reopen");
    drop(snapshot);
    db.close().unwrap();

    // One level holding every version a snapshot kept: the total is that
    // level's bits per key.
    let tmp = scratch_dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let snapshot = db.snapshot();
    for round in 0..3 {
        for i in 0..300 {
            db.put(&key(i), format!("{round}").as_bytes()).unwrap();
        }
        let _held = db.snapshot();
    }
    db.flush().unwrap();
    let stats = db.stats();
    assert_eq!(stats.total.tables, 1);
    assert!(stats.total.entries > 300, "the snapshots kept versions");
    assert!(
        (stats.total.bits_per_key - stats.levels[0].bits_per_key).abs() <= 1e-9,
        "total bits per key {} but the only level's is {}",
        stats.total.bits_per_key,
        stats.levels[0].bits_per_key
    );
    drop(snapshot);
}

/// Writes `n` random puts and deletes (a third deletes) over `KEYS` keys,
/// holding a snapshot taken at the start and checking it after.
fn churn(db: &Db, model: &mut Model, rng: &mut Rng, n: u64, at: &str) {
    let snap = (db.snapshot(), model.clone());
    for step in 0..n {
        let i = rng.below(KEYS);
        if rng.below(3) == 0 {
            db.delete(&key(i)).unwrap();
            model.remove(&key(i));
        } else {
            let v = value(rng, step, i);
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
    }
    full_check(db, model, std::slice::from_ref(&snap), rng, at);
}

fn non_empty_levels(db: &Db) -> Vec<usize> {
    let stats = db.stats();
    (1..stats.levels.len())
        .filter(|&l| stats.levels[l].tables > 0)
        .collect()
}

/// A static tree with data in four or more levels below L0, reopened with
/// dynamic budgets (and more levels), inline then on background threads,
/// written, then static again: every answer and snapshot checked, and the
/// tree's order after each close.
#[test]
fn dynamic_budgets_switched_over_a_deep_tree() {
    for seed in [41, 42] {
        let tmp = scratch_dir();
        let mut rng = Rng(seed);
        let mut model = Model::new();
        let static_opts = Options {
            memtable_bytes: 1024,
            target_file_bytes: 512,
            l1_bytes: 1024,
            level_size_ratio: 2,
            num_levels: 6,
            dynamic_level_bytes: false,
            background_work: false,
            ..Options::default()
        };
        let db = Db::open(tmp.path(), static_opts.clone()).unwrap();
        churn(&db, &mut model, &mut rng, 6000, "static");
        let deep = non_empty_levels(&db);
        assert!(deep.len() >= 4 && deep[0] == 1, "static tree: {deep:?}");
        db.close().unwrap();
        check_tree_shape(tmp.path(), 6, "static");

        for (round, background_work) in [false, true].into_iter().enumerate() {
            let dynamic = Options {
                dynamic_level_bytes: true,
                num_levels: 8,
                background_work,
                ..static_opts.clone()
            };
            let db = Db::open(tmp.path(), dynamic).unwrap();
            let at = format!("seed {seed} dynamic {round}");
            full_check(&db, &model, &[], &mut rng, &at);
            churn(&db, &mut model, &mut rng, 4000, &at);
            db.wait_for_background_work().unwrap();
            full_check(&db, &model, &[], &mut rng, &at);
            db.close().unwrap();
            check_tree_shape(tmp.path(), 8, &at);
        }

        let db = Db::open(
            tmp.path(),
            Options {
                num_levels: 8,
                ..static_opts
            },
        )
        .unwrap();
        full_check(&db, &model, &[], &mut rng, "static again");
        churn(&db, &mut model, &mut rng, 3000, "static again");
        db.close().unwrap();
        check_tree_shape(tmp.path(), 8, "static again");
    }
}
