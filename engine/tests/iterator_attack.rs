//! Review attack: long-lived iterators. `DbIter`s from `db.scan` and
//! `snapshot.scan` are kept open and read a few items at a time while the
//! store (narrow tables, many levels, heavy deletes and overwrites) takes
//! batches of writes, flushes, compacts on its own, runs bottommost
//! cleanups (snapshots released under open iterators), `rebuild_filters`
//! with other policies and rebalances optimized filters. Each must yield
//! exactly the model as of its creation (or of its snapshot), in order, no
//! key twice, no deleted key, no newer version; after `close` it fails
//! with `Error::Closed`, including once the directory is open again, and
//! dropping it then harms nothing the new store holds. Never a full
//! `compact()`.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

mod common;

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bloomlsm::{Db, DbIter, Error, FilterKind, FilterPolicy, Options, Snapshot};
use common::held_iter::HeldIter;
use common::{Model, Rng, pairs, scratch_dir, short_absent as absent, short_key as key};

const KEYS: u64 = 500;

fn policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(5) {
        0 => FilterPolicy::Uniform {
            bits_per_key: *rng.pick(&[0.0, 5.0, 10.0]),
        },
        1 => FilterPolicy::PerLevel(vec![12.0, 9.0, 6.0, 3.0, 0.0]),
        _ => FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&[4.0, 8.0, 12.0]),
        },
    }
}

fn options(rng: &mut Rng, background_work: bool) -> Options {
    let l0_compaction_trigger = 2 + rng.below(2) as usize;
    Options {
        // Optimized, so filters are rebalanced under the open iterators
        // (until a `rebuild_filters` picks another policy).
        filter_policy: FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&[4.0, 8.0, 12.0]),
        },
        filter_kind: *rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]),
        block_size: *rng.pick(&[64, 128, 512]),
        memtable_bytes: *rng.pick(&[512, 2048, 8192]),
        block_cache_bytes: *rng.pick(&[0, 8192, 1 << 20]),
        l0_compaction_trigger,
        l0_slowdown_trigger: l0_compaction_trigger + 2,
        l0_stop_trigger: l0_compaction_trigger + 6,
        l1_bytes: *rng.pick(&[1024, 2048, 4096]),
        level_size_ratio: 2 + rng.below(3),
        dynamic_level_bytes: rng.below(2) == 0,
        num_levels: 5 + rng.below(4) as usize,
        // Small tables' filters are whole blocks whatever the budget: larger
        // ones let the optimized policy move bits between levels.
        target_file_bytes: *rng.pick(&[512, 1024, 4096, 16384]),
        // Half the seeds (no draw of their own, so every seed's workload
        // stays as it was) keep one table file open: every block read
        // under an iterator may reopen its file.
        max_open_files: (l0_compaction_trigger == 3).then_some(1),
        background_work,
        ..Options::default()
    }
}

/// One open iterator and what it must yield.
struct Open {
    held: HeldIter,
    /// The snapshot it reads at, while the test keeps it.
    snapshot: Option<Arc<Snapshot>>,
}

/// Bounds of a scan.
type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

const FULL: Range = (Bound::Unbounded, Bound::Unbounded);

fn expected(model: &Model, range: &Range) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| range.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn scan_of(db: &Db, snap: Option<&Snapshot>, range: &Range) -> DbIter {
    match snap {
        Some(s) => s.scan::<Vec<u8>, _>(range.clone()).unwrap(),
        None => db.scan::<Vec<u8>, _>(range.clone()).unwrap(),
    }
}

/// A random bound: none, or included or excluded, at a key that may be
/// live, deleted or never written.
fn bound(rng: &mut Rng) -> Bound<Vec<u8>> {
    let k = match rng.below(2) {
        0 => key(rng.below(KEYS)),
        _ => absent(rng.below(KEYS)),
    };
    match rng.below(4) {
        0 => Bound::Unbounded,
        1 => Bound::Excluded(k),
        _ => Bound::Included(k),
    }
}

