//! A new store opened at a path whose directories do not exist yet
//! (`a/b/store` under an empty directory): the open makes each directory
//! (one file-system operation each, `FaultFs::create_dir_all`) and fsyncs
//! its parent. A failure at any operation of that open leaves nothing it
//! made, directories included (RELIABILITY row 8); a power loss at any
//! operation of the open and of the synced writes after it keeps every
//! acknowledged write, which it would not if a directory's entry never
//! became durable (`FaultFs` removes such a directory with all it holds).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode};
use common::{key, listing, scratch_dir, value};

const WRITES: u64 = 40;

fn options() -> Options {
    Options {
        sync: SyncMode::Always,
        memtable_bytes: 1024,
        background_work: false,
        ..Options::default()
    }
}

fn store(base: &Path) -> std::path::PathBuf {
    base.join("a/b/store")
}

/// The operations of a clean open of a new store under `base`.
fn open_ops() -> u64 {
    let base = scratch_dir();
    let fs = FaultFs::new();
    drop(Db::open_with_fs(store(base.path()), options(), Arc::new(fs.clone())).unwrap());
    fs.ops()
}

/// A transient fault (one operation fails, the open's clean-up after it
/// works) at each operation of the open. Before the fix, a fault at the
/// second or third directory's creation left the shallower ones behind:
/// `create_store_dir` listed what to undo only once `create_dir_all` had
/// returned.
#[test]
fn an_open_failing_at_any_operation_leaves_nothing_it_made() {
    let ops = open_ops();
    assert!(
        ops >= 3,
        "the open made its directories in {ops} operations"
    );
    let mut failed = 0;
    for n in 0..ops {
        let base = scratch_dir();
        let fs = FaultFs::new();
        fs.fail_only_op(n);
        match Db::open_with_fs(store(base.path()), options(), Arc::new(fs.clone())) {
            Ok(db) => drop(db),
            Err(e) => {
                failed += 1;
                assert_eq!(
                    listing(base.path()),
                    Vec::<String>::new(),
                    "a fault at operation {n} of {ops}: {e}"
                );
            }
        }
    }
    // Only a failed removal of an orphan may leave the open going.
    assert!(failed + 2 >= ops, "only {failed} of {ops} opens failed");
}

/// Opens a new store under `base` through `fs` and puts `WRITES` keys,
/// flushing every tenth, until one fails; returns how many were acknowledged.
fn run(base: &Path, fs: &FaultFs) -> u64 {
    let Ok(db) = Db::open_with_fs(store(base), options(), Arc::new(fs.clone())) else {
        return 0;
    };
    for i in 0..WRITES {
        if db.put(&key(i), &value(i)).is_err() {
            return i;
        }
        if i % 10 == 9 && db.flush().is_err() {
            return i + 1;
        }
    }
    WRITES
}

#[test]
fn a_power_loss_at_any_operation_of_a_new_store_keeps_every_acknowledged_write() {
    let total = {
        let base = scratch_dir();
        let fs = FaultFs::new();
        assert_eq!(run(base.path(), &fs), WRITES);
        fs.ops()
    };
    for n in 0..=total {
        let base = scratch_dir();
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(n));
        fs.set_rename_fate(RenameFate::Seeded(n));
        fs.set_revival(Revival::Seeded(n));
        fs.fail_from_op(n);
        let acked = run(base.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let what = format!("crash at operation {n} of {total}, {acked} writes acknowledged");
        let dir = store(base.path());
        if acked == 0 && !dir.join("MANIFEST").exists() {
            // Nothing was promised: whatever is left must still open.
            drop(Db::open(&dir, options()).unwrap_or_else(|e| panic!("{what}: {e}")));
            continue;
        }
        let db = Db::open(&dir, options()).unwrap_or_else(|e| panic!("{what}: open: {e}"));
        for i in 0..WRITES {
            let got = db.get(&key(i)).unwrap();
            // Every acknowledged write, and perhaps the one that failed.
            if i < acked {
                assert_eq!(got, Some(value(i)), "{what}: key {i} lost");
            } else if i > acked {
                assert_eq!(got, None, "{what}: key {i} never written");
            }
        }
    }
}
