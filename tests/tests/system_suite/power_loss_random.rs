//! Power loss at random points of random histories: batches of puts and
//! deletes over a small key space (so tables overlap and tombstones meet
//! older versions), flushes, `rebuild_filters` at random policies,
//! settling, and reopens under other options (filter kind and policy,
//! `max_open_files`, table and memtable sizes, deletion-triggered
//! compaction, `WalRecovery` mode), inline (or on background threads, seeds from `THREADED`
//! on; or with the sync mode drawn at each open, seeds from `MIXED_SYNC`
//! on). Each seed's history is run once whole to count
//! its file-system operations; then it is crashed at 12 points drawn from
//! the seed, under fates drawn from it too (pages kept or zeroed out of
//! order, renames kept, undone or seeded, unlinks revived or not), and
//! reopened on the real file system under yet other options (half the
//! time after a second crash inside the open that recovers from the
//! first).
//!
//! After each power loss the store must hold exactly the batches of some
//! prefix of the history (every batch all or nothing: each writes values
//! no other batch writes): with `SyncMode::Always` every acknowledged
//! batch and at most the one that failed; with `SyncMode::Never` at least
//! every batch acknowledged before the last clean close and none that
//! failed. A get of every key of the key space must agree with that
//! prefix (no filter false negative, no deleted key back).
//! `CRASHSWEEP_SEEDS=N` runs N seeds (24 by default, about 5 s in a
//! debug build; 800 seeds, 9,600 crashes: 150 s), `CRASHSWEEP_FIRST=S`
//! starting at seed S (0 by default), so a longer run can try new seeds.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, FilterKind, FilterPolicy, Options, SyncMode, WalRecovery, WriteBatch};
use bloomlsm_tests::{copy_store_dir, scratch_dir};

const KEYS: u64 = 160;
const STEPS: usize = 220;
const CRASHES_PER_SEED: usize = 12;

/// Seeds from this one on run with background threads (flushes,
/// compactions and rebalancing on their own threads, racing the writes
/// and the crash): their crash points fall wherever the threads are.
const THREADED: u64 = 1 << 32;
/// Seeds with this bit draw the sync mode at every open (a store written
/// under `Always` reopened under `Never` and back), where the others keep
/// one mode, by the seed's parity.
const MIXED_SYNC: u64 = 1 << 33;

/// SplitMix64: a case is the same in every build.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn key(k: u64) -> Vec<u8> {
    format!("k{k:05}").into_bytes()
}

type Op = (u64, Option<Vec<u8>>);

enum Step {
    Batch(Vec<Op>),
    Flush,
    Rebuild(FilterPolicy),
    Settle,
    /// Close, then open under the options of this variant.
    Reopen(u64),
}

fn policy(rng: &mut Rng) -> FilterPolicy {
    let bits = 1.0 + rng.below(120) as f64 / 10.0;
    match rng.below(3) {
        0 => FilterPolicy::Uniform { bits_per_key: bits },
        1 => FilterPolicy::Optimized { bits_per_key: bits },
        _ => FilterPolicy::PerLevel(vec![bits, bits / 2.0, 3.0]),
    }
}

