//! Power loss while damaged filters are repaired: a store whose tables'
//! filter blocks are all damaged is opened with
//! `CorruptFilterPolicy::Rebuild`, whose background work (inline here)
//! rebuilds each damaged filter, appended to its table's own file or in a
//! copy, and installs it; then more writes and a close. A crash at every
//! file-system operation of that session, under out-of-order pages and
//! seeded renames and revivals, then a power loss: the store must open
//! (reading around the filters still damaged) with a prefix of the history
//! holding every acknowledged write, a get of every scanned key must find
//! it and no deleted key may come back (a damaged or torn filter never
//! says absent for a present key), no orphan; and once a reopen under
//! `Rebuild` has settled, a strict open (`CorruptFilterPolicy::Fail`) must
//! find every filter usable and the same contents.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{CorruptFilterPolicy, Db, Options};
use bloomlsm_tests::crash_workload::synced_inline_options;
use bloomlsm_tests::rebuild_workload::table_sizes;
use bloomlsm_tests::{
    apply_history_write, close_with_no_orphan_table, contents, copy_store_dir, history_write,
    recovered_history, scratch_dir,
};

/// Writes before the damage.
const FIRST: u64 = 1_200;
/// Writes of the crashed session, after the repair.
const MORE: u64 = 30;

/// Tables of a few KiB, whose filter, properties and footer are a small
/// share: a repair appends the new filter to the table's own file (a copy
/// only once the bytes an append leaves unused pass an eighth).
fn options(on_corrupt_filter: CorruptFilterPolicy) -> Options {
    Options {
        on_corrupt_filter,
        memtable_bytes: 12 << 10,
        l1_bytes: 12 << 10,
        level_size_ratio: 4,
        target_file_bytes: 4 << 10,
        ..synced_inline_options()
    }
}

/// A store holding writes `0..FIRST` with every table's filter block damaged.
fn damaged_store() -> tempfile::TempDir {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(CorruptFilterPolicy::Ignore)).unwrap();
    for i in 0..FIRST {
        apply_history_write(&db, i).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let mut damaged = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "sst") {
            continue;
        }
        let filter = bloomlsm_sstable::Table::open_path(&path, 0, None)
            .unwrap()
            .footer()
            .filter;
        if filter.size == 0 {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        for at in (filter.offset..filter.offset + filter.size).step_by(7) {
            bytes[at as usize] ^= 0x5a;
        }
        std::fs::write(&path, bytes).unwrap();
        damaged += 1;
    }
    assert!(damaged >= 4, "{damaged} tables damaged");
    dir
}

/// The session: open under `Rebuild`, settle (every damaged filter
/// rebuilt), `MORE` writes, close. Returns the writes acknowledged and
/// the filters left damaged when settled.
fn session(dir: &Path, fs: &FaultFs) -> (u64, Option<u64>) {
    let Ok(db) = Db::open_with_fs(
        dir,
        options(CorruptFilterPolicy::Rebuild),
        Arc::new(fs.clone()),
    ) else {
        return (FIRST, None);
    };
    if db.wait_for_background_work().is_err() {
        return (FIRST, None);
    }
    let left = db.stats().total.tables_without_usable_filter;
    for i in FIRST..FIRST + MORE {
        if apply_history_write(&db, i).is_err() {
            return (i, Some(left));
        }
    }
    let _ = db.close();
    (FIRST + MORE, Some(left))
}

/// Every key the scan shows is found by a get, and every key the first
/// `recovered` writes deleted is absent.
fn gets_agree(db: &Db, recovered: u64, what: &str) {
    for (k, v) in contents(db) {
        assert_eq!(
            db.get(&k).unwrap(),
            Some(v),
            "{what}: get misses a scanned key"
        );
    }
    for i in 0..recovered {
        if let (k, None) = history_write(i) {
            assert_eq!(db.get(&k).unwrap(), None, "{what}: a deleted key is back");
        }
    }
}

#[test]
fn a_power_loss_at_any_operation_of_a_filter_repair_loses_nothing() {
    let damaged = damaged_store();
    let (total, appended, tables) = {
        let dir = copy_store_dir(damaged.path());
        let before = table_sizes(dir.path());
        let fs = FaultFs::new();
        let (acked, left) = session(dir.path(), &fs);
        assert_eq!((acked, left), (FIRST + MORE, Some(0)), "the clean session");
        let after = table_sizes(dir.path());
        let appended = before
            .iter()
            .filter(|(name, size)| after.get(*name).is_some_and(|s| s > size))
            .count();
        assert!(
            appended * 2 >= before.len(),
            "{appended} of {} tables repaired in place",
            before.len()
        );
        (fs.ops(), appended, before.len())
    };
    for crash_at in 0..total {
        let dir = copy_store_dir(damaged.path());
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(crash_at));
        fs.set_rename_fate(RenameFate::Seeded(crash_at));
        fs.set_revival(Revival::Seeded(crash_at + 1));
        fs.fail_from_op(crash_at);
        let (acked, _) = session(dir.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let what = format!("crash at {crash_at} of {total}, {acked} writes acknowledged");
        let db = Db::open(dir.path(), options(CorruptFilterPolicy::Ignore))
            .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        let recovered = recovered_history(&db, FIRST + MORE);
        assert!(
            (acked..=acked + 1).contains(&recovered),
            "{what}: {recovered} recovered"
        );
        gets_agree(&db, recovered, &what);
        let got = contents(&db);
        close_with_no_orphan_table(db, dir.path(), &what);
        // Repaired by a reopen, then strict.
        let db = Db::open(dir.path(), options(CorruptFilterPolicy::Rebuild)).unwrap();
        db.wait_for_background_work()
            .unwrap_or_else(|e| panic!("{what}: repair after the reopen: {e}"));
        db.close().unwrap();
        let db = Db::open(dir.path(), options(CorruptFilterPolicy::Fail))
            .unwrap_or_else(|e| panic!("{what}: strict open after the repair: {e}"));
        assert_eq!(db.stats().total.tables_without_usable_filter, 0, "{what}");
        assert_eq!(contents(&db), got, "{what}: after the repair");
        gets_agree(&db, recovered, &what);
    }
    println!(
        "{total} crash points of a repair of {tables} damaged filters ({appended} appended in \
         place) and the writes after it: nothing lost"
    );
}
