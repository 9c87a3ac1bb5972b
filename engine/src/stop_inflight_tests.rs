//! Jobs already running when an I/O error stops writes still install
//! afterwards (`install` does not look for a stop): a flush, a merging
//! compaction or a filter rebuild that had passed its check. Each case
//! holds such a job at a pause point, fails one operation of another
//! job's manifest write (the temporary file's create, write or fsync, the
//! rename, the directory fsync after it) or of a write's WAL append, lets
//! the held job install after the stop, then closes, optionally loses
//! power (renames not yet durable all kept, or all undone) and reopens.
//!
//! Invariants: the stop is the failure's; reads, snapshots and iterators
//! answer as a model says throughout; every later change is refused with
//! `WritesStopped`; the job in flight installs; the close returns the
//! stop (one case of three drops the store instead); the reopen holds
//! every acknowledged write (a write whose append failed may come back,
//! as the last one), keeps no table its manifest does not name, and
//! takes new writes. Sound because every manifest is a
//! whole state written from the view under the install lock, a failed
//! install deletes nothing (neither its inputs nor its outputs nor a
//! frozen WAL) and changes no file a later manifest from the view names,
//! and a successful one deletes only after its own manifest is durable.
//!
//! Each interleaving is forced by pause points (every other thread idle
//! at one, so the operation counted is exactly the one failed), not by
//! timing.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use crate::fs::fault::{FaultFs, RenameFate, UnsyncedFate};
use crate::test_hooks::ReadPause;
use crate::test_model::{
    Entries, HANG, Model, Op, apply, key, only_live_tables_on_disk, reads_match, record,
    tables_grown_in_place, within, write_ops,
};
use crate::{Db, Error, FilterPolicy, Options, StopCause, SyncMode, WriteStop};

pub(crate) const KEYS: u64 = 600;
const FLUSH: &str = "bloomlsm-flush";
const COMPACT: &str = "bloomlsm-compact";
/// The operations of a manifest write, in order: the temporary file's
/// create, write and fsync, the rename, the directory fsync.
const MANIFEST_OPS: u64 = 5;

/// Which job's write fails (and so stops writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failing {
    /// A flush's manifest write; a merge is in flight.
    Flush,
    /// A merge's manifest write; a flush is in flight.
    Merge,
    /// A filter rebuild's (`Db::rebuild_filters`) manifest write; a flush
    /// is in flight.
    Rebuild,
    /// A write's WAL append (`SyncMode::Never`: its write) or fsync
    /// (`SyncMode::Always`); a flush and a merge are in flight.
    Wal(SyncMode),
    /// `Db::flush`'s memtable rotation, at its operation `op`: the new
    /// WAL's create, header write, header fsync, the directory fsync
    /// and (`SyncMode::Always`) the old WAL's fsync; a flush and a merge
    /// are in flight.
    Rotation(SyncMode),
}

pub(crate) fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        // High: writes go on while a compaction is held.
        l0_slowdown_trigger: 10,
        l0_stop_trigger: 16,
        max_immutable_memtables: 3,
        l1_bytes: 16 << 10,
        level_size_ratio: 3,
        dynamic_level_bytes: false,
        target_file_bytes: 4 << 10,
        num_levels: 5,
        block_size: 1024,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        background_work: true,
        ..Options::default()
    }
}

/// Puts (overwrites) and about a quarter deletes over `KEYS` keys.
pub(crate) struct Ops {
    rng: u64,
    n: u64,
}

impl Ops {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            n: 0,
        }
    }

    pub(crate) fn next(&mut self) -> Op {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.n += 1;
        let k = key(self.rng % KEYS);
        if (self.rng >> 32).is_multiple_of(4) {
            (k, None)
        } else {
            (k, Some(format!("{:040}", self.n).into_bytes()))
        }
    }
}