/// A new iterator over a random range (now and then an empty or inverted
/// one), of the store or of a held snapshot.
fn new_iter(
    db: &Db,
    model: &Model,
    snaps: &[(Arc<Snapshot>, Model)],
    rng: &mut Rng,
    n: u64,
) -> Open {
    let range: Range = (bound(rng), bound(rng));
    if !snaps.is_empty() && rng.below(2) == 0 {
        let (s, m) = &snaps[rng.below(snaps.len() as u64) as usize];
        Open {
            held: HeldIter::new(
                scan_of(db, Some(s), &range),
                expected(m, &range),
                format!("iter {n} at snapshot {} ({range:?})", s.sequence()),
            ),
            snapshot: Some(Arc::clone(s)),
        }
    } else {
        Open {
            held: HeldIter::new(
                scan_of(db, None, &range),
                expected(model, &range),
                format!("iter {n} of the store ({range:?})"),
            ),
            snapshot: None,
        }
    }
}

fn write_some(db: &Db, model: &mut Model, rng: &mut Rng, step: u64, n: u64) {
    for _ in 0..n {
        let i = rng.below(KEYS);
        if rng.below(100) < 38 {
            db.delete(&key(i)).unwrap();
            model.remove(&key(i));
        } else {
            let mut v = format!("v{step}-{i}-").into_bytes();
            v.resize(v.len() + rng.below(40) as usize, b'x');
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
    }
}

/// One store: `rounds` batches of writes and background events, every
/// open iterator read a few items between them.
/// Returns what the store did under the open iterators: compactions,
/// bottommost cleanups, trivial moves, rebalancing rebuilds.
fn attack(seed: u64, background_work: bool, rounds: u64) -> [u64; 4] {
    let mut rng = Rng(seed);
    let tmp = scratch_dir();
    let opts = options(&mut rng, background_work);
    let ctx0 = format!("seed {seed} ({opts:?})");
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    write_some(&db, &mut model, &mut rng, 0, 600);
    let mut snaps: Vec<(Arc<Snapshot>, Model)> = Vec::new();
    let mut iters: Vec<Open> = Vec::new();
    let mut made = 0;
    for round in 1..=rounds {
        let ctx = format!("{ctx0} round {round}");
        while iters.len() < 6 {
            iters.push(new_iter(&db, &model, &snaps, &mut rng, made));
            made += 1;
        }
        let n = 5 + rng.below(40);
        write_some(&db, &mut model, &mut rng, round, n);
        match rng.below(20) {
            0 | 1 => {
                if snaps.len() >= 3 {
                    snaps.remove(0);
                }
                snaps.push((Arc::new(db.snapshot()), model.clone()));
            }
            // The oldest, under open iterators that may read at it: a
            // bottommost cleanup may now rewrite what they read.
            2 | 3 if !snaps.is_empty() => drop(snaps.remove(0)),
            4 => db.flush().unwrap(),
            5 => db.rebuild_filters(policy(&mut rng)).unwrap(),
            6 => db.wait_for_background_work().unwrap(),
            7 => {
                // Drop the test's hold on an iterator's snapshot: only the
                // iterator's own view remains.
                for o in &mut iters {
                    o.snapshot = None;
                }
            }
            _ => {}
        }
        let mut i = 0;
        while i < iters.len() {
            let n = rng.below(5);
            if iters[i].held.read(n, &ctx) {
                iters.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if round % 25 == 0 {
            for _ in 0..20 {
                let i = rng.below(KEYS);
                assert_eq!(
                    db.get(&key(i)).unwrap(),
                    model.get(&key(i)).cloned(),
                    "{ctx}: get {i}"
                );
            }
        }
    }
    // Work the rounds made due runs now, under the iterators still held,
    // so the counts below do not depend on how fast the threads ran.
    if background_work {
        db.wait_for_background_work().unwrap();
    }
    let stats = db.stats();
    let done = [
        stats.compactions,
        stats.bottom_cleanups,
        stats.trivial_moves,
        stats.filters_rebalanced,
    ];
    // Another store opened, written and closed meanwhile changes nothing.
    {
        let other = scratch_dir();
        let o = Db::open(other.path(), opts.clone()).unwrap();
        let mut m = Model::new();
        write_some(&o, &mut m, &mut rng, 9999, 300);
        o.close().unwrap();
        let o = Db::open(other.path(), opts.clone()).unwrap();
        let got = pairs(o.scan::<&[u8], _>(..).unwrap());
        assert!(got == expected(&m, &FULL), "{ctx0}: other store");
    }
    // An iterator that ends here has reported its end: it cannot report
    // `Closed` below, so it is let go as the rounds let go of theirs.
    iters.retain_mut(|o| !o.held.read(2, &format!("{ctx0} after the other store")));
    // Closed under open iterators; the directory opened again while they
    // live; they fail with Closed; then dropped, and the new store reads on.
    let survivors = iters;
    db.close().unwrap();
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    for mut o in survivors {
        assert!(
            matches!(o.held.it.next(), Some(Err(Error::Closed))),
            "{ctx0}: {}",
            o.held.what
        );
        assert!(
            o.held.it.next().is_none(),
            "{ctx0}: {} after Closed",
            o.held.what
        );
    }
    drop(snaps);
    write_some(&db, &mut model, &mut rng, rounds + 1, 200);
    if background_work {
        db.wait_for_background_work().unwrap();
    }
    let got = pairs(db.scan::<&[u8], _>(..).unwrap());
    assert!(got == expected(&model, &FULL), "{ctx0}: after reopen");
    db.close().unwrap();
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    for i in 0..KEYS {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            model.get(&key(i)).cloned(),
            "{ctx0}: final get {i}"
        );
    }
    db.close().unwrap();
    let mut done = done;
    done[3] += rebalance_under_iterators(tmp.path(), &opts, &mut model, &mut rng, &ctx0);
    done
}

/// Reopens the store inline at a budget no round picks (every filter
/// that is not a whole block off its target), opens iterators, then
/// rebalances under them: each write rebuilds at most one filter, and the
/// wait the rest. With background threads the rounds above rebalance only
/// when the timing lets a budget move between two cycles (none in most
/// runs), so this is what makes every seed rebalance under iterators.
/// Returns the filters rebalanced.
fn rebalance_under_iterators(
    dir: &std::path::Path,
    opts: &Options,
    model: &mut Model,
    rng: &mut Rng,
    ctx0: &str,
) -> u64 {
    let opts = Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 20.0 },
        background_work: false,
        ..opts.clone()
    };
    let db = Db::open(dir, opts.clone()).unwrap();
    let snap = Arc::new(db.snapshot());
    let snaps = vec![(Arc::clone(&snap), model.clone())];
    let mut iters: Vec<Open> = (0..6)
        .map(|n| new_iter(&db, model, &snaps, rng, n))
        .collect();
    for round in 0..20 {
        let ctx = format!("{ctx0} rebalance round {round}");
        write_some(&db, model, rng, 10_000 + round, 3);
        iters.retain_mut(|o| !o.held.read(1 + rng.below(3), &ctx));
    }
    db.wait_for_background_work().unwrap();
    let ctx = format!("{ctx0} after the rebalance");
    for mut o in iters {
        while !o.held.read(50, &ctx) {}
    }
    let rebalanced = db.stats().filters_rebalanced;
    drop(snap);
    drop(snaps);
    let got = pairs(db.scan::<&[u8], _>(..).unwrap());
    assert!(got == expected(model, &FULL), "{ctx}: scan");
    db.close().unwrap();
    rebalanced
}

