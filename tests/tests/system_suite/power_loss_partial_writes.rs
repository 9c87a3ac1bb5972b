//! A failing write that leaves a prefix of its bytes in the file (a short
//! write before the error: `FaultFs::set_partial_writes`), swept over
//! every file-system operation of a session on a deep tree of narrow
//! tables (WAL appends, table writes, filters appended to live tables by
//! rebuilds, manifest writes), under three prefix shapes.
//!
//! After the failure the session goes on: every later write is tried,
//! and the live store must answer exactly the acknowledged writes. Then
//! the session ends (a close or a drop), and either a power loss comes
//! (unsynced bytes cut, or lost as pages or as sectors, renames and unlinks kept or
//! undone by seed) or the store is reopened on the leftovers as they are,
//! the prefix still in its file. The reopened store must hold every
//! acknowledged write (`SyncMode::Always`, or `Never` after a close that
//! returned `Ok`; after a drop in `Never`, a prefix of them), no refused
//! write but the first failed one (whose record may have reached the
//! WAL whole before its fsync failed), no older version, no deleted key.
//! That store then takes more writes (a WAL after whatever garbage the
//! prefix left), loses power again, and must hold exactly what it held
//! plus them.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::partial;

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, PartialWrite, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, FilterPolicy, SyncMode};
use bloomlsm_tests::{close_with_no_orphan_table, scratch_dir};
use partial::{Log, checked_contents, deep_options, writes};

/// Writes of the first session.
const FIRST: usize = 800;
/// Writes of the second session.
const SECOND: usize = 60;
/// Writes between filter rebuilds in the first session.
const REBUILD_EVERY: usize = 200;
/// Writes tried after the first failed one.
const AFTER_FAILURE: usize = 8;

