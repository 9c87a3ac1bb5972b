//! Power loss at every crash point: a fault-injecting file system fails
//! every operation from the N-th on (the "crash"), then drops everything
//! that was never synced. After each: reopen, no acknowledged (synced) write
//! lost, no hole, no live file missing, no orphan left.
//!
//! With `SyncMode::Never` the promise is weaker but still a promise: after
//! a crash the store holds a prefix of the writes (no hole), and after a
//! clean `close()` it holds every acknowledged write, even when a frozen
//! memtable's flush had not happened (or had failed) at close, so that
//! more than one WAL was live.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode, WalRecovery};
use bloomlsm_tests::crash_workload::small_table_options;
use bloomlsm_tests::{
    apply_history_model, apply_history_write, close_with_no_orphan_table, contents, history_prefix,
    history_write, key, recovered_history, recovered_prefix, value, wal_files,
};

const WRITES: u64 = 150;

fn options() -> Options {
    small_table_options()
}

/// Runs the workload until the injected crash; returns writes acknowledged.
fn run_until_crash(dir: &std::path::Path, fs: &FaultFs) -> u64 {
    let Ok(db) = Db::open_with_fs(dir, options(), Arc::new(fs.clone())) else {
        return 0;
    };
    let mut acked = 0;
    for i in 0..WRITES {
        if db.put(&key(i), &value(i)).is_err() {
            break;
        }
        acked = i + 1;
    }
    drop(db);
    acked
}

#[test]
fn every_crash_point_recovers_every_synced_write() {
    // Count the operations of an uninterrupted run.
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    assert_eq!(run_until_crash(dir.path(), &fs), WRITES);
    let total_ops = fs.ops();
    let mut crash_points = 0;
    let mut lost_tail_writes = 0;
    for crash_at in 0..total_ops {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let acked = run_until_crash(dir.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("reopen after a crash at operation {crash_at} failed: {e}"));
        let recovered = recovered_prefix(&db, WRITES);
        assert!(
            recovered >= acked,
            "crash at {crash_at}: {acked} writes acknowledged, {recovered} recovered"
        );
        assert!(
            recovered <= acked + 1,
            "crash at {crash_at}: a write that never started came back"
        );
        lost_tail_writes += recovered - acked;
        close_with_no_orphan_table(db, dir.path(), &format!("crash at {crash_at}"));
        crash_points += 1;
    }
    println!(
        "{crash_points} crash points over {total_ops} file-system operations; {lost_tail_writes} in-flight writes recovered; 0 acknowledged writes lost"
    );
}

#[test]
fn a_failed_write_stops_writes_and_reads_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    for i in 0..20 {
        db.put(&key(i), &value(i)).unwrap();
    }
    fs.fail_from_op(fs.ops());
    assert!(db.put(&key(20), &value(20)).is_err());
    fs.heal();
    let err = db.put(&key(21), &value(21)).unwrap_err();
    assert!(matches!(err, bloomlsm::Error::WritesStopped(_)), "{err}");
    for i in 0..20 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
}

#[test]
fn short_reads_are_errors_not_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(
        dir.path(),
        Options {
            block_cache_bytes: 0,
            ..options()
        },
        Arc::new(fs.clone()),
    )
    .unwrap();
    for i in 0..100 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    fs.set_short_reads(true);
    let mut errors = 0;
    for i in 0..100 {
        match db.get(&key(i)) {
            Ok(v) => assert_eq!(
                v,
                Some(value(i)),
                "a short read must never look like a missing key"
            ),
            Err(_) => errors += 1,
        }
    }
    fs.set_short_reads(false);
    assert!(errors > 0);
    for i in 0..100 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
    println!("{errors} short reads reported as errors, 0 wrong values");
}

#[test]
fn an_unwritable_directory_is_refused_and_left_intact() {
    // Root ignores permission bits, so a read-only directory is simulated
    // with a file system on which every mutating call fails.
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..50 {
            db.put(&key(i), &value(i)).unwrap();
        }
        db.close().unwrap();
    }
    let listing = |p: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = listing(dir.path());
    let fs = FaultFs::new();
    fs.fail_from_op(0);
    let err = Db::open_with_fs(dir.path(), options(), Arc::new(fs)).unwrap_err();
    assert!(matches!(err, bloomlsm::Error::Io { .. }), "{err}");
    println!("refused with: {err}");
    assert_eq!(listing(dir.path()), before);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(recovered_prefix(&db, 50), 50);
}

