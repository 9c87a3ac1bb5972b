//! Power loss twice, as `power_loss_twice.rs`, under the harsher fates:
//! unsynced pages persisted out of order (`UnsyncedFate::Pages`) at both
//! power losses, renames and unlinks kept or undone by seeded choices,
//! half the first crashes in a history written with `SyncMode::Never`
//! (whose WALs a power loss leaves torn mid-log, so the recovering open
//! replays a cut log), and the store reopened after the second crash with
//! another `max_open_files` and read mode than the crashed open used.
//! After the second crash the store must answer exactly as a clean open
//! of the first crash's leftovers (same contents, same last sequence), a
//! get of every scanned key must return its value (no filter false
//! negative), and no orphan table may be left.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::crash_workload::{self, Write, small_table_options};
use bloomlsm_tests::{
    close_with_no_orphan_table, contents, copy_store_dir, history_write, scratch_dir,
};

const WRITES: u64 = 150;

/// First crashes tried: every `step()`-th operation of the run
/// (`CRASHSWEEP_STEP` to choose; 1 takes every one, a few minutes).
fn step() -> usize {
    std::env::var("CRASHSWEEP_STEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7)
}

/// The run's options: 1 KiB tables, inline work; synced or not.
fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        ..small_table_options()
    }
}

/// The options of an open after a crash: the crashed run's sync mode,
/// another file bound and read mode by `variant`.
fn reopen_options(sync: SyncMode, variant: u64, direct: bool) -> Options {
    Options {
        max_open_files: [None, Some(1), Some(4)][(variant % 3) as usize],
        use_direct_reads: direct && variant % 2 == 1,
        ..options(sync)
    }
}

fn workload() -> Vec<Write> {
    (0..WRITES).map(history_write).collect()
}

type Answers = (BTreeMap<Vec<u8>, Vec<u8>>, u64);

/// The answers of the store in `dir` opened with `opts` on the real file
/// system, after checking that get agrees with the scan and that its
/// tables are exactly its files.
fn answers(dir: &Path, opts: Options, what: &str) -> Answers {
    let db = Db::open(dir, opts).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
    let got = contents(&db);
    for (k, v) in &got {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(v),
            "{what}: get misses a key"
        );
    }
    let last = db.last_sequence();
    close_with_no_orphan_table(db, dir, what);
    (got, last)
}

fn direct_reads_work(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let ok = bloomlsm::fs::direct::DirectFile::open(&probe).is_ok();
    std::fs::remove_file(&probe).unwrap();
    ok
}

#[test]
fn a_second_power_loss_while_recovering_under_lost_pages_changes_no_answer() {
    let direct = direct_reads_work(scratch_dir().path());
    let mut seconds = 0;
    let mut firsts = 0;
    for sync in [SyncMode::Always, SyncMode::Never] {
        let total = {
            let fs = FaultFs::new();
            crash_workload::run_until_crash(
                scratch_dir().path(),
                &fs,
                options(sync),
                &workload(),
                25,
                0,
            );
            fs.ops()
        };
        for first in (0..total).step_by(step()) {
            firsts += 1;
            let crashed = scratch_dir();
            let fs = FaultFs::new();
            fs.set_unsynced_fate(UnsyncedFate::Pages(first));
            fs.set_rename_fate(RenameFate::Seeded(first));
            fs.set_revival(Revival::Seeded(first + 1));
            fs.fail_from_op(first);
            crash_workload::run_until_crash(crashed.path(), &fs, options(sync), &workload(), 25, 0);
            fs.simulate_power_loss().unwrap();
            let what = format!("{sync:?}: first crash at {first} of {total}");
            let reference = answers(copy_store_dir(crashed.path()).path(), options(sync), &what);
            let open_ops = {
                let probe = copy_store_dir(crashed.path());
                let fs = FaultFs::new();
                let opts = reopen_options(sync, first, direct);
                drop(Db::open_with_fs(probe.path(), opts, Arc::new(fs.clone())).unwrap());
                fs.ops()
            };
            for second in 0..open_ops {
                let dir = copy_store_dir(crashed.path());
                let fs = FaultFs::new();
                fs.set_unsynced_fate(UnsyncedFate::Pages(first ^ second));
                fs.set_rename_fate(RenameFate::Seeded(first + second));
                fs.set_revival(Revival::Seeded(second));
                fs.fail_from_op(second);
                let opts = reopen_options(sync, first, direct);
                let _ = Db::open_with_fs(dir.path(), opts, Arc::new(fs.clone()));
                fs.simulate_power_loss().unwrap();
                let what = format!("{what}, then at {second} of the {open_ops} of the open");
                let got = answers(dir.path(), reopen_options(sync, first + 1, direct), &what);
                assert!(
                    got == reference,
                    "{what}: the store answers otherwise than a clean open ({} keys, last \
                     sequence {}; a clean open: {} keys, last sequence {})",
                    got.0.len(),
                    got.1,
                    reference.0.len(),
                    reference.1
                );
                seconds += 1;
            }
        }
    }
    println!(
        "{firsts} first crashes, {seconds} second crashes in the open after them: every store \
         answers as a clean open of the first crash's leftovers"
    );
}
