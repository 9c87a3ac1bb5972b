//! Failed reads while a store opens with unflushed writes in its WAL: of
//! the manifest and the WALs (`read_all`), of table files (their opens,
//! footers, indexes and filters), at every read-open and at about 60
//! evenly spaced positioned reads. The open fails with the `EIO`, naming a
//! file of the store, or it opens and answers right (a later read may
//! fail the same way); once the faults stop, the store opens (read-write
//! or read-only) with every write, and nothing the failed opens did cost
//! one.

use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, ReadFault};
use bloomlsm::{CorruptFilterPolicy, Db, Error, FilterPolicy, Options};

use super::harness::{Case, EIO, Shape, options};
use crate::common::{Model, short_key};

/// A failed open's error: the injected `EIO`, on a file of the store.
fn is_open_read_error(e: &Error, dir: &std::path::Path) -> bool {
    let path = match e {
        Error::Io { path, .. } | Error::Table(bloomlsm::sstable::Error::Io { path, .. }) => path,
        _ => return false,
    };
    e.raw_os_error() == Some(EIO) && path.starts_with(dir)
}

/// Every key answers the model's value, or (while faults are armed) a
/// read error. Returns the reads that failed.
fn check(db: &Db, model: &Model, strict: bool, ctx: &str) -> u64 {
    let mut failed = 0;
    for k in 0..600 {
        let key = short_key(k);
        match db.get(&key) {
            Ok(v) => assert!(v.as_ref() == model.get(&key), "{ctx}: key {k}"),
            Err(e) => {
                assert!(
                    !strict && super::harness::is_read_error(&e),
                    "{ctx}: key {k}: {e}"
                );
                failed += 1;
            }
        }
    }
    failed
}

fn open(
    case_options: &Options,
    read_only: bool,
    dir: &std::path::Path,
    fs: &FaultFs,
) -> bloomlsm::Result<Db> {
    let fs = Arc::new(fs.clone());
    if read_only {
        Db::open_read_only_with_fs(dir, case_options.clone(), fs)
    } else {
        Db::open_with_fs(dir, case_options.clone(), fs)
    }
}

/// Bytes of a WAL that holds no record (its header).
const WAL_HEADER: u64 = 16;

/// Bytes of the store's WALs.
fn wal_bytes(dir: &std::path::Path) -> u64 {
    crate::common::listing(dir)
        .iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| std::fs::metadata(dir.join(n)).unwrap().len())
        .sum()
}

/// Puts the store's files back as `saved` holds them. A read-write open
/// flushes the replayed writes into a table and empties the WAL; each
/// open under a fault starts again from the closed store, with the
/// writes still to replay (and the compaction the replay's table leads to).
fn restore(saved: &std::path::Path, dir: &std::path::Path) {
    for name in crate::common::listing(dir) {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    for name in crate::common::listing(saved) {
        std::fs::copy(saved.join(&name), dir.join(&name)).unwrap();
    }
}

/// Sweeps one fault over the opens and reads of a store's open.
fn sweep(shape: Shape, on_corrupt_filter: CorruptFilterPolicy, read_only: bool) {
    let Some(mut case) = Case::build(shape, "open") else {
        println!("{shape:?}: skipped, no direct reads here");
        return;
    };
    case.workload();
    // Unflushed writes stay in the WAL for the replay.
    case.write(40);
    case.db.take().unwrap().close().unwrap();
    let (fs, dir, model) = (
        case.fs.clone(),
        case.dir.path().to_path_buf(),
        case.model.clone(),
    );
    let saved = crate::common::scratch_dir();
    restore(&dir, saved.path());
    let case_options = Options {
        on_corrupt_filter,
        ..options(
            shape.max_open_files,
            shape.direct,
            FilterPolicy::Uniform { bits_per_key: 10.0 },
        )
    };
    let (opens0, reads0) = (fs.read_opens(), fs.reads());
    let db = open(&case_options, read_only, &dir, &fs).unwrap();
    let (opens, reads) = (fs.read_opens() - opens0, fs.reads() - reads0);
    check(&db, &model, true, "fault-free open");
    drop(db);
    restore(saved.path(), &dir);
    let (mut refused, mut opened, mut failed_reads, mut unusable) = (0, 0, 0, 0);
    let faults = (0..opens + 1).map(|k| (true, k)).chain(
        (0..reads + 1)
            .step_by(((reads + 1) / 60).max(1) as usize)
            .map(|k| (false, k)),
    );
    for (on_opens, k) in faults {
        let ctx = format!(
            "{shape:?} {on_corrupt_filter:?} read-only {read_only}: fault at open {on_opens} {k}"
        );
        // The open under the fault replays the unflushed writes.
        assert!(
            wal_bytes(&dir) > WAL_HEADER,
            "{ctx}: no write left to replay"
        );
        if on_opens {
            fs.fail_read_opens(ReadFault::Only(fs.read_opens() + k));
        } else {
            fs.fail_reads(ReadFault::Only(fs.reads() + k));
        }
        match open(&case_options, read_only, &dir, &fs) {
            Err(e) => {
                assert!(is_open_read_error(&e, &dir), "{ctx}: {e}");
                refused += 1;
            }
            Ok(db) => {
                opened += 1;
                failed_reads += check(&db, &model, false, &ctx);
                fs.heal();
                check(&db, &model, true, &format!("{ctx}, healed"));
                unusable += db.stats().total.tables_without_usable_filter;
                // The compaction the replay's table leads to may have
                // met the fault: it stops writes, losing nothing.
                let mut stopped = false;
                if !read_only && let Err(e) = db.wait_for_background_work() {
                    assert!(super::harness::is_job_error(&e), "{ctx}: wait: {e}");
                    stopped = true;
                }
                match db.close() {
                    Ok(()) => assert!(!stopped, "{ctx}: writes stopped, the close succeeded"),
                    Err(e) => assert!(
                        stopped && super::harness::is_job_error(&e),
                        "{ctx}: close: {e}"
                    ),
                }
            }
        }
        fs.heal();
        let db =
            open(&case_options, false, &dir, &fs).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        check(&db, &model, true, &format!("{ctx}, reopened"));
        db.close().unwrap();
        restore(saved.path(), &dir);
    }
    println!(
        "{shape:?} {on_corrupt_filter:?} read-only {read_only}: {opens} opens, {reads} reads; \
         {refused} opens refused, {opened} opened ({failed_reads} gets failed, \
         {unusable} tables opened without a usable filter)"
    );
}

#[test]
fn a_failed_read_while_opening_fails_the_open_or_answers_right() {
    for (seed, max_open_files, policy) in [
        (31, None, CorruptFilterPolicy::Ignore),
        (32, Some(1), CorruptFilterPolicy::Fail),
        (33, Some(2), CorruptFilterPolicy::Rebuild),
    ] {
        let shape = Shape {
            max_open_files,
            direct: false,
            seed,
        };
        sweep(shape, policy, false);
    }
}

#[test]
fn a_failed_read_while_opening_read_only_fails_the_open_or_answers_right() {
    for (seed, max_open_files) in [(34, None), (35, Some(1))] {
        let shape = Shape {
            max_open_files,
            direct: false,
            seed,
        };
        sweep(shape, CorruptFilterPolicy::Ignore, true);
    }
}

#[test]
fn a_failed_direct_read_while_opening_fails_the_open_or_answers_right() {
    let shape = Shape {
        max_open_files: Some(1),
        direct: true,
        seed: 36,
    };
    sweep(shape, CorruptFilterPolicy::Ignore, false);
}
