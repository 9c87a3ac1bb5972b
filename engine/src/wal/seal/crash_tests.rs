//! Review rev8: a crash at every operation of a clean close that seals a
//! frozen WAL and the active one (the marker and the `CLOSED` flag go to
//! the newest, which may hold no write but the marker), then a power loss:
//! every open succeeds (`TolerateTornTail`, read-only and read-write) and
//! keeps every write the close's fsyncs made durable.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::sync::Arc;

use crate::fs::fault::{FaultFs, OverwriteFate, RenameFate, Revival, UnsyncedFate};
use crate::{Db, Options, SyncMode};

fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

/// How many of the writes `0..` the store at `dir` holds, when they are
/// a prefix; an error naming what it holds otherwise.
fn prefix_held(dir: &Path, sync: SyncMode, read_only: bool) -> Result<usize, String> {
    let db = if read_only {
        Db::open_read_only(dir, options(sync))
    } else {
        Db::open(dir, options(sync))
    }
    .map_err(|e| format!("refused: {e}"))?;
    let held: Vec<bool> = (0..8).map(|i| db.get(&key(i)).unwrap().is_some()).collect();
    let n = held.iter().take_while(|h| **h).count();
    if held[n..].iter().any(|h| *h) {
        return Err(format!("a hole: {held:?}"));
    }
    Ok(n)
}

/// Writes 6 keys (`in_newest` of them after the freeze), closes with
/// every operation from the `crash_at`-th failing, loses power. Returns
/// whether the close returned `Ok`, and the failure, if any.
fn run(
    sync: SyncMode,
    in_newest: usize,
    crash_at: u64,
    fates: (UnsyncedFate, OverwriteFate),
) -> (bool, Option<String>) {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_unsynced_fate(fates.0);
    fs.set_overwrite_fate(fates.1);
    fs.set_revival(Revival::Nothing);
    fs.set_rename_fate(RenameFate::Kept);
    let db = Db::open_with_fs(dir.path(), options(sync), Arc::new(fs.clone())).unwrap();
    for i in 0..6 {
        if i == 6 - in_newest {
            let mut w = db.inner.write.lock();
            db.inner.rotate_memtable(&mut w).unwrap();
        }
        db.put(&key(i), b"v").unwrap();
    }
    if in_newest == 0 {
        let mut w = db.inner.write.lock();
        db.inner.rotate_memtable(&mut w).unwrap();
    }
    fs.fail_from_op(fs.ops() + crash_at);
    let closed = db.close().is_ok();
    fs.heal();
    fs.simulate_power_loss().unwrap();
    let at = format!("{sync:?} {in_newest} in the newest, crash at {crash_at} {fates:?}");
    // Always: every put was fsynced. Never: a prefix, all after an Ok close.
    let least = if sync == SyncMode::Always || closed {
        6
    } else {
        0
    };
    for read_only in [true, false] {
        match prefix_held(dir.path(), sync, read_only) {
            Err(e) => return (closed, Some(format!("{at}: {e}"))),
            Ok(n) if n < least => {
                return (closed, Some(format!("{at}: {n} of 6 writes")));
            }
            Ok(_) => {}
        }
    }
    (closed, None)
}

#[test]
fn a_crash_anywhere_in_a_close_sealing_a_frozen_wal_is_only_a_crash() {
    let fates = [
        (UnsyncedFate::Truncated, OverwriteFate::Applied),
        (UnsyncedFate::Pages(3), OverwriteFate::Seeded(2)),
        (UnsyncedFate::Pages(5), OverwriteFate::Lost),
    ];
    let mut failures = Vec::new();
    let mut runs = 0;
    for sync in [SyncMode::Never, SyncMode::Always] {
        for in_newest in [0, 2] {
            let mut crash_at = 0;
            let mut closed = false;
            while !closed {
                for f in fates {
                    runs += 1;
                    let (done, failed) = run(sync, in_newest, crash_at, f);
                    failures.extend(failed);
                    closed = done;
                }
                crash_at += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs}: {failures:#?}",
        failures.len()
    );
    // The close's fsyncs, marker, and two header rewrites at least.
    assert!(runs >= 3 * 4 * 6, "only {runs} runs");
}