/// Applies ops (recording each acknowledged one) until a thread says it
/// paused. While the next write could stall behind a held job (the
/// frozen memtables or L0 near full), it waits for the pause or for room
/// instead of writing.
fn write_until(what: &str, db: &Db, ops: &mut Ops, model: &mut Model, paused: &Receiver<()>) {
    let o = &db.inner.options;
    let start = std::time::Instant::now();
    for _ in 0..20_000 {
        loop {
            let sv = db.inner.current.load_full();
            if sv.imm.len() + 1 < o.max_immutable_memtables
                && sv.version.levels[0].len() + 1 < o.l0_stop_trigger
            {
                break;
            }
            match paused.recv_timeout(Duration::from_millis(5)) {
                Ok(()) => return,
                Err(_) => assert!(start.elapsed() < HANG, "HANG: {what}: no pause, no room"),
            }
        }
        if paused.try_recv().is_ok() {
            return;
        }
        let op = ops.next();
        apply(db, &op).unwrap();
        record(model, op);
    }
    panic!("{what}: no pause after 20000 writes");
}

/// Stops the next thread named `thread` at `pause` (that thread's next
/// visit only, and only while `when()` holds there): returns "paused" and
/// "resume".
pub(crate) fn arm(
    pause: &ReadPause,
    thread: &'static str,
    when: impl Fn() -> bool + Send + Sync + 'static,
) -> (Receiver<()>, Sender<()>) {
    let (paused_tx, paused_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel::<()>();
    let resume_rx = parking_lot::Mutex::new(resume_rx);
    let armed = std::sync::atomic::AtomicBool::new(true);
    pause.set(Some(Arc::new(move || {
        if std::thread::current().name() == Some(thread)
            && when()
            && armed.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            paused_tx.send(()).unwrap();
            resume_rx.lock().recv().unwrap();
        }
    })));
    (paused_rx, resume_tx)
}

/// Reads held across the stop: a snapshot, an iterator half read and one
/// on the snapshot not yet read.
pub(crate) struct Held {
    snapshot: crate::Snapshot,
    snapshot_model: Model,
    iter: crate::DbIter,
    iter_rest: Entries,
    snapshot_iter: crate::DbIter,
}

impl Held {
    pub(crate) fn take(db: &Db, model: &Model) -> Self {
        let snapshot = db.snapshot();
        let all: Entries = model.clone().into_iter().collect();
        let mut iter = db.scan::<&[u8], _>(..).unwrap();
        let head: Entries = (&mut iter)
            .take(all.len() / 2)
            .map(Result::unwrap)
            .collect();
        assert!(head == all[..head.len()]);
        Self {
            snapshot_iter: snapshot.scan::<&[u8], _>(..).unwrap(),
            snapshot,
            snapshot_model: model.clone(),
            iter,
            iter_rest: all[head.len()..].to_vec(),
        }
    }

    pub(crate) fn check(self) -> crate::Snapshot {
        let s = &self.snapshot;
        reads_match(
            "snapshot",
            KEYS,
            |k| s.get(k),
            s.scan::<&[u8], _>(..),
            &self.snapshot_model,
        );
        let rest: Entries = self.iter.map(Result::unwrap).collect();
        assert!(rest == self.iter_rest, "an iterator opened before the stop");
        let snap_all: Entries = self.snapshot_iter.map(Result::unwrap).collect();
        assert!(
            snap_all == self.snapshot_model.into_iter().collect::<Entries>(),
            "a snapshot iterator opened before the stop"
        );
        self.snapshot
    }
}

pub(crate) fn wait(what: &str, rx: &Receiver<()>) {
    rx.recv_timeout(HANG)
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
}

/// Waits for the install under way (if any) to end: the failing one
/// stops writes before it releases the install lock.
fn install_done(db: &Db) {
    drop(db.inner.install_lock.lock());
}

/// The stop a write meets now: writes must have stopped on an I/O error.
pub(crate) fn io_stop(db: &Db, case: &str) -> WriteStop {
    let stop = match db.put(b"probe", b"x") {
        Err(Error::WritesStopped(s)) => s,
        other => panic!("{case}: writes not stopped: {other:?}"),
    };
    assert!(
        matches!(stop.cause(), StopCause::Io { .. }),
        "{case}: {stop}"
    );
    stop
}