/// Sync off, flushes and compactions on background threads, small budgets
/// so a few hundred writes flush and compact many times.
fn never_background() -> Options {
    Options {
        sync: SyncMode::Never,
        background_work: true,
        ..options()
    }
}

/// Acknowledged writes of `model` missing or wrong in `got`, described.
fn lost_writes(
    got: &BTreeMap<Vec<u8>, Vec<u8>>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Vec<String> {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out: Vec<String> = model
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(*v))
        .map(|(k, v)| {
            format!(
                "{} = {} came back as {:?}",
                s(k),
                s(v),
                got.get(k).map(|g| s(g))
            )
        })
        .collect();
    out.extend(
        got.keys()
            .filter(|k| !model.contains_key(*k))
            .map(|k| format!("{} was deleted (or never written) and is present", s(k))),
    );
    out
}

#[test]
fn never_mode_close_keeps_every_acknowledged_write_while_a_flush_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), never_background(), Arc::new(fs.clone())).unwrap();
    let mut model = BTreeMap::new();
    let mut i = 0;
    // A history with deletes, flushes and compactions.
    while i < 400 {
        apply_history_write(&db, i).unwrap();
        apply_history_model(&mut model, i);
        i += 1;
    }
    db.wait_for_background_work().unwrap();
    let history = db.stats();
    assert!(
        history.flushes > 0 && history.compactions > 0,
        "{history:?}"
    );
    // From now on no table can be written: the memtable that fills next is
    // frozen with a new WAL and stays frozen, its own WAL live beside the
    // new one, whichever way the flush thread runs.
    fs.set_refuse_table_files(true);
    let mut after_rotation = 0;
    let mut stopped = None;
    while after_rotation < 10 && i < 3000 {
        match apply_history_write(&db, i) {
            Ok(()) => {
                apply_history_model(&mut model, i);
                i += 1;
            }
            // The failed flush stops writes: refused, so not applied.
            Err(e @ bloomlsm::Error::WritesStopped(_)) => {
                stopped = Some(e);
                break;
            }
            Err(e) => panic!("write {i}: {e}"),
        }
        if wal_files(dir.path()) >= 2 {
            after_rotation += 1;
        }
    }
    let live_wals = wal_files(dir.path());
    assert!(
        live_wals >= 2,
        "the test needs a frozen memtable at close: {live_wals} WAL files"
    );
    let closed = db.close();
    fs.simulate_power_loss().unwrap();
    let db = Db::open(dir.path(), never_background()).unwrap();
    let lost = lost_writes(&contents(&db), &model);
    assert!(
        lost.is_empty(),
        "power loss after a clean close in SyncMode::Never ({live_wals} live WALs at close; \
         close returned {closed:?}; {i} writes acknowledged): {} acknowledged writes lost or wrong, \
         first: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    println!(
        "{i} writes acknowledged ({} flushes, {} compactions before table files were refused); \
         {live_wals} live WALs at close; writes stopped: {}; all {} keys intact after power loss",
        history.flushes,
        history.compactions,
        stopped.is_some(),
        model.len()
    );
}

#[test]
fn never_mode_close_right_after_writes_keeps_every_write() {
    // No fault injected: whether a flush is still pending at close depends
    // on the threads, so several rounds; each must keep every write.
    let mut rounds_with_frozen = 0;
    let rounds = 20;
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let db = Db::open_with_fs(dir.path(), never_background(), Arc::new(fs.clone())).unwrap();
        let writes = 200 + 20 * round;
        let mut model = BTreeMap::new();
        for i in 0..writes {
            apply_history_write(&db, i).unwrap();
            apply_history_model(&mut model, i);
        }
        if wal_files(dir.path()) >= 2 {
            rounds_with_frozen += 1;
        }
        db.close().unwrap();
        fs.simulate_power_loss().unwrap();
        let db = Db::open(dir.path(), never_background()).unwrap();
        let lost = lost_writes(&contents(&db), &model);
        assert!(
            lost.is_empty(),
            "round {round}: power loss after close lost {} of {writes} acknowledged writes, first: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
    }
    println!(
        "{rounds} rounds of writes then close then power loss, {rounds_with_frozen} with more than one WAL file just before close; 0 writes lost"
    );
}

