//! Power loss while filters are rewritten in place: under
//! `FilterPolicy::Optimized` every flush and compaction moves the filter
//! budgets, and so does reopening with another budget; the (inline)
//! background work rebuilds a filter after each write while any is off
//! its target, and `rebuild_filters` rewrites every table. A crash at
//! any file-system operation of that run (writing a rebuilt table, its
//! fsync, the directory's, the manifest that swaps it in), then a power
//! loss, then an open with a different filter policy must give back
//! exactly a prefix of the history (puts in key order, whose tables move
//! down whole and keep their filters until rebuilt, then deletes of those
//! keys, overwrites and new keys: a resurrected key or an older version
//! would be no prefix) holding every acknowledged write,
//! leave no orphan or missing table, and stay so after the reopened store
//! rebalances every filter to its new budget and opens once more.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, FilterKind, FilterPolicy, Options, SyncMode};
use bloomlsm_tests::{contents, key, table_files, value};

const WRITES: u64 = 900;

/// Keys of the first phase: written in key order, so flushed tables are
/// disjoint and move down whole, and the deepest level fills with tables
/// that no compaction rewrites; their filters only change by rebuilds.
const FIRST: u64 = 400;

/// Write `i`: first `FIRST` puts in key order; then in turn a delete of
/// one of those keys (deep in the tree by then), an overwrite of another,
/// and a put of a new key.
fn write(i: u64) -> (Vec<u8>, Option<Vec<u8>>) {
    if i < FIRST {
        return (key(i), Some(value(i)));
    }
    match i % 3 {
        0 => (key(i * 7 % FIRST), None),
        1 => (key(i * 13 % FIRST), Some(value(i))),
        _ => (key(i), Some(value(i))),
    }
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, i: u64) {
    match write(i) {
        (k, Some(v)) => model.insert(k, v),
        (k, None) => model.remove(&k),
    };
}

/// The `r` in `from..=to` such that the store holds exactly writes `0..r`.
fn recovered_prefix(db: &Db, from: u64, to: u64) -> Result<u64, String> {
    let got = contents(db);
    let mut model = BTreeMap::new();
    for i in 0..from {
        apply(&mut model, i);
    }
    for r in from..=to.min(WRITES) {
        if got == model {
            return Ok(r);
        }
        apply(&mut model, r);
    }
    let mut model = BTreeMap::new();
    for i in 0..from {
        apply(&mut model, i);
    }
    let diff = bloomlsm_tests::first_differences(&got, &model, &format!("after {from} writes"));
    Err(format!(
        "the store holds none of the first {from}..={to} writes: {diff:?}"
    ))
}

/// At most `max_open_files` table files open (`Some(1)`: a table whose
/// filter is rebuilt is read through a file the set holds or has closed).
/// Opening files is no operation of the `FaultFs`: crash points name the
/// same operations with the bound or without.
fn options(policy: FilterPolicy, max_open_files: Option<usize>) -> Options {
    Options {
        max_open_files,
        sync: SyncMode::Always,
        filter_policy: policy,
        // Whole 64-bit words: a filter off its target by half a bit per
        // key differs in bytes even in a small table, so it is rebuilt.
        filter_kind: FilterKind::Standard,
        memtable_bytes: 4096,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        l1_bytes: 8192,
        level_size_ratio: 3,
        target_file_bytes: 1024,
        block_size: 256,
        background_work: false,
        ..Options::default()
    }
}

/// A directory in memory (`/dev/shm`) where there is one: the fault
/// file system keeps its own account of what is durable, and each crash
/// point reruns the history with an fsync per write.
fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn optimized(bits_per_key: f64) -> FilterPolicy {
    FilterPolicy::Optimized { bits_per_key }
}

/// What one run did before the crash: writes acknowledged, and the
/// file-system operation counts around each write and rebuild.
#[derive(Default)]
struct Outcome {
    acked: u64,
    /// `[from, to)` file-system operations of each step that rebuilt
    /// filters (a write whose inline work rebalanced, or `rebuild_filters`).
    rebuild_windows: Vec<(u64, u64)>,
    rebalanced: u64,
}

/// The history until the injected crash, with the store reopened with
/// another budget a third and two thirds of the way (every filter's
/// target moves, so the inline work after each write rebuilds one) and
/// `rebuild_filters` half-way.
fn run_until_crash(dir: &std::path::Path, fs: &FaultFs, max_open_files: Option<usize>) -> Outcome {
    let mut out = Outcome::default();
    let open = |bits: f64| {
        Db::open_with_fs(
            dir,
            options(optimized(bits), max_open_files),
            Arc::new(fs.clone()),
        )
    };
    let Ok(mut db) = open(10.0) else {
        return out;
    };
    let mut rebalanced_before = 0;
    for i in 0..WRITES {
        let from = fs.ops();
        let reopen = [(FIRST * 3 / 4, 5.0), (WRITES * 5 / 6, 14.0)]
            .iter()
            .find(|(at, _)| *at == i);
        if let Some(&(_, bits)) = reopen {
            rebalanced_before += db.stats().filters_rebalanced;
            drop(db);
            match open(bits) {
                Ok(d) => db = d,
                Err(_) => return out,
            }
        }
        let before = db.stats().filters_rebalanced;
        let rebuilt = i == FIRST * 3 / 2;
        if rebuilt && db.rebuild_filters(optimized(9.0)).is_err() {
            break;
        }
        let written = match write(i) {
            (k, Some(v)) => db.put(&k, &v),
            (k, None) => db.delete(&k),
        };
        if written.is_err() {
            break;
        }
        out.acked = i + 1;
        let after = db.stats().filters_rebalanced;
        out.rebalanced = rebalanced_before + after;
        if rebuilt || after > before {
            out.rebuild_windows.push((from, fs.ops()));
        }
    }
    drop(db);
    out
}

