//! Review rev8 attack on the `CLOSED` header flag (`engine/src/wal/header.rs`,
//! `engine/src/wal/seal.rs`): a store closed cleanly (its WAL flagged),
//! reopened read-write, written across memtable switches and closed again,
//! with a crash at every file-system operation of that second session (its
//! recovery, its writes, its close's marker, fsyncs and header rewrites),
//! then a power loss under several page, overwrite, rename and unlink
//! fates. Every crash is only a crash: the next opens (read-only, then
//! read-write, the default `TolerateTornTail`) must succeed, with every
//! write of the first session, and with `SyncMode::Always` every write of
//! the second whose `put` returned (at most one more, whose fsync failed);
//! with `SyncMode::Never` a prefix, all of it when the close returned `Ok`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm::fs::fault::{OverwriteFate, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode};

use common::{Model, contents};

const FIRST: u64 = 40;
const MORE: u64 = 40;

fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        memtable_bytes: 4 << 10,
        background_work: false,
        ..Options::default()
    }
}

use common::power_loss_fates::{Fates, armed};

/// What one crash point leaves: the recovered contents by both opens, or
/// a refusal; session 2's models (index i: after its i-th write), how many
/// of its writes returned `Ok`, and whether its close did.
struct Run {
    got: Result<(Model, Model), String>,
    models: Vec<Model>,
    acked: usize,
    closed: bool,
}

fn run(sync: SyncMode, crash_at: u64, fates: Fates) -> Run {
    let dir = common::scratch_dir();
    let fs = armed(fates);
    let db = Db::open_with_fs(dir.path(), options(sync), Arc::new(fs.clone())).unwrap();
    let mut model = Model::new();
    for i in 0..FIRST {
        db.put(&common::key(i), &common::value(i)).unwrap();
        model.insert(common::key(i), common::value(i));
    }
    db.close().unwrap();
    fs.fail_from_op(fs.ops() + crash_at);
    let mut models = vec![model.clone()];
    let (mut closed, mut acked) = (false, 0);
    if let Ok(db) = Db::open_with_fs(dir.path(), options(sync), Arc::new(fs.clone())) {
        for i in FIRST..FIRST + MORE {
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
    let got = (|| {
        let ro = Db::open_read_only(dir.path(), options(sync)).map_err(|e| e.to_string())?;
        let ro_got = contents(&ro);
        ro.close().map_err(|e| e.to_string())?;
        let db = Db::open(dir.path(), Options::default()).map_err(|e| e.to_string())?;
        Ok((ro_got, contents(&db)))
    })();
    Run {
        got,
        models,
        acked,
        closed,
    }
}

/// The failure of one crash point (none when it kept its promises), and
/// whether the session's close returned `Ok` (the crash came after it).
fn check(sync: SyncMode, crash_at: u64, f: Fates) -> (Option<String>, bool) {
    let r = run(sync, crash_at, f);
    (failure(sync, crash_at, f, &r), r.closed)
}

fn failure(sync: SyncMode, crash_at: u64, f: Fates, r: &Run) -> Option<String> {
    let at = format!("{sync:?} crash at {crash_at} {f:?}");
    let (ro, rw) = match &r.got {
        Err(e) => return Some(format!("{at}: refused: {e}")),
        Ok(got) => got,
    };
    if *ro != *rw {
        return Some(format!("{at}: the read-only and read-write opens differ"));
    }
    let Some(n) = r.models.iter().position(|m| m == rw) else {
        let lost = r.models[0].keys().filter(|k| !rw.contains_key(*k)).count();
        return Some(format!("{at}: not a prefix ({lost} clean writes lost)"));
    };
    let all = r.models.len() - 1;
    let least = match sync {
        SyncMode::Always => r.acked,
        _ if r.closed => all,
        _ => 0,
    };
    (n < least).then(|| format!("{at}: {n} of session 2's writes, {least} durable"))
}

#[test]
fn a_crash_anywhere_in_a_session_after_a_clean_close_is_only_a_crash() {
    let fates: [Fates; 4] = [
        (
            UnsyncedFate::Pages(1),
            OverwriteFate::Applied,
            Revival::All,
            RenameFate::Undone,
        ),
        (
            UnsyncedFate::Pages(2),
            OverwriteFate::Seeded(7),
            Revival::Seeded(5),
            RenameFate::Seeded(5),
        ),
        (
            UnsyncedFate::Truncated,
            OverwriteFate::Lost,
            Revival::Nothing,
            RenameFate::Kept,
        ),
        (
            UnsyncedFate::Pages(4),
            OverwriteFate::Seeded(1),
            Revival::All,
            RenameFate::Kept,
        ),
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for sync in [SyncMode::Always, SyncMode::Never] {
        // Up to past the last operation of the session: its whole run.
        let mut crash_at = 0;
        let mut closed = false;
        while !closed {
            for f in fates {
                checked += 1;
                let (failed, done) = check(sync, crash_at, f);
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
    // Every operation of the session (at least one per write in each
    // mode), under every fate.
    assert!(checked >= 4 * 2 * MORE as usize, "only {checked} runs");
}

/// A cleanly closed WAL (`CLOSED`) cut at a record boundary on the device,
/// its last writes and marker gone: the strict opens refuse it; before the
/// fix, `PointInTime` opened with the writes before the cut and reported
/// no cut (`Stats::wal_replay_cut` `None`), where a zeroed page at the
/// same place is reported: writes dropped silently.
#[test]
fn point_in_time_reports_the_lost_end_of_a_closed_wal() {
    let dir = common::scratch_dir();
    let options = options(SyncMode::Never);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..10 {
        db.put(&common::key(i), &common::value(i)).unwrap();
    }
    db.close().unwrap();
    let wal = common::newest_wal(dir.path());
    let bytes = std::fs::read(&wal).unwrap();
    let marker = common::close_marker_offset(&bytes);
    let records = (0..).find(|&n| common::wal_record_offset(&bytes, n) == marker);
    let last_write = common::wal_record_offset(&bytes, records.unwrap() - 1);
    for (end, kept) in [(last_write, 9), (marker, 10)] {
        std::fs::write(&wal, &bytes[..end]).unwrap();
        for read_only in [true, false] {
            let opened = common::open_either(dir.path(), options.clone(), read_only);
            assert!(opened.is_err_and(|e| e.is_corruption()), "{end}");
        }
        let pit = Options {
            wal_recovery: bloomlsm::WalRecovery::PointInTime,
            ..options.clone()
        };
        let db = Db::open_read_only(dir.path(), pit).unwrap();
        assert_eq!(contents(&db).len(), kept);
        let cut = db.stats().wal_replay_cut;
        assert_eq!(
            cut.map(|c| (c.path, c.offset)),
            Some((wal.clone(), end as u64))
        );
    }
}
