//! A job that fails with an error releases its locks before
//! `stopping_writes_on_error` stops writes: in between, another thread
//! can pass its check and work on what the failed job left. The job that
//! leaves the most is a filter rebuild that fails part way: tables it
//! rebuilt in place have grown past the size the view and the manifest
//! know (nothing installed). In that window here another filter rebuild,
//! or writes and the settling of the background work (flushes, merges,
//! rebalancing rebuilds in place), run to completion; then the stop
//! lands, the store closes, may lose power, and reopens.
//!
//! Invariant: an error leaves nothing a later job could break, since what
//! a job makes durable is a whole install, and the one error after a
//! manifest write may be durable (the write itself) stops writes under the
//! install lock; bytes past a table's recorded size are no one's, so a
//! rebuild in place that cuts them back changes nothing a manifest names.
//! So every acknowledged write survives and the store reopens.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use crate::fs::fault::{FaultFs, RenameFate};
use crate::stop_inflight_tests::{
    Held, Ops, arm, fates, io_stop, options, refused_after_stop, reopen_holds,
};
use crate::test_model::{Model, tables_grown_in_place, within, write_ops};
use crate::{Db, Error, FilterPolicy, Options, SyncMode};

/// What runs in the window.
#[derive(Clone, Copy, Debug)]
enum Interloper {
    /// Another filter rebuild, in place over the grown tables.
    Rebuild,
    /// Writes, then `wait_for_background_work` (flushes, merges and
    /// rebalancing rebuilds).
    Work,
}

fn store_options() -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 10.0 },
        ..options(SyncMode::Never)
    }
}

/// Returns whether the failed rebuild had grown a table at the window.
fn run(fail_at: u64, interloper: Interloper, fate: Option<RenameFate>) -> bool {
    let case = format!("op {fail_at} {interloper:?} fate {fate:?}");
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Arc::new(Db::open_with_fs(dir.path(), store_options(), Arc::new(fs.clone())).unwrap());
    let mut ops = Ops::new(11);
    let mut model = Model::new();
    write_ops(&db, &mut model, 3000, || ops.next());
    db.wait_for_background_work().unwrap();
    let held = Held::take(&db, &model);

    // Nothing is due: the background threads are idle, and the rebuild's
    // operations are the only ones counted.
    let (paused, resume) = arm(&db.inner.failed_pause, "stop-failing", || true);
    fs.fail_only_op(fs.ops() + fail_at);
    let failing = {
        let db = Arc::clone(&db);
        std::thread::Builder::new()
            .name("stop-failing".into())
            .spawn(move || db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 6.0 }))
            .unwrap()
    };
    // An op the rebuild does not reach, or whose failure it works around
    // (an append refused: it copies instead), fails nothing: no window.
    loop {
        if paused
            .recv_timeout(std::time::Duration::from_millis(5))
            .is_ok()
        {
            break;
        }
        if failing.is_finished() {
            failing.join().unwrap().unwrap();
            return false;
        }
    }
    let grew = tables_grown_in_place(&db, dir.path()) > 0;
    assert!(
        db.inner.write_error.lock().is_none(),
        "{case}: stopped early"
    );

    // The window: the failed rebuild's locks are free, writes go on.
    match interloper {
        Interloper::Rebuild => {
            let shared = Arc::clone(&db);
            within(&case, move || {
                shared.rebuild_filters(FilterPolicy::Optimized { bits_per_key: 12.0 })
            })
            .unwrap();
            assert_eq!(
                tables_grown_in_place(&db, dir.path()),
                0,
                "{case}: not rebuilt in place"
            );
        }
        Interloper::Work => {
            write_ops(&db, &mut model, 400, || ops.next());
            db.wait_for_background_work().unwrap();
        }
    }
    resume.send(()).unwrap();
    assert!(
        failing.join().unwrap().is_err(),
        "{case}: the rebuild fails"
    );
    let stop = io_stop(&db, &case);
    assert_eq!(stop.operation(), "filter rebuild", "{case}");
    refused_after_stop(&db, &model, &stop);
    let snapshot = held.check();
    let db = Arc::into_inner(db).unwrap();
    match within("close", move || db.close()) {
        Err(Error::WritesStopped(s)) => assert_eq!(s, stop, "{case}"),
        other => panic!("{case}: close: {other:?}"),
    }
    drop(snapshot);
    if let Some(fate) = fate {
        fs.set_rename_fate(fate);
        fs.simulate_power_loss().unwrap();
    }
    reopen_holds(&case, dir.path(), &model, None, SyncMode::Never);
    grew
}

#[test]
fn work_in_the_window_after_a_failed_rebuild_keeps_every_write() {
    let mut grew = 0;
    for fail_at in [1, 3, 6, 10, 15, 25] {
        for interloper in [Interloper::Rebuild, Interloper::Work] {
            for fate in fates() {
                grew += usize::from(run(fail_at, interloper, fate));
            }
        }
    }
    // The window is the one meant: the failed rebuild had grown tables.
    assert!(grew > 0, "no failed rebuild had grown a table");
}
