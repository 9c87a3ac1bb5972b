//! A panic (a bug) at other points than a compaction's merge: in a
//! flush's or a compaction's install (before the manifest write, after it
//! and before the view swap, after the swap) and in a background filter
//! rebuild. Each case runs on a deep, narrow tree (4 KiB memtables, small
//! tables, several levels) with overwrites and deletes, a snapshot and
//! iterators taken before the panic. After it: reads answer exactly what a
//! model says (the snapshot and the iterators as of when they were taken),
//! the close returns the stop promptly, nothing the panicked job claimed
//! or registered stays so, and a reopen holds every acknowledged write,
//! keeps no table file its manifest does not name, and takes new writes.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::cell::Cell;
use std::sync::Arc;

use crate::test_model::{
    Entries, Model, apply, key, only_live_tables_on_disk, reads_match, record, stray_tables,
    within, write_ops,
};
use crate::{Db, Error, FilterPolicy, Options, StopCause, SyncMode, WriteStop};

const KEYS: u64 = 700;
const MESSAGE: &str = "injected panic";

/// Which job panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    Flush,
    /// A merging compaction (not a trivial move).
    Merge,
    /// A filter rebuild (rebalancing, on the compaction thread).
    Rebuild,
}

/// Where in the job it panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// A rebuild's copies written and synced, before its install.
    BeforeInstall,
    /// In the install, before the manifest write.
    BeforeManifest,
    /// In the install, after the manifest write, before the view swap.
    AfterManifest,
    /// In the install, after the view swap.
    AfterSwap,
}

thread_local! {
    /// Set on a thread once its current job is the one to panic.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn options(background_work: bool, job: Job) -> Options {
    let filter_policy = match job {
        // Rebalancing rebuilds happen under `Optimized` only.
        Job::Rebuild => FilterPolicy::Optimized { bits_per_key: 10.0 },
        _ => FilterPolicy::Uniform { bits_per_key: 10.0 },
    };
    // While L0 is at its slowdown trigger compactions go first and no
    // rebalancing rebuild runs (`compaction_cycle`): under writes as fast
    // as these, L0 stayed there, and a rebuild case could see none.
    let (l0_slowdown_trigger, l0_stop_trigger) = match job {
        Job::Rebuild => (8, 12),
        _ => (3, 4),
    };
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger,
        l0_stop_trigger,
        l1_bytes: 16 << 10,
        level_size_ratio: 3,
        dynamic_level_bytes: false,
        target_file_bytes: 8 << 10,
        num_levels: 5,
        block_size: 1024,
        filter_policy,
        background_work,
        ..Options::default()
    }
}

/// A stream of puts (overwrites included) and deletes over `KEYS` keys.
struct Ops {
    rng: u64,
    n: u64,
    /// Every other op a put of a new key past `KEYS`: the tree grows, so
    /// the levels' filter budgets move and rebalancing rebuilds come due
    /// (over a tree of fixed size they may not, for as long as the writes
    /// go on).
    grow: bool,
}

impl Ops {
    fn new(seed: u64) -> Self {
        Self {
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            n: 0,
            grow: false,
        }
    }

    fn next(&mut self) -> (Vec<u8>, Option<Vec<u8>>) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.n += 1;
        if self.grow && self.n.is_multiple_of(2) {
            return (
                key(KEYS + self.n),
                Some(format!("{:048}", self.n).into_bytes()),
            );
        }
        let k = key(self.rng % KEYS);
        if (self.rng >> 32).is_multiple_of(5) {
            (k, None)
        } else {
            (k, Some(format!("{:048}", self.n).into_bytes()))
        }
    }
}