/// The history with deletes in `SyncMode::Never`, inline work, then
/// `close()`, until the injected crash. Returns the writes acknowledged,
/// whether `close()` succeeded, and the error that ended the writes.
fn run_history_until_crash(dir: &std::path::Path, fs: &FaultFs) -> (u64, bool, Option<String>) {
    let never = Options {
        sync: SyncMode::Never,
        ..options()
    };
    let Ok(db) = Db::open_with_fs(dir, never, Arc::new(fs.clone())) else {
        return (0, false, None);
    };
    let mut acked = 0;
    let mut error = None;
    for i in 0..WRITES {
        if let Err(e) = apply_history_write(&db, i) {
            error = Some(e.to_string());
            break;
        }
        acked = i + 1;
    }
    (acked, db.close().is_ok(), error)
}

#[test]
fn every_crash_point_in_never_mode_recovers_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    assert_eq!(
        run_history_until_crash(dir.path(), &fs),
        (WRITES, true, None)
    );
    let total_ops = fs.ops();
    let mut after_close = 0;
    let mut recovered_total = 0;
    for crash_at in 0..=total_ops {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let (acked, closed, error) = run_history_until_crash(dir.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("reopen after a crash at operation {crash_at} failed: {e}"));
        // Panics on a hole.
        let recovered = recovered_history(&db, WRITES);
        // Never mode has no fsync in a write: a write that failed never
        // reached the WAL, and one that reached it must have returned Ok.
        assert!(
            recovered <= acked,
            "crash at {crash_at}: {acked} writes acknowledged but {recovered} recovered: \
             a write that returned an error was applied (it returned {error:?})"
        );
        if closed {
            after_close += 1;
            assert!(
                recovered >= acked,
                "crash at {crash_at} after a clean close: {acked} writes acknowledged, {recovered} recovered"
            );
        }
        recovered_total += recovered;
        close_with_no_orphan_table(db, dir.path(), &format!("crash at {crash_at}"));
    }
    let (k, v) = history_write(8);
    assert!(v.is_none() && k == key(3), "the history has deletes");
    println!(
        "SyncMode::Never: {} crash points over {total_ops} file-system operations, {after_close} after a clean close; \
         every recovery a prefix of the history ({recovered_total} writes recovered in all), 0 holes",
        total_ops + 1
    );
}

/// Every `*.wal` file of a store directory, oldest first.
fn wals_oldest_first(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

#[test]
fn damage_in_an_older_wal_never_leaves_a_hole() {
    // Two live WALs, both synced: writes with sync on while every table
    // write waits, so the memtable that fills stays frozen with its WAL
    // and the writes after it go to a new one. The directory is copied in
    // that state (what a crash would leave), then the store goes on.
    let live = tempfile::tempdir().unwrap();
    let source = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let always = Options {
        sync: SyncMode::Always,
        ..never_background()
    };
    let db = Db::open_with_fs(live.path(), always.clone(), Arc::new(fs.clone())).unwrap();
    let mut i = 0;
    while i < 100 {
        apply_history_write(&db, i).unwrap();
        i += 1;
    }
    db.wait_for_background_work().unwrap();
    fs.set_hold_table_files(true);
    let mut after_rotation = 0;
    while after_rotation < 8 {
        apply_history_write(&db, i).unwrap();
        i += 1;
        if wal_files(live.path()) >= 2 {
            after_rotation += 1;
        }
    }
    for entry in std::fs::read_dir(live.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), source.path().join(entry.file_name())).unwrap();
        }
    }
    fs.set_hold_table_files(false);
    db.close().unwrap();
    let wals = wals_oldest_first(source.path());
    assert!(wals.len() >= 2, "the test needs two live WALs: {wals:?}");
    let older = std::fs::read(&wals[0]).unwrap();
    let newer_len = std::fs::metadata(&wals[wals.len() - 1]).unwrap().len();
    assert!(!older.is_empty() && newer_len > 0, "both WALs hold records");
    let mut refused = 0;
    let mut opened = 0;
    let mut holes = Vec::new();
    // Every 5th byte of the older WAL, and each of its last 40 bytes (the
    // last record, which alone would look like a torn tail).
    let offsets: Vec<usize> = (0..older.len())
        .filter(|&o| o % 5 == 0 || o + 40 >= older.len())
        .collect();
    for mode in [WalRecovery::TolerateTornTail, WalRecovery::PointInTime] {
        for &offset in &offsets {
            let dir = tempfile::tempdir().unwrap();
            for entry in std::fs::read_dir(source.path()).unwrap() {
                let entry = entry.unwrap();
                if entry.file_name() != "LOCK" {
                    std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
                }
            }
            let mut bytes = older.clone();
            bytes[offset] ^= 0x5a;
            std::fs::write(dir.path().join(wals[0].file_name().unwrap()), &bytes).unwrap();
            let options = Options {
                wal_recovery: mode,
                ..always.clone()
            };
            match Db::open(dir.path(), options) {
                Ok(db) => {
                    // A hole: a record of the newer WAL recovered while one
                    // before it in the older WAL was not.
                    if let Err(why) = history_prefix(&db, i) {
                        holes.push(format!(
                            "{mode:?}, byte {offset} of {} ({} bytes) flipped, newer WAL {newer_len} bytes: {why}",
                            wals[0].display(),
                            older.len()
                        ));
                    }
                    opened += 1;
                }
                Err(e) => {
                    assert!(
                        mode == WalRecovery::TolerateTornTail && e.is_corruption(),
                        "{mode:?}, byte {offset} of {} flipped: open failed with {e}",
                        wals[0].display()
                    );
                    refused += 1;
                }
            }
        }
    }
    let in_mode = |m: &str| holes.iter().filter(|h| h.starts_with(m)).count();
    assert!(
        holes.is_empty(),
        "{} of {opened} recoveries left a hole ({} with TolerateTornTail, {} with PointInTime); first of each: {:?}",
        holes.len(),
        in_mode("TolerateTornTail"),
        in_mode("PointInTime"),
        [
            holes.iter().find(|h| h.starts_with("TolerateTornTail")),
            holes.iter().find(|h| h.starts_with("PointInTime"))
        ]
    );
    println!(
        "{} flips in the older of 2 live WALs under both recovery modes: {refused} refused as corruption, \
         {opened} opened, every one a prefix of the history",
        2 * offsets.len()
    );
}

