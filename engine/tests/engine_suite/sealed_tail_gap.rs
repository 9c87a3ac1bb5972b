//! Review rev6: a page zeroed on the device at the end of a cleanly
//! closed WAL (its last writes and the close marker) after the close
//! fsynced it. RELIABILITY row 5 and DESIGN "Opening" promise damage in a
//! cleanly closed store's WAL, its last write included, is an error; the
//! same bytes are what a power loss leaves of a `SyncMode::Always` WAL
//! whose last appends were not fsynced (a torn tail), and nothing past
//! the header tells the two apart: the close's seal says so in the header
//! (`CLOSED`, `engine/src/wal/header.rs`). Before that flag: both sync
//! modes opened with 176 of 200 writes and a `TornTail` cut.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options, SyncMode};

#[test]
fn a_zeroed_last_page_of_a_cleanly_closed_wal_is_refused() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        let dir = common::scratch_dir();
        let options = Options {
            sync,
            background_work: false,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..200 {
            db.put(&common::key(i), &common::value(i)).unwrap();
        }
        db.close().unwrap();
        let wal = common::newest_wal(dir.path());
        let mut bytes = std::fs::read(&wal).unwrap();
        let page = (bytes.len() - 1) / 4096 * 4096;
        bytes[page..].fill(0);
        std::fs::write(&wal, &bytes).unwrap();
        for read_only in [true, false] {
            match common::open_either(dir.path(), options.clone(), read_only) {
                Err(bloomlsm::Error::Corruption { path, offset, .. }) => {
                    assert_eq!(path, wal, "{sync:?}");
                    assert!(offset as usize <= page, "{sync:?}: at {offset}");
                }
                Err(e) => panic!("{sync:?}: {e}"),
                Ok(db) => panic!(
                    "{sync:?}: opened with {} of 200 writes, cut {:?}",
                    common::contents(&db).len(),
                    db.stats().wal_replay_cut
                ),
            }
        }
        // Point-in-time recovery keeps the writes before the damage.
        let pit = Options {
            wal_recovery: bloomlsm::WalRecovery::PointInTime,
            ..options
        };
        let db = Db::open_read_only(dir.path(), pit).unwrap();
        assert!(db.stats().wal_replay_cut.is_some(), "{sync:?}");
        assert!(common::contents(&db).len() < 200, "{sync:?}");
    }
}