/// Every change is refused with the stop; reads answer the model.
pub(crate) fn refused_after_stop(db: &Db, model: &Model, stop: &WriteStop) {
    reads_match("db", KEYS, |k| db.get(k), db.scan::<&[u8], _>(..), model);
    let refused = |what: &str, r: crate::Result<()>| match r {
        Err(Error::WritesStopped(s)) => assert_eq!(&s, stop, "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    refused("put", db.put(b"after", b"stop"));
    refused("delete", db.delete(&key(0)));
    refused("flush", db.flush());
    refused("compact", db.compact());
    refused(
        "rebuild",
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 4.0 }),
    );
    refused("wait", db.wait_for_background_work());
    reads_match(
        "db after refusals",
        KEYS,
        |k| db.get(k),
        db.scan::<&[u8], _>(..),
        model,
    );
    // A snapshot taken after the stop reads as of it.
    let s = db.snapshot();
    reads_match(
        "snapshot after the stop",
        KEYS,
        |k| s.get(k),
        s.scan::<&[u8], _>(..),
        model,
    );
}

/// One case: `failing` fails at its manifest operation `op` (for a WAL
/// failure, `op` is unused); after the close, a power loss under `fate`,
/// or none.
fn run(failing: Failing, op: u64, fate: Option<RenameFate>) {
    let sync = match failing {
        Failing::Wal(sync) | Failing::Rotation(sync) => sync,
        _ => SyncMode::Never,
    };
    run_as(failing, op, fate, sync, End::Close);
}

/// How the store ends before the power loss (if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// `close` (or, for renames undone, a drop).
    Close,
    /// A crash: every operation fails from then on, so the close that a
    /// drop attempts makes nothing more durable. For `SyncMode::Always`.
    Crash,
    /// A dying device: the failed operation and every later one fail, so
    /// the jobs in flight fail too, and so does the close's fsync. For
    /// `SyncMode::Always`.
    Dying,
}

