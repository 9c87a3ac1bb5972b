//! A second power loss after an open that cut the log: the writes that
//! open dropped (past a lost page of a `SyncMode::Never` WAL, or past a
//! flipped byte under `WalRecovery::PointInTime`) stay in WAL files until
//! the open's manifest is durable, and come back at a power loss when
//! their unlink is undone; the new session's writes reuse their sequence
//! numbers. Every crash point of the recovering open and of the writes
//! after it is tried, with unsynced pages kept out of order, unlinks
//! revived and renames kept or undone by seeded choices.
//!
//! Checked after the second power loss: the store holds what the first
//! clean recovery held (made durable by the open before any write was
//! acknowledged, so a crash after it loses none of it), followed by a
//! prefix of the new session's writes (all of those acknowledged under
//! `SyncMode::Always`), and never a dropped write: the new session writes
//! other values (and deletes) over the same keys, so a dropped record
//! replayed after them, or instead of them, shows.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode, WalRecovery};
use bloomlsm_tests::crash_workload::{Write, contents_after, small_table_options};
use bloomlsm_tests::{
    close_with_no_orphan_table, contents, copy_store_dir, history_write, key, scratch_dir,
};

/// Writes of the first session (the history with deletes).
const FIRST_WRITES: u64 = 300;
/// Writes of the session after the cut.
const SECOND_WRITES: u64 = 24;

/// The first session's writes, then the second's: puts of other values
/// over the first session's keys (the dropped ones among them) and deletes
/// of some, every third write.
fn workload(cut: usize) -> Vec<Write> {
    let mut writes: Vec<Write> = (0..FIRST_WRITES).map(history_write).take(cut).collect();
    for j in 0..SECOND_WRITES {
        // Keys around the cut: the dropped writes' keys above all.
        let k = key((cut as u64 + j * 7 / 3).saturating_sub(8));
        writes.push(if j % 3 == 2 {
            (k, None)
        } else {
            (k, Some(format!("second-session-{j}").into_bytes()))
        });
    }
    writes
}

/// The writes of the first session a clean open of `dir` holds (its
/// contents name the prefix: `history_write` is built so), and whether it
/// cut the log.
fn first_recovery(dir: &Path, options: &Options) -> (usize, bool) {
    let copy = copy_store_dir(dir);
    let db = Db::open(copy.path(), options.clone()).unwrap();
    let got = contents(&db);
    let history: Vec<Write> = (0..FIRST_WRITES).map(history_write).collect();
    let r = (0..=history.len())
        .rev()
        .find(|&n| contents_after(&history, n) == got)
        .expect("the first recovery holds a prefix of the history");
    let cut = db.stats().wal_replay_cut.is_some();
    drop(db);
    (r, cut)
}

/// The second session on `dir`, through `fs` (crashing where armed): the
/// recovering open under `options`, then the second session's writes.
/// Returns the second session's writes acknowledged.
fn second_session(dir: &Path, fs: &FaultFs, options: &Options, writes: &[Write]) -> usize {
    let Ok(db) = Db::open_with_fs(dir, options.clone(), Arc::new(fs.clone())) else {
        return 0;
    };
    let mut acked = 0;
    for (k, v) in writes {
        let done = match v {
            Some(v) => db.put(k, v),
            None => db.delete(k),
        };
        if done.is_err() {
            break;
        }
        acked += 1;
    }
    drop(db);
    acked
}

/// Every crash point of the second session over the first crash left in
/// `crashed` (its clean recovery holding `r1` writes): `Err` lists what
/// went wrong.
fn sweep_second_session(
    crashed: &Path,
    r1: usize,
    options: &Options,
    first: &str,
) -> (u64, Vec<String>) {
    let writes = workload(r1);
    let second = &writes[r1..];
    let probe = copy_store_dir(crashed);
    let fs = FaultFs::new();
    second_session(probe.path(), &fs, options, second);
    let total = fs.ops();
    let old_wals: Vec<String> = std::fs::read_dir(crashed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wal"))
        .collect();
    let mut failures = Vec::new();
    for crash_at in 0..=total {
        let dir = copy_store_dir(crashed);
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(crash_at));
        fs.set_revival(Revival::Seeded(crash_at));
        fs.set_rename_fate(RenameFate::Seeded(crash_at));
        fs.fail_from_op(crash_at);
        let acked = second_session(dir.path(), &fs, options, second);
        fs.simulate_power_loss().unwrap();
        let what = format!("{first}, then at {crash_at} of {total}");
        if let Err(why) = check(dir.path(), &old_wals, options, &writes, r1, acked) {
            failures.push(format!("{what}: {why}"));
        }
    }
    (total + 1, failures)
}