/// The options of open number `variant` of seed `seed`: its sync mode is
/// the seed's; the rest is drawn.
fn options(seed: u64, variant: u64) -> Options {
    let mut rng = Rng(seed ^ variant.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let kinds = [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ];
    // Drawn apart from the other options, so a seed without the bit gets
    // the options it always got.
    let always = if seed & MIXED_SYNC != 0 {
        Rng(seed ^ variant.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x51c0).below(2) == 0
    } else {
        seed.is_multiple_of(2)
    };
    Options {
        sync: if always {
            SyncMode::Always
        } else {
            SyncMode::Never
        },
        memtable_bytes: [1024, 2048, 4096][rng.below(3) as usize],
        target_file_bytes: [1024, 2048, 4096][rng.below(3) as usize],
        l1_bytes: [4096, 8192][rng.below(2) as usize],
        level_size_ratio: 2 + rng.below(3),
        block_size: [128, 256, 512][rng.below(3) as usize],
        filter_kind: kinds[rng.below(3) as usize],
        filter_policy: policy(&mut rng),
        max_open_files: [None, Some(1), Some(3)][rng.below(3) as usize],
        deletion_compaction_ratio: [None, Some(0.3)][rng.below(2) as usize],
        wal_recovery: [WalRecovery::TolerateTornTail, WalRecovery::PointInTime]
            [rng.below(2) as usize],
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        background_work: seed & THREADED != 0,
        ..Options::default()
    }
}

fn history(seed: u64) -> Vec<Step> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9));
    let mut batches = 0u64;
    (0..STEPS)
        .map(|_| match rng.below(100) {
            0..=3 => Step::Flush,
            4..=6 => Step::Rebuild(policy(&mut rng)),
            7..=8 => Step::Settle,
            9..=11 => Step::Reopen(1 + rng.below(1000)),
            _ => {
                let b = batches;
                batches += 1;
                let ops = (0..1 + rng.below(4))
                    .map(|j| {
                        let k = rng.below(KEYS);
                        let value = (rng.below(3) > 0).then(|| {
                            format!("b{b}-{j}-{}", "v".repeat(rng.below(60) as usize)).into_bytes()
                        });
                        (k, value)
                    })
                    .collect();
                Step::Batch(ops)
            }
        })
        .collect()
}

/// How a run went until its first error.
#[derive(Default)]
struct Run {
    /// Batches acknowledged.
    acked: usize,
    /// Batches a power loss may not take: those acknowledged before the
    /// last clean close, and with `Always` every one acknowledged.
    durable: usize,
    /// The sync mode of the last open (tried): with `Always`, the write
    /// that failed may come back too (its fsync's fate unknown).
    always: bool,
}

fn run(dir: &Path, fs: &FaultFs, seed: u64, steps: &[Step]) -> Run {
    let always = |variant| options(seed, variant).sync == SyncMode::Always;
    let mut out = Run {
        always: always(0),
        ..Run::default()
    };
    let open = |variant| Db::open_with_fs(dir, options(seed, variant), Arc::new(fs.clone()));
    let Ok(mut db) = open(0) else {
        return out;
    };
    for step in steps {
        let ok = match step {
            Step::Batch(ops) => {
                let mut batch = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => batch.put(&key(*k), v),
                        None => batch.delete(&key(*k)),
                    };
                }
                let ok = db.write(batch).is_ok();
                if ok {
                    out.acked += 1;
                    if out.always {
                        out.durable = out.acked;
                    }
                }
                ok
            }
            Step::Flush => db.flush().is_ok(),
            Step::Rebuild(p) => db.rebuild_filters(p.clone()).is_ok(),
            Step::Settle => db.wait_for_background_work().is_ok(),
            Step::Reopen(variant) => {
                if db.close().is_err() {
                    return out;
                }
                out.durable = out.acked;
                out.always = always(*variant);
                match open(*variant) {
                    Ok(d) => {
                        db = d;
                        true
                    }
                    Err(_) => return out,
                }
            }
        };
        if !ok {
            break;
        }
    }
    out
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, ops: &[Op]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(key(*k), v.clone()),
            None => model.remove(&key(*k)),
        };
    }
}

/// The batches of `steps`, in order.
fn batches(steps: &[Step]) -> Vec<&[Op]> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Batch(ops) => Some(ops.as_slice()),
            _ => None,
        })
        .collect()
}

/// Reopens `dir` under `opts`: an error unless it holds the first `n` of
/// `batches` for an `n` in `from..=to`; panics unless every get agrees
/// with its scan.
fn check(
    dir: &Path,
    opts: Options,
    batches: &[&[Op]],
    from: usize,
    to: usize,
    what: &str,
) -> Result<(), String> {
    let db = Db::open(dir, opts).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut model = BTreeMap::new();
    let mut held = None;
    for (n, ops) in std::iter::once(None)
        .chain(batches.iter().map(Some))
        .enumerate()
    {
        if let Some(ops) = ops {
            apply(&mut model, ops);
        }
        if n > to {
            break;
        }
        if n >= from && got == model {
            held = Some(n);
            break;
        }
    }
    let Some(n) = held else {
        return Err(format!(
            "{what}: the store ({} keys) holds no prefix of {from}..={to} batches",
            got.len()
        ));
    };
    for k in 0..KEYS {
        assert_eq!(
            db.get(&key(k)).unwrap().as_ref(),
            got.get(&key(k)),
            "{what}: get and scan differ at key {k} (prefix of {n} batches)"
        );
    }
    Ok(())
}

