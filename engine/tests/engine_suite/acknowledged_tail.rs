//! The end of a synced WAL that the manifest proves was acknowledged.
//!
//! Under `SyncMode::Always` a write is visible only once its record is
//! fsynced, and every install records the last visible sequence in the
//! manifest. A crash mid-append tears only a write that was never
//! visible, past that sequence. So a synced WAL whose records end (cut or
//! zeroed, as a device that lost its last sector leaves it) before the
//! manifest's last sequence lost fsynced, acknowledged writes: corruption,
//! which the open must refuse, never a torn tail it drops (here the lost
//! writes were an overwrite and a delete: dropping them brings back the
//! older value and the deleted key).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, FilterPolicy, Options, SyncMode};

use crate::common;

/// How the device left the WAL's last record.
#[derive(Clone, Copy, Debug)]
enum Tail {
    /// Cut inside it.
    Cut,
    /// Read back as zeros from inside it to the end.
    Zeroed,
}

#[test]
fn a_synced_wal_ending_before_the_manifests_last_sequence_is_refused() {
    for tail in [Tail::Cut, Tail::Zeroed] {
        let dir = common::scratch_dir();
        let opts = Options {
            sync: SyncMode::Always,
            ..common::narrow_tree::narrow_tree_options()
        };
        let fs = FaultFs::new();
        let db = Db::open_with_fs(dir.path(), opts.clone(), Arc::new(fs.clone())).unwrap();
        // A deep tree with deletes, every write synced.
        for i in 0..400 {
            db.put(&common::key(i % 150), &common::value(i)).unwrap();
            if i % 3 == 0 {
                db.delete(&common::key((i * 7) % 150)).unwrap();
            }
        }
        db.put(&common::key(1), b"old").unwrap();
        let held = db.snapshot();
        db.flush().unwrap();
        // The last two writes stay in the active memtable and its WAL.
        db.put(&common::key(0), b"new").unwrap();
        db.delete(&common::key(1)).unwrap();
        // An install after them: the manifest records them as visible.
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 4.0 })
            .unwrap();
        let last = db.last_sequence();
        assert_eq!(common::read_manifest(dir.path()).counters[1], last);
        drop(held);
        // A crash (no close marker, no sealed header)...
        common::close_unsealed(db, &fs);
        // ... and a device that lost the WAL's last sector: the delete.
        let wal = common::newest_wal(dir.path());
        let mut bytes = std::fs::read(&wal).unwrap();
        let delete_at = common::wal_record_offset(&bytes, 1);
        assert_eq!(common::wal_record_offset(&bytes, 2), bytes.len());
        match tail {
            Tail::Cut => bytes.truncate(delete_at + 10),
            Tail::Zeroed => bytes[delete_at + 10..].fill(0),
        }
        std::fs::write(&wal, &bytes).unwrap();
        match Db::open(dir.path(), opts) {
            Err(e) => assert!(
                matches!(
                    &e,
                    bloomlsm::Error::Corruption {
                        reason: bloomlsm::Damage::Wal(bloomlsm::WalDamage::AcknowledgedLost {
                            expected,
                            last: l,
                        }),
                        ..
                    } if *expected == last && *l == last
                ),
                "{tail:?}: {e}"
            ),
            Ok(db) => panic!(
                "{tail:?}: opened without the acknowledged delete of sequence {last}: \
                 key 1 reads {:?}",
                db.get(&common::key(1)).unwrap()
            ),
        }
    }
}
