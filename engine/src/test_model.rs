//! What the engine's model-checked unit tests share: a `BTreeMap` model
//! of the store, the writes that update both, reads checked against it,
//! and a bound on steps that must not hang.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::Db;
use crate::fs::names::{self, FileType};

/// What the store should hold: each live key's value.
pub(crate) type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// Pairs in key order, as a scan lists them.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;
/// A put (`Some(value)`) or a delete (`None`) of a key.
pub(crate) type Op = (Vec<u8>, Option<Vec<u8>>);

/// A generous bound on a step that must not hang (it takes well under a
/// second): past it the test reports a hang.
pub(crate) const HANG: Duration = Duration::from_secs(60);

/// Key number `k`, fixed width so that keys sort as their numbers.
pub(crate) fn key(k: u64) -> Vec<u8> {
    format!("key{k:06}").into_bytes()
}

/// Writes `op` to the store.
pub(crate) fn apply(db: &Db, op: &Op) -> crate::Result<()> {
    match &op.1 {
        Some(v) => db.put(&op.0, v),
        None => db.delete(&op.0),
    }
}

/// Writes `op` to the model (once the store acknowledged it).
pub(crate) fn record(model: &mut Model, op: Op) {
    match op.1 {
        Some(v) => model.insert(op.0, v),
        None => model.remove(&op.0),
    };
}

/// Runs `f` on another thread; a hang past `HANG` fails the test (a
/// panic in `f` fails it as that panic).
pub(crate) fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG) {
        Ok(t) => t,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(thread.join().expect_err("no result, no panic"))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("HANG: {what} did not return within {HANG:?}")
        }
    }
}

/// Every key of `0..keys` reads as `model` says, and a scan yields
/// exactly `model`.
pub(crate) fn reads_match(
    what: &str,
    keys: u64,
    get: impl Fn(&[u8]) -> crate::Result<Option<Vec<u8>>>,
    scan: crate::Result<crate::DbIter>,
    model: &Model,
) {
    for k in 0..keys {
        let k = key(k);
        assert_eq!(
            get(&k).unwrap().as_ref(),
            model.get(&k),
            "{what}: get {k:?}"
        );
    }
    let scanned: Entries = scan.unwrap().map(Result::unwrap).collect();
    let expected: Entries = model.clone().into_iter().collect();
    assert!(scanned == expected, "{what}: scan differs from the model");
}

/// Writes `n` ops from `next` to the store and, as each is acknowledged,
/// to `model`.
pub(crate) fn write_ops(db: &Db, model: &mut Model, n: usize, mut next: impl FnMut() -> Op) {
    for _ in 0..n {
        let op = next();
        apply(db, &op).unwrap();
        record(model, op);
    }
}

/// Tables of the store's view whose file is longer than the view records
/// (a filter rebuilt in place, not yet installed).
pub(crate) fn tables_grown_in_place(db: &Db, dir: &Path) -> usize {
    db.inner
        .current
        .load()
        .version
        .all_metas()
        .iter()
        .filter(|t| {
            let path = crate::fs::names::table(dir, t.number);
            std::fs::metadata(path).unwrap().len() > t.file_size
        })
        .count()
}

/// Table files in `dir` that are not among the view's tables.
/// REQUIRES: the store is open (a close empties the view).
pub(crate) fn stray_tables(inner: &crate::inner::DbInner, dir: &Path) -> Vec<String> {
    let live: HashSet<u64> = inner
        .current
        .load()
        .version
        .all_metas()
        .iter()
        .map(|t| t.number)
        .collect();
    let mut stray = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let FileType::Table(n) = names::parse(&name)
            && !live.contains(&n)
        {
            stray.push(name);
        }
    }
    stray
}

/// Every table file in `dir` is one of the view's tables.
pub(crate) fn only_live_tables_on_disk(what: &str, db: &Db, dir: &Path) {
    let stray = stray_tables(&db.inner, dir);
    assert!(stray.is_empty(), "{what}: {stray:?} are not live tables");
}
