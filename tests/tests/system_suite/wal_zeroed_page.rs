//! A synced WAL with one 4 KiB page reading as zeros (a write the device
//! lost, or a range the file system lost): no power loss does that to
//! fsynced bytes, so it is damage, and records lie intact after it. The
//! open must refuse it as corruption or recover every synced write; it
//! must never open without the writes after the page.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::crash_workload::small_table_options;
use bloomlsm_tests::{apply_history_write, history_prefix, scratch_dir};

const WRITES: u64 = 300;

#[test]
fn a_zeroed_page_of_a_synced_wal_is_refused_or_recovered() {
    // One WAL of about 17 KiB (5 pages): every write synced, no flush.
    let options = Options {
        sync: SyncMode::Always,
        memtable_bytes: 64 << 10,
        ..small_table_options()
    };
    let source = scratch_dir();
    let db = Db::open_with_fs(source.path(), options.clone(), Arc::new(FaultFs::new())).unwrap();
    for i in 0..WRITES {
        apply_history_write(&db, i).unwrap();
    }
    drop(db);
    let wal = source.path().join("000002.wal");
    let bytes = std::fs::read(&wal).unwrap();
    let mut lost = Vec::new();
    // Every page but the last: intact records follow each.
    for (page, range) in (0..bytes.len() - 4096).step_by(4096).enumerate() {
        let dir = scratch_dir();
        for entry in std::fs::read_dir(source.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        let mut damaged = bytes.clone();
        let end = (range + 4096).min(bytes.len());
        damaged[range..end].fill(0);
        std::fs::write(dir.path().join("000002.wal"), &damaged).unwrap();
        match Db::open(dir.path(), options.clone()) {
            Err(e) => assert!(e.is_corruption(), "page {page}: {e}"),
            Ok(db) => {
                let r = history_prefix(&db, WRITES).unwrap();
                if r < WRITES {
                    lost.push(format!(
                        "page {page} zeroed: opened with {r} of {WRITES} synced writes"
                    ));
                }
            }
        }
    }
    assert!(
        lost.is_empty(),
        "a {} byte synced WAL: {lost:#?}",
        bytes.len()
    );
}