/// Makes `job` panic at `stage` on whichever thread runs it.
fn inject(db: &Db, job: Job, stage: Stage) {
    let inner = &db.inner;
    let arm = || Arc::new(|| ARMED.with(|a| a.set(true)));
    let disarm = || Arc::new(|| ARMED.with(|a| a.set(false)));
    match job {
        // A background flush runs on its own thread; an inline one on a
        // thread the test arms.
        Job::Flush => {}
        // Every pick disarms; the merge (never a trivial move) arms.
        Job::Merge => {
            inner.pick_pause.set(Some(disarm()));
            inner.merge_pause.set(Some(arm()));
        }
        Job::Rebuild => {
            inner.pick_pause.set(Some(disarm()));
            inner.rebuild_pause.set(Some(arm()));
        }
    }
    let fires = move || {
        ARMED.with(Cell::get)
            || (job == Job::Flush && std::thread::current().name() == Some("bloomlsm-flush"))
    };
    let fire = move || {
        if fires() {
            panic!("{MESSAGE} ({job:?}, {stage:?})");
        }
    };
    match stage {
        Stage::BeforeInstall => {
            assert_eq!(job, Job::Rebuild);
            inner
                .rebuild_pause
                .set(Some(Arc::new(|| panic!("{MESSAGE} (rebuild)"))));
        }
        Stage::BeforeManifest => inner.before_manifest_pause.set(Some(Arc::new(fire))),
        Stage::AfterManifest => inner.after_manifest_pause.set(Some(Arc::new(fire))),
        Stage::AfterSwap => inner.install_hook.set(Some(Arc::new(move |_, _| fire()))),
    }
}

/// What a case holds from before the panic.
struct Before {
    snapshot: crate::Snapshot,
    snapshot_model: Model,
    /// Half read before the panic; the rest is read after it.
    iter: crate::DbIter,
    iter_rest: Entries,
    /// Opened on the snapshot before the panic, read after it.
    snapshot_iter: crate::DbIter,
}

/// Fills a deep tree, takes the snapshot and iterators, then writes on
/// without waiting (L0 tables and frozen memtables pending).
fn before_the_panic(db: &Db, ops: &mut Ops, model: &mut Model) -> Before {
    for _ in 0..4000 {
        let op = ops.next();
        apply(db, &op).unwrap();
        record(model, op);
    }
    db.wait_for_background_work().unwrap();
    let sv = db.inner.current.load_full();
    let deep = sv
        .version
        .levels
        .iter()
        .skip(1)
        .filter(|l| !l.is_empty())
        .count();
    assert!(deep >= 2, "a narrow tree has several levels: {deep}");
    let snapshot = db.snapshot();
    let snapshot_model = model.clone();
    let mut iter = db.scan::<&[u8], _>(..).unwrap();
    let all: Entries = model.clone().into_iter().collect();
    let head: Entries = (&mut iter)
        .take(all.len() / 2)
        .map(Result::unwrap)
        .collect();
    assert!(head == all[..head.len()]);
    let iter_rest = all[head.len()..].to_vec();
    let snapshot_iter = snapshot.scan::<&[u8], _>(..).unwrap();
    for _ in 0..300 {
        let op = ops.next();
        apply(db, &op).unwrap();
        record(model, op);
    }
    Before {
        snapshot,
        snapshot_model,
        iter,
        iter_rest,
        snapshot_iter,
    }
}

