//! `Options::max_open_files` bounds the table files a store holds open.
//! Under a descriptor limit (`RLIMIT_NOFILE`) far below its table count, a
//! store of narrow tables with the bound takes writes, deletes, filter
//! rebuilds, snapshots and iterators held across background compactions,
//! and a reopen, and answers every read as a `BTreeMap` does, with never
//! more table descriptors open than the bound allows (without the bound
//! the same store stops writes with `EMFILE`: `open_files_limit.rs`).
//!
//! One test in its own binary: it lowers the limit of the whole process.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use bloomlsm::{Db, FilterPolicy, Options};

use common::bounded_files::{bounded_options, key, value};
use common::held_iter::HeldIter;
use common::{Rng, disk_dir, scratch_dir};

const MAX_OPEN: usize = 6;
/// Descriptors the process may open beyond those open when the test starts.
const HEADROOM: u64 = 48;
const KEYS: u64 = 5_000;
const OPS: u64 = 9_000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Narrow tables, a tiny block cache (reads go to the files), the bound.
fn options(direct: bool) -> Options {
    Options {
        use_direct_reads: direct,
        ..bounded_options(MAX_OPEN)
    }
}

/// Descriptors this process has open on table files of `dir`.
fn table_descriptors(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(dir) && t.to_string_lossy().contains(".sst"))
        .count()
}

/// Table descriptors allowed while the background threads (one flushing,
/// one compacting) work: the bound's files (two descriptors each with
/// direct reads), a file each thread's read in flight may still hold
/// after the set let go of it, and the table each is writing.
fn allowed(direct: bool) -> usize {
    let per_file = if direct { 2 } else { 1 };
    (MAX_OPEN + 2) * per_file + 2
}

fn lower_descriptor_limit() {
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    // SAFETY: rlimit is plain old data; getrlimit fills it.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `limit` is a valid rlimit the call writes.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0);
    limit.rlim_cur = (open + HEADROOM).min(limit.rlim_max);
    // SAFETY: `limit` is a valid rlimit the call reads.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

fn check_gets(db: &Db, model: &Model, rng: &mut Rng, what: &str) {
    for _ in 0..150 {
        let i = rng.below(KEYS + 200);
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap().as_ref(),
            model.get(&k),
            "{what}: key {i}"
        );
    }
}

fn check_all(db: &Db, model: &Model, what: &str) {
    let got: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(&got == model, "{what}: scan differs");
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{what}");
    }
}

fn run(dir: &Path, direct: bool) {
    let what = if direct { "direct" } else { "buffered" };
    let mut rng = Rng(if direct { 7 } else { 3 });
    let mut model = Model::new();
    let db = Db::open(dir, options(direct)).unwrap();
    let mut snapshot = (db.snapshot(), model.clone());
    let mut held = HeldIter::new(db.scan::<&[u8], _>(..).unwrap(), Vec::new(), "iter".into());
    let mut policies = [
        FilterPolicy::Uniform { bits_per_key: 6.0 },
        FilterPolicy::Optimized { bits_per_key: 10.0 },
        FilterPolicy::Uniform { bits_per_key: 12.0 },
    ]
    .into_iter()
    .cycle();
    for op in 0..OPS {
        let i = rng.below(KEYS);
        if rng.below(4) == 0 {
            db.delete(&key(i)).unwrap();
            model.remove(&key(i));
        } else {
            db.put(&key(i), &value(i, op)).unwrap();
            model.insert(key(i), value(i, op));
        }
        if op % 300 == 299 {
            let ctx = format!("{what}, op {op}");
            check_gets(&db, &model, &mut rng, &ctx);
            for _ in 0..40 {
                let k = key(rng.below(KEYS));
                assert_eq!(
                    snapshot.0.get(&k).unwrap().as_ref(),
                    snapshot.1.get(&k),
                    "{ctx}"
                );
            }
            held.read(40, &ctx);
            let open = table_descriptors(dir);
            assert!(open <= allowed(direct), "{ctx}: {open} table descriptors");
            let stats = db.stats();
            assert!(stats.open_table_files.unwrap() <= MAX_OPEN as u64, "{ctx}");
        }
        if op % 2_000 == 1_999 {
            // The old snapshot and iterator, read to their ends across
            // every compaction since they were taken, make way for new ones.
            let ctx = format!("{what}, op {op}");
            let (old, old_model) = &snapshot;
            let got: Model = old
                .scan::<&[u8], _>(..)
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(&got == old_model, "{ctx}: snapshot scan differs");
            while !held.read(1_000, &ctx) {}
            db.rebuild_filters(policies.next().unwrap()).unwrap();
            snapshot = (db.snapshot(), model.clone());
            let want = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            held = HeldIter::new(db.scan::<&[u8], _>(..).unwrap(), want, "iter".into());
        }
    }
    drop(held);
    drop(snapshot);
    db.wait_for_background_work().unwrap();
    // Nothing in flight: the set's files alone.
    let per_file = if direct { 2 } else { 1 };
    assert!(
        table_descriptors(dir) <= MAX_OPEN * per_file,
        "{what}: settled"
    );
    check_all(&db, &model, what);
    let stats = db.stats();
    let tables = stats.total.tables;
    // Without the bound each table would hold a descriptor: far past the
    // limit this process runs under.
    assert!(tables > HEADROOM + 20, "{what}: only {tables} tables");
    assert!(
        stats.table_file_opens > tables,
        "{what}: {} opens of {tables} tables: the bound never closed a file",
        stats.table_file_opens
    );
    assert!(table_descriptors(dir) <= MAX_OPEN * per_file, "{what}");
    db.close().unwrap();
    assert_eq!(table_descriptors(dir), 0, "{what}: open after the close");

    let db = Db::open(dir, options(direct)).unwrap();
    assert!(table_descriptors(dir) <= allowed(direct), "{what}: reopen");
    check_all(&db, &model, &format!("{what}, reopened"));
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}

#[test]
fn a_store_far_past_its_descriptor_limit_answers_right_within_the_bound() {
    lower_descriptor_limit();
    let dir = scratch_dir();
    run(dir.path(), false);
    if let Some(dir) = disk_dir() {
        run(dir.path(), true);
    }
}