/// The store after the second power loss holds the first recovery's `r1`
/// writes and then a prefix of the second session's (at least its
/// `acked` under `SyncMode::Always`, at most one past them), and, once any
/// write after the cut was acknowledged, the log no longer holds a WAL of
/// the first session (`old_wals`).
fn check(
    dir: &Path,
    old_wals: &[String],
    options: &Options,
    writes: &[Write],
    r1: usize,
    acked: usize,
) -> Result<(), String> {
    // Point in time, so a dropped tail still in the log shows as a cut
    // instead of refusing the open.
    let reopen = Options {
        wal_recovery: WalRecovery::PointInTime,
        background_work: false,
        ..options.clone()
    };
    let db = Db::open(dir, reopen).map_err(|e| format!("open: {e}"))?;
    let got = contents(&db);
    let lowest = match options.sync {
        SyncMode::Always => r1 + acked,
        SyncMode::Never => r1,
    };
    let highest = (r1 + acked + 1).min(writes.len());
    let kept = (lowest..=highest).find(|&n| contents_after(writes, n) == got);
    let Some(n) = kept else {
        let closest: BTreeMap<_, _> = contents_after(writes, lowest);
        let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(closest.keys()).collect();
        let differ: Vec<String> = keys
            .into_iter()
            .filter(|k| got.get(*k) != closest.get(*k))
            .take(4)
            .map(|k| {
                let s = |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(v).into_owned());
                format!(
                    "{}: store {:?}, after {lowest} writes {:?}",
                    String::from_utf8_lossy(k),
                    s(got.get(k)),
                    s(closest.get(k))
                )
            })
            .collect();
        return Err(format!(
            "holds no prefix from {lowest} to {highest} writes ({r1} recovered first, \
             {acked} acknowledged after): {differ:?}"
        ));
    };
    // Writes past the first recovery were acknowledged: its open finished,
    // and the WALs it cut are out of the log (a torn tail of the new
    // session's WAL may be cut, legitimately).
    let cut_wal = db.stats().wal_replay_cut.map(|c| c.path);
    if let Some(old) = cut_wal.filter(|p| n > r1 && old_wals.iter().any(|w| p.ends_with(w))) {
        return Err(format!(
            "{n} writes held, yet the log still holds the first session's cut WAL {}",
            old.display()
        ));
    }
    close_with_no_orphan_table(db, dir, "after the second power loss");
    Ok(())
}

fn never_options() -> Options {
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 16 << 10,
        ..small_table_options()
    }
}

/// First crashes tried: every `STEP`-th operation of the first session.
const STEP: u64 = 7;

#[test]
fn a_second_power_loss_after_an_unsynced_cut_keeps_the_first_recovery() {
    let options = never_options();
    let history: Vec<Write> = (0..FIRST_WRITES).map(history_write).collect();
    let first_session = |dir: &Path, fs: &FaultFs| {
        if let Ok(db) = Db::open_with_fs(dir, options.clone(), Arc::new(fs.clone())) {
            for (k, v) in &history {
                let done = match v {
                    Some(v) => db.put(k, v),
                    None => db.delete(k),
                };
                if done.is_err() {
                    break;
                }
            }
            // Dropped without a clean close's seal when the crash came.
            drop(db);
        }
    };
    let fs = FaultFs::new();
    first_session(scratch_dir().path(), &fs);
    let total = fs.ops();
    let (mut visited, mut cuts) = (0, 0);
    let mut failures = Vec::new();
    for first in (0..total).step_by(STEP as usize) {
        let crashed = scratch_dir();
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(first));
        fs.fail_from_op(first);
        first_session(crashed.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let (r1, cut) = first_recovery(crashed.path(), &options);
        cuts += u32::from(cut);
        let what = format!("first crash at {first} of {total} ({r1} recovered)");
        let (n, f) = sweep_second_session(crashed.path(), r1, &options, &what);
        visited += n;
        failures.extend(f);
    }
    assert!(
        failures.is_empty(),
        "{} of {visited} second crashes failed; first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(6)]
    );
    assert!(
        cuts > 0,
        "no first crash cut the log: the test means nothing"
    );
    println!(
        "{} first crashes of {total} operations ({cuts} cut the log), {visited} second crashes",
        total.div_ceil(STEP)
    );
}

#[test]
fn a_point_in_time_cut_then_writes_then_a_power_loss_never_replays_the_dropped_tail() {
    let options = Options {
        sync: SyncMode::Always,
        wal_recovery: WalRecovery::PointInTime,
        // One WAL holds every write: the flipped byte drops most of them.
        memtable_bytes: 1 << 20,
        ..small_table_options()
    };
    let crashed = scratch_dir();
    {
        let db = Db::open(crashed.path(), options.clone()).unwrap();
        for i in 0..FIRST_WRITES {
            bloomlsm_tests::apply_history_write(&db, i).unwrap();
        }
        db.close().unwrap();
    }
    let wal = std::fs::read_dir(crashed.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wal"))
        .unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    let middle = bytes.len() / 3;
    bytes[middle] ^= 0x10;
    std::fs::write(&wal, &bytes).unwrap();
    let (r1, cut) = first_recovery(crashed.path(), &options);
    assert!(
        cut && r1 > 0 && r1 < FIRST_WRITES as usize / 2,
        "{r1} {cut}"
    );
    let (visited, failures) = sweep_second_session(crashed.path(), r1, &options, "a byte flipped");
    assert!(
        failures.is_empty(),
        "{} of {visited} crashes failed; first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(6)]
    );
    println!("{visited} crash points after a cut at {r1} writes");
}