/// [`run`] under `sync`, ending as `end` says.
fn run_as(failing: Failing, op: u64, fate: Option<RenameFate>, sync: SyncMode, end: End) {
    let case = format!("{failing:?} op {op} fate {fate:?} {sync:?} {end:?}");
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let fail = |n| match end {
        End::Dying => fs.fail_from_op(n),
        _ => fs.fail_only_op(n),
    };
    let db = Arc::new(Db::open_with_fs(dir.path(), options(sync), Arc::new(fs.clone())).unwrap());
    let mut ops = Ops::new(7);
    let mut model = Model::new();
    write_ops(&db, &mut model, 3000, || ops.next());
    db.wait_for_background_work().unwrap();
    let deep = db.inner.current.load().version.levels[1..]
        .iter()
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        deep >= 2,
        "{case}: a narrow tree has several levels: {deep}"
    );
    let held = Held::take(&db, &model);

    // Installs after the stop, by the job(s) in flight.
    let (installed_tx, installed) = mpsc::channel();
    let installed_tx = parking_lot::Mutex::new(installed_tx);
    let inner = &db.inner;

    // A merge held past its check, before it writes anything.
    let merge_held = (failing != Failing::Rebuild).then(|| {
        let held = arm(&inner.merge_pause, COMPACT, || true);
        write_until(&case, &db, &mut ops, &mut model, &held.0);
        held
    });
    // A flush held past its check, before it writes anything (for a
    // rebuild, below: a rebuild plans once the flushes in flight have
    // installed, so the held flush starts after the rebuild's plan).
    let mut flush_held = (failing != Failing::Flush && failing != Failing::Rebuild).then(|| {
        let held = arm(&inner.flush_pause, FLUSH, || true);
        write_until(&case, &db, &mut ops, &mut model, &held.0);
        held
    });
    // Each case below ends with every other thread idle at a pause point
    // before it arms the failure: the operation counted is the one meant.
    let mut failed_write = None;
    let mut rebuild = None;
    let merge_held = match failing {
        Failing::Flush => {
            let (paused, resume) = arm(&inner.before_manifest_pause, FLUSH, || true);
            write_until(&case, &db, &mut ops, &mut model, &paused);
            fail(fs.ops() + op);
            resume.send(()).unwrap();
            install_done(&db);
            merge_held
        }
        Failing::Merge => {
            // The held merge writes its outputs and stops in its install.
            let (paused, resume) = arm(&inner.before_manifest_pause, COMPACT, || true);
            merge_held.unwrap().1.send(()).unwrap();
            wait(&case, &paused);
            fail(fs.ops() + op);
            resume.send(()).unwrap();
            install_done(&db);
            None
        }
        Failing::Rebuild => {
            let (paused, resume) = arm(&inner.before_manifest_pause, "stop-rebuild", || true);
            let shared = Arc::clone(&db);
            rebuild = Some(
                std::thread::Builder::new()
                    .name("stop-rebuild".into())
                    .spawn(move || {
                        shared.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 6.0 })
                    })
                    .unwrap(),
            );
            wait(&case, &paused);
            let held = arm(&inner.flush_pause, FLUSH, || true);
            write_until(&case, &db, &mut ops, &mut model, &held.0);
            flush_held = Some(held);
            // Rebuilt in place: files past the sizes the view (and the
            // manifest on disk) record, which the failed manifest names.
            assert!(
                tables_grown_in_place(&db, dir.path()) > 0,
                "{case}: no table was rebuilt in place"
            );
            // It holds the compaction lock: the compaction thread is idle.
            fail(fs.ops() + op);
            resume.send(()).unwrap();
            install_done(&db);
            None
        }
        Failing::Wal(sync) => {
            // The append's write, then (Always) its fsync.
            let failed_op = if sync == SyncMode::Always { 1 } else { 0 };
            fail(fs.ops() + failed_op);
            let op = ops.next();
            assert!(apply(&db, &op).is_err(), "{case}: the failed write");
            failed_write = Some(op);
            merge_held
        }
        Failing::Rotation(_) => {
            // A memtable to rotate (a write that rotated leaves none).
            while db.inner.current.load().mem.is_empty() {
                let op = ops.next();
                apply(&db, &op).unwrap();
                record(&mut model, op);
            }
            fail(fs.ops() + op);
            let shared = Arc::clone(&db);
            let flushed = within("the failing rotation", move || shared.flush());
            assert!(flushed.is_err(), "{case}: the rotation fails");
            merge_held
        }
    };
    let stop = io_stop(&db, &case);
    let expected_operation = match failing {
        Failing::Wal(_) => "WAL append",
        Failing::Rotation(_) => "creating a new WAL",
        _ => "manifest write",
    };
    assert_eq!(stop.operation(), expected_operation, "{case}: {stop}");
    if let Some(rebuild) = rebuild {
        assert!(
            rebuild.join().unwrap().is_err(),
            "{case}: the rebuild fails"
        );
    }
    {
        let tx = installed_tx;
        inner.install_hook.set(Some(Arc::new(move |_, _| {
            let _ = tx.lock().send(());
        })));
    }
    refused_after_stop(&db, &model, &stop);

    // The held jobs run on and install after the stop.
    // (On a dying device they fail instead; the close joins them.)
    if let Some((_, resume)) = flush_held {
        resume.send(()).unwrap();
        if end != End::Dying {
            wait(&format!("{case}: the held flush installs"), &installed);
        }
    }
    if let Some((_, resume)) = merge_held {
        resume.send(()).unwrap();
        if end != End::Dying {
            wait(&format!("{case}: the held merge installs"), &installed);
        }
    }
    refused_after_stop(&db, &model, &stop);
    let snapshot = held.check();

    let inner = Arc::clone(&db.inner);
    let db = Arc::into_inner(db).unwrap();
    if end == End::Dying {
        let closed = within("close on a dying device", move || db.close());
        assert!(closed.is_err(), "{case}: close: {closed:?}");
        fs.heal();
    } else if end == End::Crash {
        // What was never fsynced (the failed write's record, say) may
        // survive in part, as pages of the page cache.
        fs.set_unsynced_fate(UnsyncedFate::Pages(op + 1));
        fs.fail_from_op(fs.ops());
        within("drop after the crash", move || drop(db));
        fs.heal();
    } else if fate == Some(RenameFate::Undone) {
        // A drop closes as `close` does (its error unseen).
        within("drop", move || drop(db));
    } else {
        match within("close", move || db.close()) {
            Err(Error::WritesStopped(s)) => assert_eq!(s, stop, "{case}"),
            other => panic!("{case}: close: {other:?}"),
        }
    }
    drop(snapshot);
    drop(inner);
    if let Some(fate) = fate {
        fs.set_rename_fate(fate);
        fs.simulate_power_loss().unwrap();
    }
    reopen_holds(&case, dir.path(), &model, failed_write, sync);
}

