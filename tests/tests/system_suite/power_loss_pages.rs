//! Power loss that persists unsynced bytes out of order: at every crash
//! point, `FaultFs` under `UnsyncedFate::Pages(seed)` keeps each unsynced
//! 4 KiB page of every surviving file with its bytes or zero-fills it, and
//! leaves each file's length anywhere from its last persisted page to its
//! written length, as a page cache's write-back, a disk's volatile cache
//! and ext4 or xfs may.
//!
//! The workload is a history with deletes, some writes grouped in batches,
//! in three shapes: 1 KiB memtables (a WAL rotation, flush and often a
//! compaction every few writes), 16 KiB memtables over the same small
//! tables (each WAL spans several pages, so a page can be lost between two
//! that persisted), both with inline work, and 16 KiB memtables flushed in
//! the background (a frozen WAL's lost page before the next WAL's records).
//! - `SyncMode::Always`: every acknowledged write was fsynced, so the open
//!   must succeed and hold them all, and nothing but a prefix of whole
//!   batches.
//! - `SyncMode::Never`: the store promises a prefix of the writes after a
//!   power loss, so `Db::open` with default options must succeed and hold
//!   a prefix of whole batches.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, UnsyncedFate};
use bloomlsm::{Db, Options, Stats, SyncMode, WriteBatch};
use bloomlsm_tests::crash_workload::small_table_options;
use bloomlsm_tests::{
    apply_history_write, close_with_no_orphan_table, history_prefix, history_write, scratch_dir,
};

/// Writes of the history.
const WRITES: u64 = 300;

/// The page seeds: each gives another mix of persisted and lost pages at
/// every crash point.
const SEEDS: [u64; 3] = [1, 2, 3];