/// Everything after the stop: reads, leaks, close, reopen.
fn after_the_panic(
    dir: &std::path::Path,
    db: Arc<Db>,
    before: Before,
    model: Model,
    stop: WriteStop,
    job: Job,
    stage: Stage,
) {
    assert_eq!(stop.cause(), StopCause::Panic, "{stop}");
    // The job and stage the panic was injected at, and no other.
    let tag = match stage {
        Stage::BeforeInstall => format!("{MESSAGE} (rebuild)"),
        _ => format!("{MESSAGE} ({job:?}, {stage:?})"),
    };
    assert!(stop.message().contains(&tag), "{stop}");
    let model = Arc::new(model);
    let before = {
        let db = Arc::clone(&db);
        let model = Arc::clone(&model);
        within("reads and refused work after the panic", move || {
            reads_match("db", KEYS, |k| db.get(k), db.scan::<&[u8], _>(..), &model);
            // Every call that would change the store is refused at once.
            let refused = |what: &str, r: crate::Result<()>| {
                assert!(matches!(r, Err(Error::WritesStopped(_))), "{what}: {r:?}");
            };
            refused("wait", db.wait_for_background_work());
            refused("flush", db.flush());
            refused("compact", db.compact());
            refused(
                "rebuild",
                db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 4.0 }),
            );
            refused("delete", db.delete(&key(0)));
            let s = &before.snapshot;
            reads_match(
                "snapshot",
                KEYS,
                |k| s.get(k),
                s.scan::<&[u8], _>(..),
                &before.snapshot_model,
            );
            before
        })
    };
    let Before {
        snapshot,
        snapshot_model,
        iter,
        iter_rest,
        snapshot_iter,
    } = before;
    let rest: Entries = iter.map(Result::unwrap).collect();
    assert!(rest == iter_rest, "an iterator opened before the panic");
    let snap_all: Entries = snapshot_iter.map(Result::unwrap).collect();
    assert!(
        snap_all == snapshot_model.into_iter().collect::<Entries>(),
        "a snapshot iterator"
    );
    let inner = Arc::clone(&db.inner);
    // Against the view, taken before the close empties it.
    let stray = stray_tables(&inner, dir);
    let db = Arc::into_inner(db).unwrap();
    let closed = within("close", move || db.close());
    match closed {
        Err(Error::WritesStopped(s)) => assert_eq!(s, stop),
        other => panic!("close: {other:?}"),
    }
    // Threads joined: what the panicked job claimed is released.
    assert_eq!(inner.filter_claims.held(), 0, "filter bytes still claimed");
    drop(snapshot);
    assert!(
        inner.snapshots.lock().is_empty(),
        "a snapshot stays registered"
    );
    // What the panicked job leaves on disk in this process, for the
    // reopen to remove: a merge's outputs, or (after the swap) its inputs,
    // never deleted; a flush's table never installed. (A rebuild in place
    // leaves no file of its own; a copy would.)
    match job {
        Job::Merge => assert!(!stray.is_empty(), "a merge left nothing"),
        Job::Flush if stage != Stage::AfterSwap => assert!(!stray.is_empty()),
        Job::Flush => assert!(stray.is_empty(), "{stray:?}"),
        Job::Rebuild => {}
    }
    drop(inner);
    reopen_holds(dir, &model, job);
}

/// A reopen holds every acknowledged write, keeps only tables its manifest
/// names, and takes new writes, flushes and compactions.
fn reopen_holds(dir: &std::path::Path, model: &Model, job: Job) {
    let db = Db::open(dir, options(false, job)).unwrap();
    reads_match(
        "reopened",
        KEYS,
        |k| db.get(k),
        db.scan::<&[u8], _>(..),
        model,
    );
    only_live_tables_on_disk("reopened", &db, dir);
    let mut model = model.clone();
    let mut ops = Ops::new(99);
    write_ops(&db, &mut model, 1500, || ops.next());
    db.flush().unwrap();
    reads_match(
        "after new writes",
        KEYS,
        |k| db.get(k),
        db.scan::<&[u8], _>(..),
        &model,
    );
    db.compact().unwrap();
    reads_match(
        "after a compaction",
        KEYS,
        |k| db.get(k),
        db.scan::<&[u8], _>(..),
        &model,
    );
    db.close().unwrap();
    let db = Db::open(dir, options(false, job)).unwrap();
    reads_match(
        "reopened again",
        KEYS,
        |k| db.get(k),
        db.scan::<&[u8], _>(..),
        &model,
    );
    db.close().unwrap();
}