/// A reopen holds every acknowledged write (for a failed WAL write, the
/// failed op's key may also read as that op left it), keeps only the
/// tables its manifest names, and takes new writes.
pub(crate) fn reopen_holds(
    case: &str,
    dir: &std::path::Path,
    model: &Model,
    failed_write: Option<Op>,
    sync: SyncMode,
) {
    let db = Db::open(
        dir,
        Options {
            background_work: false,
            ..options(sync)
        },
    )
    .unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
    let recovered: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let with_failed = failed_write.map(|op| {
        let mut m = model.clone();
        record(&mut m, op);
        m
    });
    if &recovered != model && Some(&recovered) != with_failed.as_ref() {
        let differs: Vec<&Vec<u8>> = model
            .keys()
            .chain(recovered.keys())
            .filter(|k| model.get(*k) != recovered.get(*k))
            .collect();
        panic!("{case}: the reopened store differs at {differs:?}");
    }
    only_live_tables_on_disk(case, &db, dir);
    let mut model = recovered;
    let mut ops = Ops::new(99);
    write_ops(&db, &mut model, 1000, || ops.next());
    db.flush().unwrap();
    reads_match(case, KEYS, |k| db.get(k), db.scan::<&[u8], _>(..), &model);
    db.close().unwrap();
}

pub(crate) fn fates() -> [Option<RenameFate>; 3] {
    [None, Some(RenameFate::Kept), Some(RenameFate::Undone)]
}

#[test]
fn a_merge_in_flight_installs_after_a_flush_manifest_write_failed() {
    for op in 0..MANIFEST_OPS {
        for fate in fates() {
            run(Failing::Flush, op, fate);
        }
    }
}

#[test]
fn a_flush_in_flight_installs_after_a_merge_manifest_write_failed() {
    for op in 0..MANIFEST_OPS {
        for fate in fates() {
            run(Failing::Merge, op, fate);
        }
    }
}

#[test]
fn a_flush_in_flight_installs_after_a_rebuild_manifest_write_failed() {
    for op in 0..MANIFEST_OPS {
        for fate in fates() {
            run(Failing::Rebuild, op, fate);
        }
    }
}

#[test]
fn a_flush_and_a_merge_in_flight_install_after_a_wal_append_failed() {
    for sync in [SyncMode::Never, SyncMode::Always] {
        for fate in fates() {
            run(Failing::Wal(sync), 0, fate);
        }
    }
}

#[test]
fn a_flush_and_a_merge_in_flight_install_after_a_rotation_failed() {
    for (sync, ops) in [(SyncMode::Never, 4), (SyncMode::Always, 5)] {
        for op in 0..ops {
            for fate in fates() {
                run(Failing::Rotation(sync), op, fate);
            }
        }
    }
}

/// Under `SyncMode::Always` every acknowledged write is durable when it
/// returns: a crash after the stop (no close) and a power loss keep them
/// all, with the jobs in flight installed after the stop.
#[test]
fn synced_writes_survive_a_crash_after_jobs_in_flight_installed() {
    for failing in [Failing::Flush, Failing::Merge, Failing::Rebuild] {
        for op in 0..MANIFEST_OPS {
            for fate in [RenameFate::Kept, RenameFate::Undone] {
                run_as(failing, op, Some(fate), SyncMode::Always, End::Crash);
            }
        }
    }
    for failing in [
        Failing::Wal(SyncMode::Always),
        Failing::Rotation(SyncMode::Always),
    ] {
        for fate in [RenameFate::Kept, RenameFate::Undone] {
            run_as(failing, 0, Some(fate), SyncMode::Always, End::Crash);
        }
    }
}

/// Under `SyncMode::Always`, on a device that fails every operation from
/// the first failure on, the jobs in flight fail too (no install after
/// the stop), the close fails, and a power loss still keeps every
/// acknowledged write.
#[test]
fn synced_writes_survive_a_dying_device_under_jobs_in_flight() {
    for failing in [Failing::Flush, Failing::Merge, Failing::Rebuild] {
        for op in 0..MANIFEST_OPS {
            for fate in [RenameFate::Kept, RenameFate::Undone] {
                run_as(failing, op, Some(fate), SyncMode::Always, End::Dying);
            }
        }
    }
    for failing in [
        Failing::Wal(SyncMode::Always),
        Failing::Rotation(SyncMode::Always),
    ] {
        for fate in [RenameFate::Kept, RenameFate::Undone] {
            run_as(failing, 0, Some(fate), SyncMode::Always, End::Dying);
        }
    }
}
