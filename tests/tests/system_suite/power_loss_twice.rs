//! Power loss twice: a crash while a store runs, then another while the
//! open recovering it runs (the replayed WALs flushed to a table, the new
//! manifest, the orphans removed: the files the first crash left,
//! obsolete WALs and tables whose unlinks it undid among them). After the
//! second: the store answers exactly as a clean open of the first crash's
//! leftovers does, and holds no orphan.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival};
use bloomlsm::{Db, Options};
use bloomlsm_tests::crash_workload::{self, Write, small_table_options};
use bloomlsm_tests::{
    close_with_no_orphan_table, contents, copy_store_dir, history_write, scratch_dir,
};

const WRITES: u64 = 120;

/// First crashes tried: every `STEP`-th operation of the run.
const STEP: u64 = 5;

fn options() -> Options {
    small_table_options()
}

fn workload() -> Vec<Write> {
    (0..WRITES).map(history_write).collect()
}

/// Runs the history with deletes, flushing every 25 writes, until the
/// injected crash.
fn run_until_crash(dir: &Path, fs: &FaultFs) {
    crash_workload::run_until_crash(dir, fs, options(), &workload(), 25, 0);
}

/// Every pair of a store and its last sequence number.
type Answers = (BTreeMap<Vec<u8>, Vec<u8>>, u64);

/// The [`Answers`] of the store in `dir`, opened on the real file system,
/// after checking that its tables are exactly its files.
fn answers(dir: &Path, what: &str) -> Answers {
    let db = Db::open(dir, options()).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
    let got = (contents(&db), db.last_sequence());
    close_with_no_orphan_table(db, dir, what);
    got
}

/// The workload crashed by a power loss at operation `first` (unlinks
/// revived as `revival` says): its directory, the answers of a clean open
/// of it, and the operations that open makes.
fn first_crash(first: u64, revival: Revival) -> (tempfile::TempDir, Answers, u64) {
    let crashed = scratch_dir();
    let fs = FaultFs::new();
    fs.set_revival(revival);
    fs.fail_from_op(first);
    run_until_crash(crashed.path(), &fs);
    fs.simulate_power_loss().unwrap();
    let reference = answers(
        copy_store_dir(crashed.path()).path(),
        &format!("first crash at {first}"),
    );
    // The operations of an open of the crashed store.
    let probe = copy_store_dir(crashed.path());
    let fs = FaultFs::new();
    drop(Db::open_with_fs(probe.path(), options(), Arc::new(fs.clone())).unwrap());
    (crashed, reference, fs.ops())
}

#[test]
fn a_power_loss_while_recovering_from_one_changes_no_answer() {
    let fs = FaultFs::new();
    run_until_crash(scratch_dir().path(), &fs);
    let total_ops = fs.ops();
    let mut second_crashes = 0;
    for first in (0..total_ops).step_by(STEP as usize) {
        // Every undone unlink back, or a seeded half of them.
        let revival = if first % 2 == 0 {
            Revival::All
        } else {
            Revival::Seeded(first)
        };
        let (crashed, reference, open_ops) = first_crash(first, revival);
        for second in 0..open_ops {
            let dir = copy_store_dir(crashed.path());
            let fs = FaultFs::new();
            fs.set_revival(Revival::Seeded(second));
            // The open's manifest rename is about the same operation after
            // every first crash: seeded by the first crash, a second crash
            // at its directory fsync keeps it after some first crashes and
            // undoes it after others.
            fs.set_rename_fate(RenameFate::Seeded(first));
            fs.fail_from_op(second);
            let _ = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone()));
            fs.simulate_power_loss().unwrap();
            let what = format!("crash at {first}, then at {second} of the {open_ops} of the open");
            let got = answers(dir.path(), &what);
            assert!(
                got == reference,
                "{what}: the store answers otherwise than a clean open ({} keys, last sequence {}; \
                 a clean open: {} keys, last sequence {})",
                got.0.len(),
                got.1,
                reference.0.len(),
                reference.1
            );
            second_crashes += 1;
        }
    }
    println!(
        "{} first crashes of {total_ops} operations, {second_crashes} second crashes in the open after them: \
         every store answers as a clean open of the first crash's leftovers",
        total_ops.div_ceil(STEP)
    );
}

/// First crashes tried by the transient-fault test: every `TRANSIENT_STEP`-th
/// operation of the run.
const TRANSIENT_STEP: u64 = 25;

/// A power loss, then an open that fails at one operation only (a
/// transient fault: its clean-up after the failure reaches the disk, so
/// after a failed directory fsync the manifest rename it followed stays
/// pending behind the new WAL's unlink), then a second power loss that
/// keeps or undoes that rename: the store answers exactly as a clean open
/// of the first crash's leftovers.
#[test]
fn a_transient_fault_in_the_recovering_open_then_a_power_loss_changes_no_answer() {
    let fs = FaultFs::new();
    run_until_crash(scratch_dir().path(), &fs);
    let total_ops = fs.ops();
    let mut renames_pending = [0u32; 2];
    for first in (0..total_ops).step_by(TRANSIENT_STEP as usize) {
        let (crashed, reference, open_ops) = first_crash(first, Revival::Seeded(first));
        for fault in 0..open_ops {
            for (i, fate) in [RenameFate::Undone, RenameFate::Kept]
                .into_iter()
                .enumerate()
            {
                let dir = copy_store_dir(crashed.path());
                let fs = FaultFs::new();
                fs.set_revival(Revival::Seeded(fault));
                fs.set_rename_fate(fate);
                fs.fail_only_op(fault);
                drop(Db::open_with_fs(
                    dir.path(),
                    options(),
                    Arc::new(fs.clone()),
                ));
                let renamed = fs.pending_renames() > 0;
                fs.simulate_power_loss().unwrap();
                let what = format!(
                    "crash at {first}, then a fault at {fault} of the {open_ops} of the open, \
                     rename {fate:?}"
                );
                assert!(
                    answers(dir.path(), &what) == reference,
                    "{what}: answers differ"
                );
                if !renamed {
                    break;
                }
                renames_pending[i] += 1;
            }
        }
    }
    assert!(
        renames_pending[1] > 0,
        "no fault left the open's manifest rename pending"
    );
    println!(
        "{} first crashes: {} faults left a manifest rename pending, each tried undone and kept",
        total_ops.div_ceil(TRANSIENT_STEP),
        renames_pending[0]
    );
}