/// Crashes each history of `seeds` at 12 points, half of them a second
/// time in the recovering open; returns how many of each.
fn crash_sweep(seeds: std::ops::Range<u64>) -> (usize, usize) {
    let mut crashes = 0;
    let mut seconds = 0;
    for seed in seeds {
        let steps = history(seed);
        let total = {
            let fs = FaultFs::new();
            let whole = run(scratch_dir().path(), &fs, seed, &steps);
            let batches = steps.iter().filter(|s| matches!(s, Step::Batch(_))).count();
            assert_eq!(whole.acked, batches, "seed {seed}: the clean run failed");
            fs.ops()
        };
        let mut rng = Rng(seed ^ 0xc4a5);
        for _ in 0..CRASHES_PER_SEED {
            let at = rng.below(total + 1);
            let fs = FaultFs::new();
            fs.set_unsynced_fate(match rng.below(2) {
                0 => UnsyncedFate::Truncated,
                _ => UnsyncedFate::Pages(rng.next()),
            });
            fs.set_rename_fate(match rng.below(3) {
                0 => RenameFate::Kept,
                1 => RenameFate::Undone,
                _ => RenameFate::Seeded(rng.next()),
            });
            fs.set_revival(match rng.below(3) {
                0 => Revival::All,
                1 => Revival::Nothing,
                _ => Revival::Seeded(rng.next()),
            });
            fs.fail_from_op(at);
            let dir = scratch_dir();
            let r = run(dir.path(), &fs, seed, &steps);
            fs.simulate_power_loss().unwrap();
            let (from, to) = (r.durable, r.acked + usize::from(r.always));
            let mut what = format!(
                "seed {seed}, crash at {at} of {total}: {} batches acknowledged, {} durable",
                r.acked, r.durable
            );
            // Every other time, a second power loss inside the open that
            // recovers from the first (its replay flush, manifest and
            // orphan removal) under other options: it may change nothing.
            if rng.below(2) == 0 {
                let opts = options(seed, 3000 + at);
                let open_ops = {
                    let probe = copy_store_dir(dir.path());
                    let fs = FaultFs::new();
                    drop(Db::open_with_fs(
                        probe.path(),
                        opts.clone(),
                        Arc::new(fs.clone()),
                    ));
                    fs.ops()
                };
                let second = rng.below(open_ops.max(1));
                let fs = FaultFs::new();
                fs.set_unsynced_fate(UnsyncedFate::Pages(rng.next()));
                fs.set_rename_fate(RenameFate::Seeded(rng.next()));
                fs.set_revival(Revival::Seeded(rng.next()));
                fs.fail_from_op(second);
                let _ = Db::open_with_fs(dir.path(), opts, Arc::new(fs.clone()));
                fs.simulate_power_loss().unwrap();
                what = format!("{what}, then at {second} of the {open_ops} of the open");
                seconds += 1;
            }
            let all = batches(&steps);
            check(dir.path(), options(seed, 5000 + at), &all, from, to, &what)
                .unwrap_or_else(|e| panic!("{e}"));
            crashes += 1;
        }
    }
    (crashes, seconds)
}

/// The seeds to run: `CRASHSWEEP_SEEDS` of them (`default` unset) from
/// `CRASHSWEEP_FIRST` (0 unset).
fn seeds(default: u64) -> std::ops::Range<u64> {
    // A knob set to something else than a number is a mistake to report,
    // not a reason to run the default seeds.
    let var = |name: &str, unset: u64| {
        std::env::var(name).map_or(unset, |s| {
            s.parse()
                .unwrap_or_else(|_| panic!("{name}={s:?} is not a number"))
        })
    };
    let first = var("CRASHSWEEP_FIRST", 0);
    first..first + var("CRASHSWEEP_SEEDS", default)
}