fn check_store(dir: &std::path::Path, db: &Db, acked: u64, what: &str) -> u64 {
    // Every acknowledged write, and perhaps the one that failed.
    let recovered =
        recovered_prefix(db, acked, acked + 1).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        table_files(dir) as u64,
        db.stats().total.tables,
        "{what}: orphan or missing table"
    );
    recovered
}

#[test]
fn every_crash_point_while_filters_are_rebuilt_recovers_a_prefix() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs, None);
    assert_eq!(full.acked, WRITES);
    assert!(
        full.rebalanced >= 8,
        "only {} background rebuilds: the budgets did not move",
        full.rebalanced
    );
    let total_ops = fs.ops();
    // Every operation inside a step that rebuilt filters, and every
    // eleventh elsewhere (each crash point reruns the history up to it).
    let in_rebuild = |op: u64| {
        full.rebuild_windows
            .iter()
            .any(|&(a, b)| (a..b).contains(&op))
    };
    let points: Vec<u64> = (0..=total_ops)
        .filter(|&op| in_rebuild(op) || op % 11 == 0)
        .collect();
    let mut in_rebuilds = 0;
    for (n, &crash_at) in points.iter().enumerate() {
        // Every other crash point with one table file open, in the run and
        // in the recoveries.
        let bound = (n % 2 == 1).then_some(1);
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let run = run_until_crash(dir.path(), &fs, bound);
        fs.simulate_power_loss().unwrap();
        in_rebuilds += usize::from(in_rebuild(crash_at));
        // Open with another budget: every filter's target moves.
        let what = format!("crash at operation {crash_at}, open files {bound:?}");
        let db = Db::open(dir.path(), options(optimized(7.0), bound))
            .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        let recovered = check_store(dir.path(), &db, run.acked, &what);
        db.wait_for_background_work()
            .unwrap_or_else(|e| panic!("{what}: rebalancing after reopen failed: {e}"));
        let after = format!("{what}, rebalanced after reopen");
        assert_eq!(check_store(dir.path(), &db, recovered, &after), recovered);
        db.close().unwrap();
        let db = Db::open(
            dir.path(),
            options(FilterPolicy::Uniform { bits_per_key: 3.0 }, bound),
        )
        .unwrap_or_else(|e| panic!("{after}: second reopen failed: {e}"));
        let again = format!("{after}, opened again");
        assert_eq!(check_store(dir.path(), &db, recovered, &again), recovered);
    }
    println!(
        "{} crash points of {total_ops} file-system operations ({in_rebuilds} inside steps that \
         rebuilt filters; {} background rebuilds in the whole run): every recovery a prefix \
         holding every acknowledged write",
        points.len(),
        full.rebalanced
    );
}

/// The crash points inside steps that rebuilt filters (every third), under
/// the harsher fates the test above leaves at their defaults: unsynced
/// pages kept or zeroed out of order, pending renames all kept, all undone
/// or seeded, unlinks all revived or seeded; reopened strictly
/// (`CorruptFilterPolicy::Fail`: a manifest naming a filter whose pages
/// were lost is refused, not read around) with another file bound, where
/// a get of every key the scan shows must find it.
#[test]
fn rebalancing_crash_points_under_lost_pages_and_every_rename_fate_recover_a_prefix() {
    use bloomlsm::CorruptFilterPolicy;
    use bloomlsm::fs::fault::{RenameFate, Revival, UnsyncedFate};
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs, None);
    assert_eq!(full.acked, WRITES);
    let points: Vec<u64> = full
        .rebuild_windows
        .iter()
        .flat_map(|&(a, b)| a..b)
        .step_by(3)
        .collect();
    assert!(points.len() >= 100, "{} crash points", points.len());
    for &crash_at in &points {
        let bound = (crash_at % 2 == 1).then_some(1);
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(crash_at));
        fs.set_rename_fate(match crash_at % 3 {
            0 => RenameFate::Kept,
            1 => RenameFate::Undone,
            _ => RenameFate::Seeded(crash_at),
        });
        fs.set_revival(if crash_at % 4 < 2 {
            Revival::All
        } else {
            Revival::Seeded(crash_at)
        });
        fs.fail_from_op(crash_at);
        let run = run_until_crash(dir.path(), &fs, bound);
        fs.simulate_power_loss().unwrap();
        let what = format!("crash at operation {crash_at} (pages, renames and unlinks by seed)");
        let reopened = bound.map_or(Some(2), |_| None);
        let db = Db::open(
            dir.path(),
            Options {
                on_corrupt_filter: CorruptFilterPolicy::Fail,
                ..options(optimized(7.0), reopened)
            },
        )
        .unwrap_or_else(|e| panic!("{what}: strict reopen failed: {e}"));
        assert_eq!(
            db.stats().total.tables_without_usable_filter,
            0,
            "{what}: a table without its filter"
        );
        check_store(dir.path(), &db, run.acked, &what);
        for (k, v) in contents(&db) {
            assert_eq!(
                db.get(&k).unwrap(),
                Some(v),
                "{what}: get misses a scanned key"
            );
        }
    }
    println!(
        "{} crash points inside rebalancing steps under lost pages and every rename fate: every \
         strict reopen a prefix holding every acknowledged write",
        points.len()
    );
}