/// Crash points tried: every `step()`-th operation of a clean first
/// session (`CRASHSWEEP_STEP` to choose; 1 takes every one, about 4,400
/// points in 1 to 2 minutes).
fn step() -> u64 {
    std::env::var("CRASHSWEEP_STEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

/// The first session's work: the writes, and every `REBUILD_EVERY`
/// writes a filter rebuild at another policy (appended to the tables'
/// own files, or copies), whose failure stops writes like any other.
/// After the first failed write, `AFTER_FAILURE` more are tried and the
/// session ends, so that whatever the failure left in the live WAL is
/// still there (not flushed away) when the session ends.
/// Returns how many tables a rebuild appended to (same number, new size).
fn session(db: &Db, log: &mut Log) -> usize {
    let mut appended = 0;
    for (i, w) in writes(0, FIRST).iter().enumerate() {
        let failed = log.entries.iter().position(|(_, ok)| !*ok);
        if failed.is_some_and(|f| log.entries.len() > f + AFTER_FAILURE) {
            break;
        }
        log.apply(db, w);
        if i % REBUILD_EVERY == REBUILD_EVERY - 1 {
            let before = bloomlsm::table_records(db.path()).unwrap_or_default();
            let bits = [6.0, 13.0, 9.0][(i / REBUILD_EVERY) % 3];
            if db
                .rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
                .is_ok()
            {
                let after = bloomlsm::table_records(db.path()).unwrap();
                appended += after
                    .iter()
                    .filter(|t| {
                        before
                            .iter()
                            .any(|b| b.number == t.number && b.file_size < t.file_size)
                    })
                    .count();
            }
        }
    }
    appended
}

/// The prefix shape for the `k`-th crash point tried.
fn partial_for(k: u64) -> PartialWrite {
    match k % 3 {
        0 => PartialWrite::Seeded(k),
        1 => PartialWrite::Half,
        _ => PartialWrite::ToPage,
    }
}

/// [`deep_options`], the work inline or on background threads.
fn options(sync: SyncMode, background: bool) -> bloomlsm::Options {
    bloomlsm::Options {
        background_work: background,
        ..deep_options(sync)
    }
}

/// Whether the `k`-th crash point's fault lasts (every operation from it
/// on fails until the session ends) rather than failing one operation.
fn lasting(k: u64) -> bool {
    k % 7 == 3
}

/// One crash point: the first session with operation `n` failing after a
/// partial write (its shape and the power loss's fates chosen by `k`),
/// then a reopen (after a power loss when `power_loss`), a second
/// session, a power loss and a last reopen; flushes and compactions on
/// background threads when `background`. Returns whether the failed
/// write was recovered.
fn run(sync: SyncMode, background: bool, n: u64, k: u64, close: bool, power_loss: bool) -> bool {
    let what = format!(
        "{sync:?}{}, fault at operation {n} ({:?}{}), close {close}, power loss {power_loss}",
        if background { " in the background" } else { "" },
        partial_for(k),
        if lasting(k) { ", lasting" } else { "" }
    );
    let dir = scratch_dir();
    let fs = FaultFs::new();
    fs.set_partial_writes(partial_for(k));
    fs.set_unsynced_fate(match (k / 3) % 3 {
        0 => UnsyncedFate::Pages(n),
        1 => UnsyncedFate::Sectors(n),
        _ => UnsyncedFate::Truncated,
    });
    fs.set_rename_fate(RenameFate::Seeded(n));
    fs.set_revival(Revival::Seeded(n + 1));
    // A transient fault, or a device that fails every operation from
    // `n` on until the session ends.
    let lasting = lasting(k);
    if lasting {
        fs.fail_from_op(n);
    } else {
        fs.fail_only_op(n);
    }
    let mut log = Log::default();
    let mut closed_ok = false;
    if let Ok(db) = Db::open_with_fs(dir.path(), options(sync, background), Arc::new(fs.clone())) {
        session(&db, &mut log);
        // The live store answers the acknowledged writes, and only them.
        let got = checked_contents(&db, &what);
        let acked = log.model(&BTreeMap::new(), log.entries.len(), false);
        assert!(
            got == acked,
            "{what}: the live store differs from its acknowledged writes"
        );
        if close {
            closed_ok = db.close().is_ok();
        }
    }
    fs.heal();
    if power_loss {
        fs.simulate_power_loss().unwrap();
    }
    let durable = if sync == SyncMode::Always || closed_ok || !power_loss {
        log.through_last_ack()
    } else {
        0
    };
    let db = Db::open_with_fs(dir.path(), options(sync, background), Arc::new(fs.clone()))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let got = checked_contents(&db, &format!("{what}, reopened"));
    let Some((mut model, recovered_failed)) = log.matching(&BTreeMap::new(), &got, durable) else {
        let acked = log.model(&BTreeMap::new(), log.entries.len(), false);
        panic!(
            "{what}: the reopened store holds no allowed outcome ({} writes acknowledged, \
             {durable} must survive): {:?}",
            log.entries.iter().filter(|(_, ok)| *ok).count(),
            bloomlsm_tests::first_differences(&got, &acked, "acknowledged")
        );
    };
    // Without fsyncs no write fails after its record reached the WAL
    // whole: a write that returned an error never comes back.
    assert!(
        sync == SyncMode::Always || !recovered_failed,
        "{what}: a write that returned an error was recovered"
    );
    // The second session writes after whatever the prefix left.
    for (k, v) in writes(FIRST, FIRST + SECOND) {
        match &v {
            Some(v) => db.put(&k, v).unwrap(),
            None => db.delete(&k).unwrap(),
        }
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
    if sync == SyncMode::Never {
        db.close().unwrap();
    } else {
        drop(db);
    }
    fs.simulate_power_loss().unwrap();
    // Inline work: no compaction runs while the files are counted.
    let db = Db::open(dir.path(), deep_options(sync))
        .unwrap_or_else(|e| panic!("{what}: last reopen failed: {e}"));
    let got = checked_contents(&db, &format!("{what}, last reopen"));
    assert!(
        got == model,
        "{what}: after the second session and a power loss: {:?}",
        bloomlsm_tests::first_differences(&got, &model, "model")
    );
    close_with_no_orphan_table(db, dir.path(), &what);
    recovered_failed
}

#[test]
fn a_partial_write_at_any_operation_loses_no_acknowledged_write() {
    sweep(false, step());
}

/// The same with flushes and compactions on background threads: which
/// operation fails depends on the threads' order, so fewer points are
/// tried (every `5 * step()`-th), each checked the same way.
#[test]
fn a_partial_write_beside_background_work_loses_no_acknowledged_write() {
    sweep(true, 5 * step());
}

/// Runs [`run`] at every `every`-th operation of a clean first session,
/// in both sync modes.
fn sweep(background: bool, every: u64) {
    let mut points = 0;
    let mut recovered = 0;
    for sync in [SyncMode::Always, SyncMode::Never] {
        let (total, levels) = {
            let dir = scratch_dir();
            let fs = FaultFs::new();
            let db = Db::open_with_fs(dir.path(), options(sync, background), Arc::new(fs.clone()))
                .unwrap();
            let mut log = Log::default();
            let appended = session(&db, &mut log);
            assert!(log.entries.iter().all(|(_, ok)| *ok));
            assert!(appended > 0, "no rebuild appended a filter in place");
            println!("{sync:?}: {appended} filters appended in place");
            db.wait_for_background_work().unwrap();
            let levels = db.stats().levels.iter().filter(|l| l.tables > 0).count();
            drop(db);
            (fs.ops(), levels)
        };
        // Background compactions lag behind the writes: the tree is as
        // deep as they made it.
        assert!(
            background || levels >= 4,
            "the workload is not deep: {levels} levels"
        );
        // `PARTIAL_POINT=N` runs crash point N alone (to debug a failure).
        let only: Option<u64> = std::env::var("PARTIAL_POINT")
            .ok()
            .and_then(|s| s.parse().ok());
        for n in (0..total).step_by(every as usize) {
            if only.is_some_and(|p| p != n) {
                continue;
            }
            // Choices by the point's index, so that any step mixes them.
            let k = n / every;
            let close = k % 4 < 2;
            let power_loss = !k.is_multiple_of(5);
            recovered += u64::from(run(sync, background, n, k, close, power_loss));
            points += 1;
        }
        println!("{sync:?}: {total} operations, {levels} levels in use");
    }
    println!(
        "{points} crash points with a partial write (background work: {background}): every \
         acknowledged write kept ({recovered} failed writes recovered)"
    );
}