/// Runs `attack` for each seed and checks the iterators were open across
/// every kind of tree change.
fn attack_seeds(seeds: std::ops::Range<u64>, background_work: Option<bool>, rounds: u64) {
    let mut done = [0u64; 4];
    for seed in seeds {
        let bg = background_work.unwrap_or(seed % 2 == 0);
        let d = attack(seed, bg, rounds);
        if std::env::var_os("ATTACK_DEBUG").is_some() {
            eprintln!("seed {seed}: {d:?}");
        }
        for (sum, n) in done.iter_mut().zip(d) {
            *sum += n;
        }
    }
    if std::env::var_os("ATTACK_DEBUG").is_some() {
        eprintln!("compactions, cleanups, moves, rebalanced: {done:?}");
    }
    assert!(
        done.iter().all(|&n| n > 0),
        "compactions, cleanups, moves, rebalanced: {done:?}"
    );
}

#[test]
fn slow_iterators_inline() {
    attack_seeds(1..5, Some(false), 300);
}

#[test]
fn slow_iterators_background() {
    attack_seeds(11..15, Some(true), 300);
}

/// Iterators read on other threads, a few items at a time, while this
/// thread writes, rebuilds filters and releases snapshots, and the
/// background threads flush, compact, clean up and rebalance.
fn read_elsewhere(seed: u64, rounds: u64) {
    let mut rng = Rng(seed);
    let tmp = scratch_dir();
    let opts = options(&mut rng, true);
    let ctx = format!("seed {seed} ({opts:?})");
    let db = Db::open(tmp.path(), opts).unwrap();
    let mut model = Model::new();
    write_some(&db, &mut model, &mut rng, 0, 600);
    let mut snaps: Vec<(Arc<Snapshot>, Model)> = Vec::new();
    for round in 1..=rounds {
        snaps.push((Arc::new(db.snapshot()), model.clone()));
        let readers: Vec<_> = (0..3)
            .map(|n| {
                let mut o = new_iter(&db, &model, &snaps, &mut rng, n);
                // The test lets go of the snapshot: the iterator alone
                // holds what it reads.
                o.snapshot = None;
                let ctx = format!("{ctx} round {round}");
                std::thread::spawn(move || {
                    while !o.held.read(3, &ctx) {
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        if snaps.len() > 2 {
            snaps.remove(0);
        }
        for _ in 0..8 {
            let n = 10 + rng.below(40);
            write_some(&db, &mut model, &mut rng, round, n);
        }
        if rng.below(4) == 0 {
            db.rebuild_filters(policy(&mut rng)).unwrap();
        }
        for r in readers {
            r.join().unwrap();
        }
    }
    db.wait_for_background_work().unwrap();
    let got = pairs(db.scan::<&[u8], _>(..).unwrap());
    assert!(got == expected(&model, &FULL), "{ctx}: final scan");
}

#[test]
fn iterators_read_on_other_threads() {
    for seed in [31, 32, 33] {
        read_elsewhere(seed, 40);
    }
}

/// Many seeds, for hunting: `ATTACK_SEEDS=from..to cargo test ... -- --ignored`.
#[test]
#[ignore]
fn slow_iterators_seed_sweep() {
    let range = std::env::var("ATTACK_SEEDS").unwrap_or_else(|_| "100..110".into());
    let (a, b) = range.split_once("..").unwrap();
    attack_seeds(a.parse().unwrap()..b.parse().unwrap(), None, 400);
}

/// Finding: a scan opened a cursor on every table its range meets, each
/// seeking and reading its first data block at once, where a sorted level
/// can only ever be read one table after another. A scan over a store of
/// many tables read one block of every table before yielding anything and
/// pinned those blocks for as long as the iterator lived. It must read, on
/// creation and first item, at most one table per sorted level (and each
/// L0 table).
#[test]
fn a_scan_opens_one_table_per_sorted_level_at_a_time() {
    let tmp = scratch_dir();
    let opts = Options {
        memtable_bytes: 4096,
        target_file_bytes: 1024,
        l1_bytes: 4096,
        level_size_ratio: 4,
        block_size: 256,
        block_cache_bytes: 64 << 20,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    let mut rng = Rng(7);
    let mut model = Model::new();
    write_some(&db, &mut model, &mut rng, 0, 8000);
    db.close().unwrap();
    // A cold cache: what the scan reads is what it adds.
    let db = Db::open(tmp.path(), opts).unwrap();
    let stats = db.stats();
    let tables = stats.total.tables;
    let runs =
        stats.levels[0].tables + stats.levels[1..].iter().filter(|l| l.tables > 0).count() as u64;
    assert!(
        tables >= 4 * runs,
        "{tables} tables in {runs} runs: not the shape under test"
    );
    let before = db.stats().block_cache_used_bytes;
    let mut it = db.scan::<&[u8], _>(..).unwrap();
    assert_eq!(it.next().unwrap().unwrap(), expected(&model, &FULL)[0]);
    let blocks = (db.stats().block_cache_used_bytes - before) / 256;
    assert!(
        blocks <= 2 * runs,
        "a scan's first item read about {blocks} blocks of {tables} tables in {runs} runs"
    );
    let rest: Vec<_> = it.map(|r| r.unwrap()).collect();
    assert!(rest == expected(&model, &FULL)[1..], "the rest of the scan");
}

/// Bytes allocated by this thread (the test binary's allocator counts).
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    }

    pub struct Counting;

    // SAFETY: every call is passed to `System` unchanged; the counter is a
    // const-initialised thread-local `Cell`, which allocates nothing.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size() as u64));
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = ALLOCATED.try_with(|a| a.set(a.get() + new_size as u64));
            // SAFETY: the caller's contract, passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    pub fn allocated() -> u64 {
        ALLOCATED.with(Cell::get)
    }
}

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Finding: a scan copied every version of its range out of each memtable
/// when it was made, so `db.scan(k..).take(10)` over a full memtable
/// allocated and copied the memtable's whole tail (megabytes with the
/// default 8 MiB memtable) to return ten pairs, and a long-lived iterator
/// kept that copy. It must read the memtables as it goes.
#[test]
fn a_short_scan_does_not_copy_the_memtable() {
    let tmp = scratch_dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let value = vec![b'v'; 100];
    for i in 0..20_000 {
        db.put(&key(i), &value).unwrap();
    }
    assert_eq!(db.stats().total.tables, 0, "everything in the memtable");
    for from in [0, 10_000, 19_995] {
        let before = counting::allocated();
        let got: Vec<_> = db
            .scan(key(from)..)
            .unwrap()
            .take(10)
            .map(|r| r.unwrap())
            .collect();
        let allocated = counting::allocated() - before;
        let want: Vec<_> = (from..(from + 10).min(20_000))
            .map(|i| (key(i), value.clone()))
            .collect();
        assert!(got == want, "scan from {from}");
        assert!(
            allocated < 256 << 10,
            "a scan of 10 pairs from {from} allocated {allocated} bytes"
        );
    }
}

/// Iterators over a large active memtable (read a chunk at a time) while
/// writers keep inserting into it: several versions of every key, held by
/// snapshots, so chunks end inside a key's versions; each iterator read a
/// few items between batches and checked against the model at its start.
#[test]
fn iterators_over_a_memtable_being_written() {
    for seed in [51, 52] {
        let mut rng = Rng(seed);
        let tmp = scratch_dir();
        let db = Db::open(tmp.path(), Options::default()).unwrap();
        let mut model = Model::new();
        let mut snaps: Vec<(Arc<Snapshot>, Model)> = Vec::new();
        for round in 0..4 {
            write_some(&db, &mut model, &mut rng, round, 1500);
            snaps.push((Arc::new(db.snapshot()), model.clone()));
        }
        let mut iters: Vec<Open> = (0..8)
            .map(|n| new_iter(&db, &model, &snaps, &mut rng, n))
            .collect();
        let ctx = format!("seed {seed}");
        let mut round = 4;
        while !iters.is_empty() {
            round += 1;
            let n = 1 + rng.below(60);
            write_some(&db, &mut model, &mut rng, round, n);
            if round % 7 == 0 {
                snaps.remove(0);
                snaps.push((Arc::new(db.snapshot()), model.clone()));
            }
            iters.retain_mut(|o| !o.held.read(1 + rng.below(6), &ctx));
        }
        assert_eq!(db.stats().flushes, 0, "{ctx}: all in the memtable");
    }
}
