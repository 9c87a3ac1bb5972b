//! Power loss while several frozen memtables wait with their WALs: a
//! crash at every operation of a run in which a flush of the OLDEST
//! frozen memtable is installed while two newer frozen WALs and the
//! active one stay live, then one merged flush of those two, then a few
//! writes and a close. Background work, built deterministically: table
//! files are held (`FaultFs::set_hold_table_files`) until the flush thread
//! has taken the first frozen memtable and stands before its first
//! operation (`FaultFs::table_files_waiting`), and the writes that freeze
//! the next two are made while it waits; `wait_for_background_work` then
//! queues behind the flush thread's lock, so every crash point names the
//! same operation from run to run.
//!
//! Unsynced pages persist out of order (`UnsyncedFate::Pages`) and unlinks
//! of the flushed WALs come back or not (`Revival::Seeded`). Checked after
//! each power loss: `SyncMode::Always` keeps every acknowledged write (and
//! at most the one in flight), `SyncMode::Never` a prefix of them, deletes
//! included (no deleted key back, no older version in place of a newer
//! one); no orphan table or WAL is left after the reopen.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::{
    apply_history_write, close_with_no_orphan_table, copy_store_dir, history_prefix, scratch_dir,
    wal_files,
};

/// Writes after the last rotation, none of which freezes a memtable.
const TAIL_WRITES: u64 = 3;

/// Memtables of `memtable_bytes` (1 KiB: each WAL within a page; 8 KiB:
/// each over several, so a page can be lost between two that persisted),
/// up to four frozen at once, background work, L0 never compacted in this
/// run (two flushes only): the op count depends on no thread's timing.
fn options(sync: SyncMode, memtable_bytes: usize) -> Options {
    Options {
        sync,
        memtable_bytes,
        max_immutable_memtables: 4,
        background_work: true,
        l0_compaction_trigger: 8,
        l0_slowdown_trigger: 16,
        l0_stop_trigger: 24,
        block_size: 256,
        target_file_bytes: 1024,
        ..Options::default()
    }
}

/// How far a run got.
struct Run {
    /// Writes acknowledged.
    acked: u64,
    /// Flushes installed (two when nothing failed).
    flushes: u64,
}

/// Writes the history from `*next` until `dir` holds `wals` WAL files
/// or a write fails; returns false on a failed write.
fn write_until_wals(db: &Db, dir: &Path, next: &mut u64, wals: usize) -> bool {
    while wal_files(dir) < wals {
        if apply_history_write(db, *next).is_err() {
            return false;
        }
        *next += 1;
    }
    true
}

/// Waits until the flush thread stands before creating its table. The
/// bound is on a hang, not a speed: the suite's other tests share the
/// cores, so it is generous.
fn wait_for_held_flush(fs: &FaultFs) {
    let started = Instant::now();
    while fs.table_files_waiting() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the flush never reached its table"
        );
        std::thread::yield_now();
    }
}

/// The run described in the module doc, until the crash.
fn run(dir: &Path, fs: &FaultFs, options: &Options) -> Run {
    let Ok(db) = Db::open_with_fs(dir, options.clone(), Arc::new(fs.clone())) else {
        return Run {
            acked: 0,
            flushes: 0,
        };
    };
    fs.set_hold_table_files(true);
    let mut next = 0;
    // The first rotation wakes the flush thread, which takes that one
    // frozen memtable and waits; two more are frozen behind it.
    let mut healthy = write_until_wals(&db, dir, &mut next, 2);
    if healthy && fs.faults_injected() == 0 {
        wait_for_held_flush(fs);
        healthy = write_until_wals(&db, dir, &mut next, 4);
    }
    fs.set_hold_table_files(false);
    if healthy {
        // Behind the flush thread's lock: it installs the oldest alone,
        // then the two newer ones merged.
        let _ = db.wait_for_background_work();
        for _ in 0..TAIL_WRITES {
            if apply_history_write(&db, next).is_err() {
                break;
            }
            next += 1;
        }
    }
    let flushes = db.stats().flushes;
    let _ = db.close();
    Run {
        acked: next,
        flushes,
    }
}

/// Crashes the run at operation `crash_at` and loses power; then checks
/// the reopened store. `Err` says what is wrong.
fn crash_and_check(options: &Options, crash_at: u64, seed: u64) -> Result<(), String> {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    fs.set_unsynced_fate(UnsyncedFate::Pages(seed));
    fs.set_revival(Revival::Seeded(crash_at ^ seed));
    fs.fail_from_op(crash_at);
    let run = run(dir.path(), &fs, options);
    fs.simulate_power_loss().unwrap();
    let inline = Options {
        background_work: false,
        ..options.clone()
    };
    let db = Db::open(dir.path(), inline).map_err(|e| format!("open: {e}"))?;
    let r = history_prefix(&db, run.acked + 1)?;
    let kept = match options.sync {
        SyncMode::Always => (run.acked..=run.acked + 1).contains(&r),
        SyncMode::Never => r <= run.acked,
    };
    if !kept {
        return Err(format!(
            "{r} writes recovered of {} acknowledged",
            run.acked
        ));
    }
    close_with_no_orphan_table(db, dir.path(), &format!("crash at {crash_at}"));
    if wal_files(dir.path()) != 1 {
        return Err(format!("{} WALs left", wal_files(dir.path())));
    }
    Ok(())
}