/// The threaded seeds of `seeds`: half as many (each runs longer), the
/// halves of its bounds, so that runs stepped by `CRASHSWEEP_FIRST` tile
/// the threaded seeds as they do the others (from the start alone, runs
/// from 0 and 24 took threaded seeds 0..12 and 24..36: 12..24 never ran).
fn threaded(seeds: std::ops::Range<u64>) -> std::ops::Range<u64> {
    THREADED + seeds.start / 2..THREADED + seeds.end / 2
}

/// Runs stepped by `CRASHSWEEP_FIRST` (0, N, 2N, ... with
/// `CRASHSWEEP_SEEDS=N`) try every threaded seed once, as they do the
/// others: their threaded ranges follow one another, no gap, no overlap.
#[test]
fn stepped_runs_try_every_threaded_seed_once() {
    for n in [1, 2, 7, 24, 25] {
        let ranges: Vec<_> = (0..6).map(|i| threaded(i * n..(i + 1) * n)).collect();
        assert_eq!(ranges[0].start, THREADED, "{n} seeds a run");
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].end, pair[1].start, "{n} seeds a run: {ranges:?}");
        }
        assert_eq!(ranges[5].end - THREADED, 6 * n / 2, "{n} seeds a run");
    }
    assert_eq!(threaded(0..24), THREADED..THREADED + 12, "the default run");
}

#[test]
fn power_loss_at_random_points_of_random_histories_keeps_a_prefix_of_whole_batches() {
    let seeds = seeds(24);
    let (crashes, seconds) = crash_sweep(seeds.clone());
    let seeds = seeds.end - seeds.start;
    println!(
        "{seeds} random histories, {crashes} crashes ({seconds} again in the recovering open): \
         every store a prefix of whole batches"
    );
}

/// The same with background threads.
#[test]
fn power_loss_at_random_points_with_background_threads_keeps_a_prefix_of_whole_batches() {
    let seeds = threaded(seeds(24));
    let (crashes, seconds) = crash_sweep(seeds.clone());
    let seeds = seeds.end - seeds.start;
    println!(
        "{seeds} random histories on background threads, {crashes} crashes ({seconds} again in \
         the recovering open): every store a prefix"
    );
}

/// The same with the sync mode drawn at every open: what a crash may take
/// follows the mode of the session it ends, and no recovery may refuse a
/// WAL an earlier session left under the other mode.
#[test]
fn power_loss_with_the_sync_mode_changing_at_reopens_keeps_a_prefix_of_whole_batches() {
    let seeds = seeds(24);
    let seeds = MIXED_SYNC + seeds.start / 2..MIXED_SYNC + seeds.end / 2;
    let (crashes, seconds) = crash_sweep(seeds.clone());
    let seeds = seeds.end - seeds.start;
    println!(
        "{seeds} random histories, the sync mode drawn at each open, {crashes} crashes \
         ({seconds} again in the recovering open): every store a prefix"
    );
}

/// Whether the store holds batch `ops`: `Some(true)` when every put of it
/// reads back, `Some(false)` when none does, `None` when it puts nothing.
/// Panics on half a batch.
fn holds(db: &Db, ops: &[Op], what: &str) -> Option<bool> {
    // Only the last write of each key in the batch is its value.
    let mut last = BTreeMap::new();
    apply(&mut last, ops);
    let puts: Vec<bool> = last
        .iter()
        .map(|(k, v)| db.get(k).unwrap().as_ref() == Some(v))
        .collect();
    match (puts.iter().all(|p| *p), puts.iter().any(|p| *p)) {
        _ if puts.is_empty() => None,
        (true, _) => Some(true),
        (false, false) => Some(false),
        _ => panic!("{what}: half of the failed batch was applied"),
    }
}

