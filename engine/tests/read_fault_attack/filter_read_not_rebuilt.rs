//! A filter block whose read failed at the open (`EIO`, or the
//! allocator's refusal, both `FilterLoadError::Read`) is not damage
//! (`CorruptFilterPolicy`'s documentation): under
//! `CorruptFilterPolicy::Rebuild` a later lookup retries the read, and
//! the background's damaged-filter rebuild must leave the table alone.
//! Rebuilding it rewrites the whole table for a transient failure, and
//! a failure of that rebuild (a full disk, or for a refused allocation
//! a filter as large as the one memory just refused) stops writes.

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

#[test]
fn a_failed_filter_read_is_not_rebuilt_as_damage() {
    let dir = crate::common::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    for i in (0..KEYS).step_by(2) {
        db.put(&short_key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();

    // A table's open reads footer, properties, index, then filter: the
    // fourth read of the store's open is the filter's, and fails once.
    let faults = fs.faults_injected();
    fs.fail_reads(ReadFault::Only(fs.reads() + 3));
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    fs.heal();
    assert_eq!(fs.faults_injected() - faults, 1, "the filter read failed");
    let before = db.stats();
    assert_eq!(before.total.tables_without_usable_filter, 1);

    // The damaged-filter check runs with the background work.
    db.wait_for_background_work().unwrap();
    let after = db.stats();
    assert_eq!(
        after.filters_built - before.filters_built,
        0,
        "a transient read failure was repaired as damage: the table was rewritten"
    );
    assert_eq!(after.bytes_written, before.bytes_written, "nothing written");
    assert_eq!(
        after.total.tables_without_usable_filter, 1,
        "not retried yet"
    );

    // The read is retried by a lookup, and the filter is back.
    for i in (0..KEYS).step_by(2) {
        assert_eq!(db.get(&short_key(i)).unwrap().as_deref(), Some(&b"v"[..]));
    }
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    db.close().unwrap();
}