/// Background threads: writes go on until the panic stops them.
fn background_case(job: Job, stage: Stage) {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options(true, job)).unwrap());
    let mut ops = Ops::new(1 + stage as u64 * 7 + job as u64);
    let mut model = Model::new();
    let before = before_the_panic(&db, &mut ops, &mut model);
    inject(&db, job, stage);
    ops.grow = job == Job::Rebuild;
    let (model, stop) = {
        let db = Arc::clone(&db);
        within("writes until the stop", move || {
            for _ in 0..300_000 {
                let op = ops.next();
                match apply(&db, &op) {
                    Ok(()) => record(&mut model, op),
                    Err(Error::WritesStopped(stop)) => return (model, stop),
                    Err(e) => panic!("{e}"),
                }
            }
            panic!("the injected panic never fired");
        })
    };
    after_the_panic(dir.path(), db, before, model, stop, job, stage);
}

/// No background threads: the panic reaches the caller that ran the job.
fn inline_case(job: Job, stage: Stage) {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(false, job)).unwrap();
    let mut ops = Ops::new(3 + stage as u64 * 7 + job as u64);
    let mut model = Model::new();
    let before = before_the_panic(&db, &mut ops, &mut model);
    inject(&db, job, stage);
    let caught = if job == Job::Flush {
        ARMED.with(|a| a.set(true));
        let flushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.flush()));
        ARMED.with(|a| a.set(false));
        flushed.expect_err("the flush panics");
        true
    } else {
        let mut caught = false;
        for _ in 0..300_000 {
            let op = ops.next();
            let seq = db.last_sequence();
            let put = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(&db, &op)));
            ARMED.with(|a| a.set(false));
            match put {
                Ok(Ok(())) => record(&mut model, op),
                Ok(Err(e)) => panic!("{e}"),
                Err(_) => {
                    // Applied before its inline work panicked, or not.
                    if db.last_sequence() > seq {
                        record(&mut model, op);
                    }
                    caught = true;
                    break;
                }
            }
        }
        caught
    };
    assert!(caught, "the injected panic never fired");
    let stop = match db.put(b"next", b"put") {
        Err(Error::WritesStopped(stop)) => stop,
        other => panic!("{other:?}"),
    };
    after_the_panic(dir.path(), Arc::new(db), before, model, stop, job, stage);
}

#[test]
fn background_flush_panics_before_its_manifest_write() {
    background_case(Job::Flush, Stage::BeforeManifest);
}

#[test]
fn background_flush_panics_after_its_manifest_write() {
    background_case(Job::Flush, Stage::AfterManifest);
}

#[test]
fn background_flush_panics_after_its_view_swap() {
    background_case(Job::Flush, Stage::AfterSwap);
}

#[test]
fn background_compaction_panics_before_its_manifest_write() {
    background_case(Job::Merge, Stage::BeforeManifest);
}

#[test]
fn background_compaction_panics_after_its_manifest_write() {
    background_case(Job::Merge, Stage::AfterManifest);
}

#[test]
fn background_compaction_panics_after_its_view_swap() {
    background_case(Job::Merge, Stage::AfterSwap);
}

#[test]
fn background_rebuild_panics_before_its_install() {
    background_case(Job::Rebuild, Stage::BeforeInstall);
}

#[test]
fn background_rebuild_panics_after_its_manifest_write() {
    background_case(Job::Rebuild, Stage::AfterManifest);
}

#[test]
fn background_rebuild_panics_after_its_view_swap() {
    background_case(Job::Rebuild, Stage::AfterSwap);
}

#[test]
fn inline_flush_panics_after_its_manifest_write() {
    inline_case(Job::Flush, Stage::AfterManifest);
}

#[test]
fn inline_flush_panics_after_its_view_swap() {
    inline_case(Job::Flush, Stage::AfterSwap);
}

#[test]
fn inline_compaction_panics_after_its_manifest_write() {
    inline_case(Job::Merge, Stage::AfterManifest);
}

#[test]
fn inline_compaction_panics_after_its_view_swap() {
    inline_case(Job::Merge, Stage::AfterSwap);
}

#[test]
fn inline_rebuild_panics_after_its_manifest_write() {
    inline_case(Job::Rebuild, Stage::AfterManifest);
}