/// A transient fault (one operation fails) at a random point of a random
/// history; the store is then closed (its error ignored) and reopened, and
/// the history goes on to its end, every step of it succeeding; then a
/// clean close and a power loss. The store must hold exactly the
/// acknowledged batches and the failed one if the reopen showed it (a
/// write whose fsync failed may come back, as the last write), nothing else.
#[test]
fn a_transient_fault_then_a_reopen_loses_nothing_and_revives_nothing() {
    let seeds = seeds(24);
    let mut faults = 0;
    let mut revived = 0;
    for seed in seeds.clone() {
        let steps = history(seed);
        let total = {
            let fs = FaultFs::new();
            run(scratch_dir().path(), &fs, seed, &steps);
            fs.ops()
        };
        let mut rng = Rng(seed ^ 0x7a11);
        for _ in 0..CRASHES_PER_SEED / 2 {
            let at = rng.below(total);
            let what = format!("seed {seed}, a fault at {at} of {total}");
            let dir = scratch_dir();
            let fs = FaultFs::new();
            fs.set_unsynced_fate(UnsyncedFate::Pages(rng.next()));
            fs.set_rename_fate(RenameFate::Seeded(rng.next()));
            fs.set_revival(Revival::Seeded(rng.next()));
            fs.fail_only_op(at);
            let open = |variant| {
                Db::open_with_fs(dir.path(), options(seed, variant), Arc::new(fs.clone()))
            };
            // The open may be where the fault falls: then once more.
            let mut db = open(0).or_else(|_| open(1)).unwrap();
            // The batches the store must hold, in order; and a failed batch
            // of deletes only, which it may hold or not, with its place.
            let mut want: Vec<&[Op]> = Vec::new();
            let mut maybe: Option<(usize, &[Op])> = None;
            let mut failed = false;
            for step in &steps {
                let ok = match step {
                    Step::Batch(ops) => {
                        let mut batch = WriteBatch::new();
                        for (k, v) in ops {
                            match v {
                                Some(v) => batch.put(&key(*k), v),
                                None => batch.delete(&key(*k)),
                            };
                        }
                        let ok = db.write(batch).is_ok();
                        if ok {
                            want.push(ops);
                        }
                        ok
                    }
                    Step::Flush => db.flush().is_ok(),
                    Step::Rebuild(p) => db.rebuild_filters(p.clone()).is_ok(),
                    Step::Settle => db.wait_for_background_work().is_ok(),
                    Step::Reopen(variant) => {
                        let closed = db.close().is_ok();
                        // A fault in the open after the close: once more.
                        db = open(*variant).or_else(|_| open(variant + 1)).unwrap();
                        closed
                    }
                };
                if ok {
                    continue;
                }
                assert!(!failed, "{what}: a step failed after the reopen");
                failed = true;
                drop(db);
                db = open(7777).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
                if let Step::Batch(ops) = step {
                    match holds(&db, ops, &what) {
                        Some(true) => {
                            want.push(ops);
                            revived += 1;
                        }
                        Some(false) => {}
                        None => maybe = Some((want.len(), ops)),
                    }
                }
            }
            if db.close().is_err() {
                // The fault fell in the last close: closed after a reopen.
                assert!(!failed, "{what}: the last close failed after the reopen");
                open(7777).unwrap().close().unwrap();
            }
            fs.simulate_power_loss().unwrap();
            let opts = options(seed, 9000 + at);
            let n = want.len();
            let without = check(dir.path(), opts.clone(), &want, n, n, &what);
            if let (Err(e), Some((i, ops))) = (&without, maybe) {
                // Deletes only: held or not, the store is one of the two.
                let mut with = want.clone();
                with.insert(i, ops);
                check(dir.path(), opts, &with, n + 1, n + 1, &what)
                    .unwrap_or_else(|e2| panic!("{e}; with the failed batch: {e2}"));
            } else {
                without.unwrap_or_else(|e| panic!("{e}"));
            }
            faults += 1;
        }
    }
    println!(
        "{} random histories, {faults} transient faults then a reopen ({revived} failed \
         batches held after it): every store exactly the acknowledged batches",
        seeds.end - seeds.start
    );
}
