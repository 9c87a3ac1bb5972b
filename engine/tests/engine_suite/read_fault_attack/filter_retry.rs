//! A read of a table's filter block that fails (`EIO`) is transient, not
//! damage: under `CorruptFilterPolicy::Ignore` (the default) the table is
//! read without its filter only until a later lookup retries the read
//! and it succeeds; then the table answers absent keys from its filter
//! again and `Stats::tables_without_usable_filter` stops counting it.
//! While the read keeps failing, the retries are spaced out by lookups
//! (doubling, `bloomlsm_sstable` `table/filter_slot.rs`): a few for the
//! first lookups, never one per lookup, and every get answers right.
//!
//! The fault is injected at exactly the filter's read: a table's open
//! reads its footer, properties block, index block and filter block, in
//! that order, and nothing else reads a table file while a store opens.

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, ReadFault};
use bloomlsm::{Db, FilterPolicy, Options};

use crate::common::{pairs, short_key};

/// Keys of the table: the even numbers below this.
const KEYS: u64 = 1200;

fn options(block_cache_bytes: u64) -> Options {
    Options {
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        block_size: 256,
        block_cache_bytes,
        background_work: false,
        ..Options::default()
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i}").into_bytes()
}

/// A closed store of one table: the even keys below `KEYS` (many data
/// blocks). The odd keys between them are absent, within its range.
fn one_table(fs: &FaultFs, dir: &Path) {
    let db = Db::open_with_fs(dir, options(0), Arc::new(fs.clone())).unwrap();
    for i in (0..KEYS).step_by(2) {
        db.put(&short_key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
}

/// Opens the store with its table's filter read failing (the fourth read
/// of the open); the fault is then disarmed.
fn open_with_failed_filter_read(fs: &FaultFs, dir: &Path, options: Options) -> Db {
    let faults = fs.faults_injected();
    fs.fail_reads(ReadFault::Only(fs.reads() + 3));
    let db = Db::open_with_fs(dir, options, Arc::new(fs.clone())).unwrap();
    fs.heal();
    assert_eq!(fs.faults_injected() - faults, 1, "the filter read failed");
    let s = db.stats().total;
    assert_eq!(s.tables, 1);
    assert_eq!(s.tables_without_usable_filter, 1, "the table has no filter");
    assert_eq!(s.filter_bytes, 0);
    db
}

/// Before the retry, every absent get of a key in the table's range read
/// a data block and the table stayed filterless for as long as it was
/// open: 200 absent gets read 200 blocks. Now the first get retries the
/// read, and from then on the filter rules absent keys out.
#[test]
fn a_failed_filter_read_is_retried_by_a_later_get() {
    let dir = crate::common::scratch_dir();
    let fs = FaultFs::new();
    one_table(&fs, dir.path());
    // No block cache: every data block a get searches is read from the file.
    let db = open_with_failed_filter_read(&fs, dir.path(), options(0));
    let (before, reads) = (db.stats().total, fs.reads());
    for i in 0..200 {
        assert_eq!(db.get(&short_key(2 * i + 1)).unwrap(), None, "key {i}");
    }
    let after = db.stats().total;
    let blocks = after.data_blocks_read - before.data_blocks_read;
    println!("200 absent gets read {blocks} data blocks");
    // Ten bits per key: about 1% false positives, 2 of 200 expected.
    assert!(blocks <= 20, "{blocks} data blocks read by 200 absent gets");
    assert_eq!(after.tables_without_usable_filter, 0);
    assert_eq!(before.filter_read_retries, 0, "no lookup ran yet");
    assert_eq!(after.filter_read_retries, 1, "one retry, and it worked");
    assert!(after.filter_bytes > 0);
    assert_eq!(
        after.probes_without_filter - before.probes_without_filter,
        0,
        "the first get's retry loaded the filter before it probed"
    );
    assert_eq!(
        fs.reads() - reads,
        blocks + 1,
        "one retry read the filter block, the rest were the data blocks"
    );
    for i in (0..KEYS).step_by(2) {
        assert_eq!(db.get(&short_key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.close().unwrap();
}

/// Lookups a test makes against a filter read that keeps failing.
const LOOKUPS: u64 = 4096;

/// The read keeps failing: the data blocks are in the block cache (a scan
/// read them all, asking no filter), and every read of the file fails,
/// so the file reads seen are the filter's retries. At most one per
/// doubling of the lookups that found the filter missing (13 for 4,096),
/// and every get answers right from the cached blocks. Once the device
/// heals, a retry within as many lookups again loads the filter.
#[test]
fn a_filter_read_that_keeps_failing_is_retried_ever_more_rarely() {
    let dir = crate::common::scratch_dir();
    let fs = FaultFs::new();
    one_table(&fs, dir.path());
    let db = open_with_failed_filter_read(&fs, dir.path(), options(8 << 20));
    let all = pairs(db.scan::<&[u8], _>(..).unwrap());
    assert_eq!(all.len() as u64, KEYS / 2);
    fs.fail_reads(ReadFault::From(fs.reads()));
    let faults = fs.faults_injected();
    for n in 0..LOOKUPS {
        // Within the table's range (its largest key is KEYS - 2).
        let i = n % (KEYS - 1);
        let want = i.is_multiple_of(2).then(|| value(i));
        assert_eq!(db.get(&short_key(i)).unwrap(), want, "lookup {n}");
    }
    let retries = fs.faults_injected() - faults;
    let bound = u64::from(LOOKUPS.ilog2()) + 1;
    println!("{retries} retries in {LOOKUPS} lookups");
    assert!(
        (2..=bound).contains(&retries),
        "{retries} retries in {LOOKUPS} lookups (at most {bound})"
    );
    let s = db.stats().total;
    assert_eq!(s.tables_without_usable_filter, 1);
    assert_eq!(s.probes_without_filter, LOOKUPS);
    assert_eq!(s.filter_read_retries, retries, "each failed retry counted");
    // Healed: the retry due next (within as many lookups again) works.
    fs.heal();
    let mut lookups = 0;
    while db.stats().total.tables_without_usable_filter > 0 {
        assert!(lookups <= LOOKUPS, "not retried in {lookups} lookups");
        assert_eq!(db.get(&short_key(1)).unwrap(), None);
        lookups += 1;
    }
    for i in 0..KEYS {
        let want = i.is_multiple_of(2).then(|| value(i));
        assert_eq!(db.get(&short_key(i)).unwrap(), want, "key {i}");
    }
    let s = db.stats().total;
    assert!(s.filter_negatives > 0);
    assert_eq!(
        s.filter_read_retries,
        retries + 1,
        "and the one that worked"
    );
    db.close().unwrap();
}