/// Every crash point of the run (and one past it) under `sync`, for
/// both memtable sizes and each page seed.
fn sweep(sync: SyncMode, seeds: &[u64]) {
    let mut failures = Vec::new();
    let mut visited = 0;
    for memtable_bytes in [1 << 10, 8 << 10] {
        let options = options(sync, memtable_bytes);
        let fs = FaultFs::new();
        let whole = run(scratch_dir().path(), &fs, &options);
        assert_eq!(whole.flushes, 2, "the shape: the oldest alone, then two");
        let total = fs.ops();
        for &seed in seeds {
            for crash_at in 0..=total {
                visited += 1;
                if let Err(why) = crash_and_check(&options, crash_at, seed) {
                    failures.push(format!(
                        "{memtable_bytes}-byte memtables, Pages({seed}), crash at {crash_at} \
                         of {total}: {why}"
                    ));
                }
            }
        }
        println!(
            "{sync:?}, {memtable_bytes}-byte memtables: {} crash points of {total} \
             operations ({} writes), seeds {seeds:?}",
            total + 1,
            whole.acked
        );
    }
    assert!(
        failures.is_empty(),
        "{sync:?}: {} of {visited} crash points failed; first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(6)]
    );
}

#[test]
fn synced_writes_survive_a_crash_among_frozen_wals() {
    sweep(SyncMode::Always, &[1]);
}

#[test]
fn unsynced_writes_leave_a_prefix_after_a_crash_among_frozen_wals() {
    sweep(SyncMode::Never, &[1, 2]);
}

/// A store's contents and last sequence number, opened inline (so the
/// orphan check races no compaction), after checking it leaves no orphan.
type Answers = (std::collections::BTreeMap<Vec<u8>, Vec<u8>>, u64);

fn answers(dir: &Path, options: &Options, what: &str) -> Answers {
    let inline = Options {
        background_work: false,
        ..options.clone()
    };
    let db = Db::open(dir, inline).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    let got = (bloomlsm_tests::contents(&db), db.last_sequence());
    close_with_no_orphan_table(db, dir, what);
    assert_eq!(wal_files(dir), 1, "{what}: a WAL left");
    got
}

/// First crashes tried by the second-crash test: every `FIRST_STEP`-th.
const FIRST_STEP: usize = 13;

/// A power loss among frozen WALs, then another at every operation of
/// the open recovering them (several WALs replayed, some with lost pages,
/// one table written, the manifest, the flushed WALs removed): the store
/// answers exactly as a clean open of the first crash's leftovers.
#[test]
fn a_crash_in_the_open_recovering_several_wals_changes_no_answer() {
    let mut second_crashes = 0;
    for sync in [SyncMode::Never, SyncMode::Always] {
        let options = options(sync, 8 << 10);
        let fs = FaultFs::new();
        run(scratch_dir().path(), &fs, &options);
        let total = fs.ops();
        for first in (0..=total).step_by(FIRST_STEP) {
            let crashed = scratch_dir();
            let fs = FaultFs::new();
            fs.set_unsynced_fate(UnsyncedFate::Pages(first));
            fs.set_revival(Revival::Seeded(first));
            fs.fail_from_op(first);
            run(crashed.path(), &fs, &options);
            fs.simulate_power_loss().unwrap();
            let what = format!("{sync:?}, first crash at {first} of {total}");
            let reference = answers(copy_store_dir(crashed.path()).path(), &options, &what);
            let probe = copy_store_dir(crashed.path());
            let fs = FaultFs::new();
            drop(Db::open_with_fs(probe.path(), options.clone(), Arc::new(fs.clone())).unwrap());
            let open_ops = fs.ops();
            for second in 0..open_ops {
                let dir = copy_store_dir(crashed.path());
                let fs = FaultFs::new();
                fs.set_unsynced_fate(UnsyncedFate::Pages(second));
                fs.set_revival(Revival::Seeded(second));
                fs.set_rename_fate(RenameFate::Seeded(first ^ second));
                fs.fail_from_op(second);
                let inline = Options {
                    background_work: false,
                    ..options.clone()
                };
                drop(Db::open_with_fs(dir.path(), inline, Arc::new(fs.clone())));
                fs.simulate_power_loss().unwrap();
                let what = format!("{what}, then at {second} of the {open_ops} of the open");
                let got = answers(dir.path(), &options, &what);
                assert!(
                    got == reference,
                    "{what}: answers otherwise than a clean open ({} keys, last sequence {}; \
                     clean: {} keys, last sequence {})",
                    got.0.len(),
                    got.1,
                    reference.0.len(),
                    reference.1
                );
                second_crashes += 1;
            }
        }
    }
    println!("{second_crashes} second crashes: every store answers as a clean open");
}