/// Writes of the rebuild run (a filter rebuild every 30: three rebuilds,
/// each over several levels' tables).
const REBUILD_WRITES: u64 = 90;

/// Writes with a filter rebuild after every 30 (tables rewritten under new
/// numbers with the old tables' manifest records, then more flushes and
/// compactions over the rebuilt tables) until the crash; returns the writes
/// acknowledged. A rebuild that fails ends the run like a failed write.
fn run_with_rebuilds_until_crash(dir: &std::path::Path, fs: &FaultFs) -> u64 {
    let Ok(db) = Db::open_with_fs(dir, options(), Arc::new(fs.clone())) else {
        return 0;
    };
    let policies = [
        bloomlsm::FilterPolicy::PerLevel(vec![14.0, 6.0, 3.0]),
        bloomlsm::FilterPolicy::Uniform { bits_per_key: 0.0 },
        bloomlsm::FilterPolicy::Optimized { bits_per_key: 8.0 },
    ];
    let mut acked = 0;
    for i in 0..REBUILD_WRITES {
        if i % 30 == 29
            && db
                .rebuild_filters(policies[(i / 30) as usize % 3].clone())
                .is_err()
        {
            break;
        }
        if db.put(&key(i), &value(i)).is_err() {
            break;
        }
        acked = i + 1;
    }
    drop(db);
    acked
}

/// Every crash point of a run that rebuilds filters between flushes and
/// compactions: the reopen (which compares every manifest record with its
/// table's properties) succeeds, loses no acknowledged write and leaves no
/// orphan.
#[test]
fn every_crash_point_around_filter_rebuilds_reopens_with_matching_records() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    assert_eq!(
        run_with_rebuilds_until_crash(dir.path(), &fs),
        REBUILD_WRITES
    );
    let total_ops = fs.ops();
    for crash_at in 0..total_ops {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let acked = run_with_rebuilds_until_crash(dir.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("reopen after a crash at operation {crash_at} failed: {e}"));
        let recovered = recovered_prefix(&db, REBUILD_WRITES);
        assert!(
            (acked..=acked + 1).contains(&recovered),
            "crash at {crash_at}: {acked} writes acknowledged, {recovered} recovered"
        );
        close_with_no_orphan_table(db, dir.path(), &format!("crash at {crash_at}"));
    }
    println!("{total_ops} crash points around filter rebuilds");
}