/// Crash points visited: every one, unless `BLOOMLSM_PAGES_STRIDE` says
/// every how many.
fn stride() -> u64 {
    std::env::var("BLOOMLSM_PAGES_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// The history's writes as the store receives them: alone, or in a batch
/// of 2 to 4 (all or nothing after a crash). Every write of the history
/// is in exactly one step, in order.
fn steps() -> Vec<Range<u64>> {
    let sizes = [1, 1, 3, 1, 4, 1, 2];
    let mut steps = Vec::new();
    let mut start = 0;
    for n in sizes.iter().cycle() {
        if start >= WRITES {
            break;
        }
        let end = (start + n).min(WRITES);
        steps.push(start..end);
        start = end;
    }
    steps
}

fn apply_step(db: &Db, step: &Range<u64>) -> bloomlsm::Result<()> {
    if step.end - step.start == 1 {
        return apply_history_write(db, step.start);
    }
    let mut batch = WriteBatch::new();
    for i in step.clone() {
        match history_write(i) {
            (k, Some(v)) => batch.put(&k, &v),
            (k, None) => batch.delete(&k),
        };
    }
    db.write(batch)
}

/// The two shapes, under `sync`: named, with their options. Work is
/// inline, so a crash point names the same operation every run.
fn shapes(sync: SyncMode) -> Vec<(&'static str, Options)> {
    let small = Options {
        sync,
        ..small_table_options()
    };
    let multi_page_wals = Options {
        memtable_bytes: 16 << 10,
        ..small.clone()
    };
    vec![
        ("1 KiB memtables", small),
        ("16 KiB memtables", multi_page_wals),
    ]
}

/// 16 KiB memtables flushed by the background threads: a frozen memtable's
/// WAL may still hold unsynced pages while the next WAL fills. A crash
/// point names another operation from run to run, so its failures
/// reproduce in kind, not at the same point.
fn background_shape(sync: SyncMode) -> (&'static str, Options) {
    let (_, multi_page_wals) = shapes(sync).swap_remove(1);
    (
        "16 KiB memtables, background flushes",
        Options {
            background_work: true,
            ..multi_page_wals
        },
    )
}

/// Runs the steps until the injected crash, then closes (or, when
/// `close` is false, drops) the store; returns the writes acknowledged
/// and the store's stats just before the close.
fn run_until_crash(dir: &Path, fs: &FaultFs, options: &Options, close: bool) -> (u64, Stats) {
    let Ok(db) = Db::open_with_fs(dir, options.clone(), Arc::new(fs.clone())) else {
        return (0, Stats::default());
    };
    let mut acked = 0;
    for step in steps() {
        if apply_step(&db, &step).is_err() {
            break;
        }
        acked = step.end;
    }
    let stats = db.stats();
    if close {
        let _ = db.close();
    }
    (acked, stats)
}

/// What one crash point left: the writes acknowledged and the store's
/// directory after the power loss, and the crash named.
struct Crash {
    acked: u64,
    dir: tempfile::TempDir,
    what: String,
}

/// Crashes at operation `crash_at` (none if past the run's last), then
/// loses power with `UnsyncedFate::Pages(seed)`.
fn crash(options: &Options, close: bool, crash_at: u64, seed: u64) -> Crash {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    fs.set_unsynced_fate(UnsyncedFate::Pages(seed));
    fs.fail_from_op(crash_at);
    let (acked, _) = run_until_crash(dir.path(), &fs, options, close);
    fs.simulate_power_loss().unwrap();
    let what = format!("Pages({seed}), crash at {crash_at} ({acked} acknowledged)");
    Crash { acked, dir, what }
}

/// The operations of a run with no crash, and what it did: with inline
/// work it must flush, so that crash points fall in flushes and WAL
/// rotations too.
fn total_ops(options: &Options, close: bool) -> (u64, String) {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let (acked, stats) = run_until_crash(dir.path(), &fs, options, close);
    assert_eq!(acked, WRITES);
    assert!(options.background_work || stats.flushes > 0, "{stats:?}");
    let did = format!(
        "{} operations, {} flushes, {} compactions",
        fs.ops(),
        stats.flushes,
        stats.compactions
    );
    (fs.ops(), did)
}

/// Checks the store after a crash, opened with the run's options: `Err`
/// describes what is wrong.
type Check<'a> = &'a dyn Fn(&Options, &Crash) -> Result<(), String>;

/// Visits the crash points of each shape and seed; returns the failures
/// (each naming shape, seed and crash point) and a summary.
fn sweep(shapes: Vec<(&str, Options)>, close: bool, check: Check) -> (Vec<String>, String) {
    let mut failures = Vec::new();
    let mut visited = 0;
    let mut summary = Vec::new();
    for (shape, options) in shapes {
        let (total, did) = total_ops(&options, close);
        summary.push(format!("{shape}: {did}"));
        for seed in SEEDS {
            for crash_at in (0..=total).step_by(stride() as usize) {
                let crash = crash(&options, close, crash_at, seed);
                visited += 1;
                if let Err(why) = check(&options, &crash) {
                    failures.push(format!("{shape}, {}: {why}", crash.what));
                }
            }
        }
    }
    let summary = format!(
        "{visited} crash points ({}; seeds {SEEDS:?}, every {}), {} failed",
        summary.join(", "),
        stride(),
        failures.len()
    );
    (failures, summary)
}

/// The recovered prefix `r` of the history, checked to end on a step
/// (a batch is all or nothing).
fn whole_steps(db: &Db) -> Result<u64, String> {
    let r = history_prefix(db, WRITES)?;
    if r != 0 && !steps().iter().any(|s| s.end == r) {
        return Err(format!("{r} writes recovered: a batch split"));
    }
    Ok(r)
}

/// Fails the test with the failures of a sweep counted by shape and
/// kind, and the first few.
fn assert_none(what: &str, (failures, summary): (Vec<String>, String)) {
    let mut kinds = std::collections::BTreeMap::new();
    for f in &failures {
        let shape = f.split(", Pages").next().unwrap_or(f);
        // The kind without the scratch directory's random name.
        let kind: Vec<&str> = f
            .rsplit(": ")
            .next()
            .unwrap_or(f)
            .split(' ')
            .map(|w| w.rsplit('/').next().unwrap_or(w))
            .collect();
        *kinds
            .entry(format!("{shape}: {}", kind.join(" ")))
            .or_insert(0) += 1;
    }
    assert!(
        failures.is_empty(),
        "{what}: {summary}; by kind: {kinds:#?}; first: {:#?}",
        &failures[..failures.len().min(8)]
    );
    println!("{what}: {summary}");
}

#[test]
fn synced_writes_survive_lost_unsynced_pages() {
    let check = |options: &Options, c: &Crash| {
        // Inline work after the open: the orphan check counts the live
        // tables and then the files, with no compaction between.
        let inline = Options {
            background_work: false,
            ..options.clone()
        };
        let db = Db::open(c.dir.path(), inline).map_err(|e| format!("open: {e}"))?;
        let r = whole_steps(&db)?;
        // Only the step in flight may come back beside the acknowledged.
        let in_flight = steps()
            .into_iter()
            .find(|s| s.start == c.acked)
            .map_or(c.acked, |s| s.end);
        if !(c.acked..=in_flight).contains(&r) {
            return Err(format!("{r} writes recovered"));
        }
        close_with_no_orphan_table(db, c.dir.path(), &c.what);
        Ok(())
    };
    let mut shapes = shapes(SyncMode::Always);
    shapes.push(background_shape(SyncMode::Always));
    assert_none("SyncMode::Always", sweep(shapes, false, &check));
}

#[test]
fn never_mode_recovers_a_prefix_after_lost_unsynced_pages() {
    // The run's options matter only to the run: the open uses the defaults.
    let check = |_: &Options, c: &Crash| {
        let db = Db::open(c.dir.path(), Options::default()).map_err(|e| format!("open: {e}"))?;
        let r = whole_steps(&db)?;
        if r > c.acked {
            return Err(format!("{r} writes recovered: one that failed came back"));
        }
        close_with_no_orphan_table(db, c.dir.path(), &c.what);
        Ok(())
    };
    let mut shapes = shapes(SyncMode::Never);
    shapes.push(background_shape(SyncMode::Never));
    assert_none("SyncMode::Never", sweep(shapes, true, &check));
}
