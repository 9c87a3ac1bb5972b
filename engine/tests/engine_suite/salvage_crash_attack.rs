//! Review28 attack on the point-in-time salvage (`wal::salvaged_records`):
//! a `SyncMode::Never` store closed cleanly, its WAL's header rewrite torn
//! inside its sector (the new flags over the old checksum), and in one
//! variant a bit flipped in a record in the middle too, so the salvage
//! cuts the log there. Then a read-write `PointInTime` open on `FaultFs`
//! that writes with `SyncMode::Always` (keys the cut dropped among them,
//! with new values) and closes, with a crash at every file-system
//! operation of that session under two page and rename fates, and a power
//! loss. Every later open (point in time, read-only and read-write; the
//! default too, when it opens) must hold exactly what the salvage kept
//! and a prefix of the session's writes, every write whose `put`
//! returned: never a write the cut dropped (its sequence is reused by the
//! session's writes), never a lost acknowledged write.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{OverwriteFate, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode, WalRecovery};

use common::{Model, contents};

const FIRST: u64 = 30;
const MORE: u64 = 10;
/// The record of the first session's WAL the damaged variant flips a bit
/// in: writes `CUT..FIRST` are dropped by the point-in-time open.
const CUT: u64 = 18;

fn pit(sync: SyncMode) -> Options {
    Options {
        sync,
        wal_recovery: WalRecovery::PointInTime,
        background_work: false,
        ..Options::default()
    }
}

/// A closed store of `FIRST` writes whose WAL header a seal tore, and
/// with `damaged` a bit flipped in record `CUT` of it; returns the
/// directory and what a point-in-time open keeps.
fn torn_store(damaged: bool) -> (tempfile::TempDir, Model) {
    let dir = common::scratch_dir();
    let db = Db::open(dir.path(), pit(SyncMode::Never)).unwrap();
    let mut kept = Model::new();
    for i in 0..FIRST {
        db.put(&common::key(i), &common::value(i)).unwrap();
        if !damaged || i < CUT {
            kept.insert(common::key(i), common::value(i));
        }
    }
    db.close().unwrap();
    let wal = common::newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    assert_eq!(common::close_marker_offset(&bytes), {
        common::wal_record_offset(&bytes, FIRST as usize)
    });
    // The old header's checksum (flags 0, SyncMode::Never) under the new
    // flags (synced, closed): the rewrite torn inside its sector.
    let mut old = bytes[..24].to_vec();
    common::set_wal_flags(&mut old, 0);
    bytes[20..24].copy_from_slice(&old[20..24]);
    if damaged {
        let at = common::wal_record_offset(&bytes, CUT as usize);
        bytes[at + 20] ^= 0x10;
    }
    std::fs::write(&wal, bytes).unwrap();
    (dir, kept)
}

fn copy_store(from: &Path) -> tempfile::TempDir {
    let to = common::scratch_dir();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.path().join(entry.file_name())).unwrap();
    }
    to
}

use common::power_loss_fates::{Fates, armed};

/// One crash point: the failure, if any, and whether the session closed.
fn run(store: &Path, kept: &Model, crash_at: u64, fates: Fates) -> (Option<String>, bool) {
    let dir = copy_store(store);
    let fs = armed(fates);
    fs.fail_from_op(crash_at);
    let mut models = vec![kept.clone()];
    let (mut acked, mut closed) = (0, false);
    if let Ok(db) = Db::open_with_fs(dir.path(), pit(SyncMode::Always), Arc::new(fs.clone())) {
        let mut model = kept.clone();
        // From inside the cut (keys CUT.. were dropped) past the first
        // session's keys, new values.
        for i in CUT - 2..CUT - 2 + MORE {
            let (k, v) = (common::key(i), common::value(i + 1000));
            model.insert(k.clone(), v.clone());
            models.push(model.clone());
            if db.put(&k, &v).is_err() {
                break;
            }
            acked += 1;
        }
        closed = db.close().is_ok();
    }
    fs.heal();
    fs.simulate_power_loss().unwrap();
    let at = format!("crash at {crash_at} {fates:?}");
    let mut got = Vec::new();
    for read_only in [true, false] {
        match common::open_either(dir.path(), pit(SyncMode::Always), read_only) {
            Ok(db) => {
                got.push(contents(&db));
                db.close().unwrap();
            }
            Err(e) => {
                return (
                    Some(format!("{at}: refused at a point in time: {e}")),
                    closed,
                );
            }
        }
    }
    // The read-write open flushed the WALs: a default open opens now.
    match Db::open(dir.path(), Options::default()) {
        Ok(db) => got.push(contents(&db)),
        Err(e) => return (Some(format!("{at}: default open refused: {e}")), closed),
    }
    for g in &got {
        let Some(n) = models.iter().position(|m| m == g) else {
            let extra = g.iter().filter(|(k, v)| kept.get(*k) != Some(*v)).count();
            return (
                Some(format!(
                    "{at}: not the salvage's writes and a prefix ({extra} pairs beyond the salvage)"
                )),
                closed,
            );
        };
        if n < acked {
            return (
                Some(format!("{at}: {n} of {acked} acknowledged writes")),
                closed,
            );
        }
    }
    (None, closed)
}

#[test]
fn a_crash_after_a_salvaging_open_never_brings_back_what_the_cut_dropped() {
    let fates: [Fates; 2] = [
        (
            UnsyncedFate::Pages(1),
            OverwriteFate::Applied,
            Revival::All,
            RenameFate::Undone,
        ),
        (
            UnsyncedFate::Truncated,
            OverwriteFate::Seeded(7),
            Revival::Seeded(5),
            RenameFate::Seeded(5),
        ),
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for damaged in [false, true] {
        let (store, kept) = torn_store(damaged);
        assert_eq!(kept.len() as u64, if damaged { CUT } else { FIRST });
        let mut crash_at = 0;
        let mut closed = false;
        while !closed {
            // Past every operation of the session: it closes by then.
            assert!(crash_at < 400, "the session never closed: {failures:#?}");
            for f in fates {
                checked += 1;
                let (failed, done) = run(store.path(), &kept, crash_at, f);
                failures.extend(failed);
                closed = done;
            }
            crash_at += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked}: {:#?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    println!("{checked} runs");
    assert!(checked >= 2 * 2 * MORE as usize, "only {checked} runs");
}
