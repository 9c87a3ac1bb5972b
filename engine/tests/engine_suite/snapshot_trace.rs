//! `Snapshot::get_traced`: the same answer as `Snapshot::get`, and the
//! steps of a lookup at the snapshot's sequence, through the runs that
//! hold only versions newer than it (each a step that found nothing
//! visible) down to the run whose version the snapshot sees. Tables in
//! L0 and below, a tombstone and a newer value above the snapshot's
//! version, and after the store closes, `Error::Closed`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{
    BlockSource, Db, Error, FilterVerdict, Options, TraceResult, TraceSource, TraceStep,
};
use common::scratch_dir;

fn options() -> Options {
    Options {
        background_work: false,
        ..Options::default()
    }
}

fn table_step(
    step: &TraceStep,
) -> (
    usize,
    Option<FilterVerdict>,
    Option<BlockSource>,
    TraceResult,
) {
    match step.source {
        TraceSource::Table { level, .. } => (level, step.filter, step.block, step.result.clone()),
        ref other => panic!("not a table: {other:?}"),
    }
}

#[test]
fn a_snapshot_trace_walks_past_newer_versions_to_the_one_it_sees() {
    // One table file open: the snapshot's table reads reopen the files the
    // set closed, and trace the same steps.
    for max_open_files in [None, Some(1)] {
        trace_walks_past_newer_versions(max_open_files);
    }
}

fn trace_walks_past_newer_versions(max_open_files: Option<usize>) {
    let dir = scratch_dir();
    let options = Options {
        max_open_files,
        ..options()
    };
    let db = Db::open(dir.path(), options).unwrap();
    db.put(b"k", b"old").unwrap();
    db.put(b"other", b"x").unwrap();
    db.flush().unwrap();
    let snapshot = db.snapshot();
    db.put(b"k", b"new").unwrap();
    db.flush().unwrap();
    db.delete(b"k").unwrap();

    // Now: the tombstone in the memtable ends the lookup.
    let (now, trace) = db.get_traced(b"k").unwrap();
    assert_eq!(now, None);
    assert_eq!(trace.steps.len(), 1);
    assert_eq!(trace.steps[0].source, TraceSource::Memtable);
    assert_eq!(trace.steps[0].result, TraceResult::Deleted);

    // At the snapshot: the memtable's tombstone and the newer table's
    // value are invisible; the older table's value is the answer.
    let (then, trace) = snapshot.get_traced(b"k").unwrap();
    assert_eq!(then, snapshot.get(b"k").unwrap());
    assert_eq!(then, Some(b"old".to_vec()));
    assert_eq!(trace.snapshot_seq, snapshot.sequence());
    assert_eq!(trace.steps.len(), 3, "{trace:?}");
    assert_eq!(trace.steps[0].source, TraceSource::Memtable);
    assert_eq!(trace.steps[0].result, TraceResult::Missing);
    let newer = table_step(&trace.steps[1]);
    let older = table_step(&trace.steps[2]);
    assert_eq!(newer.1, Some(FilterVerdict::TruePositive), "{trace:?}");
    assert!(
        newer.2.is_some(),
        "the newer table's block is read: {trace:?}"
    );
    assert_eq!(newer.3, TraceResult::Missing);
    assert_eq!(older.3, TraceResult::Value);
    let (TraceSource::Table { number: n1, .. }, TraceSource::Table { number: n0, .. }) =
        (&trace.steps[1].source, &trace.steps[2].source)
    else {
        unreachable!()
    };
    assert!(n1 > n0, "newest table first: {trace:?}");

    // A key in the older table's range that no write stored: its filter
    // is asked (the newer table holds only "k": out of its range).
    let (absent, trace) = snapshot.get_traced(b"m").unwrap();
    assert_eq!(absent, None);
    assert!(trace.steps.iter().all(|s| s.result == TraceResult::Missing));
    let filters: Vec<_> = trace.steps[1..].iter().map(|s| s.filter).collect();
    assert_eq!(filters.len(), 2, "{trace:?}");
    assert_eq!(filters[0], Some(FilterVerdict::NotAsked), "{trace:?}");
    assert!(
        matches!(
            filters[1],
            Some(FilterVerdict::Negative | FilterVerdict::FalsePositive)
        ),
        "{trace:?}"
    );

    db.close().unwrap();
    assert!(matches!(snapshot.get_traced(b"k"), Err(Error::Closed)));
}

/// An empty key (which no write stores) is answered `None` before the
/// lookup starts, so the trace never hears the sequence: its
/// `snapshot_seq` must still be the snapshot's, as documented ("the
/// snapshot sequence the lookup read at"), not 0.
#[test]
fn an_empty_key_trace_still_names_the_snapshot_sequence() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"k", b"v").unwrap();
    let snapshot = db.snapshot();
    assert!(snapshot.sequence() > 0);
    let (value, trace) = snapshot.get_traced(b"").unwrap();
    assert_eq!(value, None);
    assert_eq!(
        trace.snapshot_seq,
        snapshot.sequence(),
        "the trace of an empty key: {trace:?}"
    );
    drop(snapshot);
    db.close().unwrap();
}

/// A snapshot of a store that was closed and opened again reads nothing
/// of the new open: `Error::Closed`, traced or not.
#[test]
fn a_snapshot_from_before_a_reopen_is_closed() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"k", b"v").unwrap();
    let snapshot = db.snapshot();
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"k", b"w").unwrap();
    assert!(matches!(snapshot.get_traced(b"k"), Err(Error::Closed)));
    assert!(matches!(snapshot.get(b"k"), Err(Error::Closed)));
    drop(snapshot);
    db.close().unwrap();
}
