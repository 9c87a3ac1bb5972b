//! A filter block whose read failed at the open is not damage
//! (`CorruptFilterPolicy`): a later lookup retries the read. Under
//! `CorruptFilterPolicy::Rebuild` the background also rebuilds it when the
//! read failed with an I/O error (`EIO`: a bad sector under the filter
//! block heals, since the rebuild reads only the data blocks), but not
//! when the allocator refused the filter's memory (`OutOfMemory`): the
//! rebuild would need as much again, and its failure would stop writes.
//! Either way every key is found, and a lookup's retry restores a filter
//! left alone.

use std::io::ErrorKind;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, ReadFault};
use bloomlsm::{CorruptFilterPolicy, Db, FilterPolicy, Options};

use crate::common::short_key;

/// Keys of the table: the even numbers below this.
const KEYS: u64 = 400;

fn options() -> Options {
    Options {
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        block_size: 256,
        background_work: false,
        on_corrupt_filter: CorruptFilterPolicy::Rebuild,
        ..Options::default()
    }
}

/// A store of one table whose filter read fails once at the reopen with
/// an error of `kind` (`None`: `EIO`); then the background work runs.
/// Returns the store and the filters built by that work.
fn reopened_after_a_failed_filter_read(
    dir: &std::path::Path,
    kind: Option<ErrorKind>,
) -> (Db, u64) {
    let (db, built, _) = reopened_after_a_failed_filter_read_on(dir, kind);
    (db, built)
}

/// [`reopened_after_a_failed_filter_read`], with the store's file system.
fn reopened_after_a_failed_filter_read_on(
    dir: &std::path::Path,
    kind: Option<ErrorKind>,
) -> (Db, u64, FaultFs) {
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir, options(), Arc::new(fs.clone())).unwrap();
    for i in (0..KEYS).step_by(2) {
        db.put(&short_key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();

    // A table's open reads footer, properties, index, then filter: the
    // fourth read of the store's open is the filter's, and fails once.
    let faults = fs.faults_injected();
    let filter_read = ReadFault::Only(fs.reads() + 3);
    match kind {
        Some(kind) => fs.fail_reads_as(filter_read, kind),
        None => fs.fail_reads(filter_read),
    }
    let db = Db::open_with_fs(dir, options(), Arc::new(fs.clone())).unwrap();
    fs.heal();
    assert_eq!(fs.faults_injected() - faults, 1, "the filter read failed");
    let before = db.stats();
    assert_eq!(before.total.tables_without_usable_filter, 1);
    // The unusable-filter check runs with the background work.
    db.wait_for_background_work().unwrap();
    let built = db.stats().filters_built - before.filters_built;
    (db, built, fs)
}

fn every_key_found(db: &Db) {
    for i in 0..KEYS {
        let expected = (i % 2 == 0).then_some(&b"v"[..]);
        assert_eq!(db.get(&short_key(i)).unwrap().as_deref(), expected, "{i}");
    }
}

#[test]
fn a_filter_read_refused_memory_is_left_to_the_retry() {
    let dir = crate::common::scratch_dir();
    let (db, built) = reopened_after_a_failed_filter_read(dir.path(), Some(ErrorKind::OutOfMemory));
    assert_eq!(built, 0, "a refused allocation was rebuilt as damage");
    assert_eq!(
        db.stats().total.tables_without_usable_filter,
        1,
        "not retried yet"
    );
    // A lookup retries the read, and the filter is back.
    every_key_found(&db);
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    db.close().unwrap();
}

#[test]
fn a_filter_read_failed_with_eio_is_rebuilt() {
    let dir = crate::common::scratch_dir();
    let (db, built) = reopened_after_a_failed_filter_read(dir.path(), None);
    assert_eq!(built, 1, "the bad sector's filter was not rebuilt");
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    every_key_found(&db);
    db.close().unwrap();
    // The rebuilt filter is what a reopen loads.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    every_key_found(&db);
    db.close().unwrap();
}

/// The rule follows the latest failure, not the open's: a filter whose
/// read the allocator refused at the open, and whose lookup's retry then
/// failed with `EIO` (a bad sector under the block, which retries never
/// get past), is rebuilt as any filter whose read failed with `EIO`.
#[test]
fn a_retry_failed_with_eio_after_a_refusal_is_rebuilt() {
    let dir = crate::common::scratch_dir();
    let (db, built, fs) =
        reopened_after_a_failed_filter_read_on(dir.path(), Some(ErrorKind::OutOfMemory));
    assert_eq!(built, 0, "the refusal is left to the retry");
    // The first lookup retries the read (its first read), which fails.
    let faults = fs.faults_injected();
    fs.fail_reads(ReadFault::Only(fs.reads()));
    assert_eq!(db.get(&short_key(0)).unwrap().as_deref(), Some(&b"v"[..]));
    fs.heal();
    assert_eq!(fs.faults_injected() - faults, 1, "the retry's read failed");
    assert_eq!(db.stats().total.tables_without_usable_filter, 1);
    let before = db.stats().filters_built;
    db.wait_for_background_work().unwrap();
    assert_eq!(
        db.stats().filters_built - before,
        1,
        "a filter whose last read failed with EIO was not rebuilt"
    );
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    every_key_found(&db);
    db.close().unwrap();
}
