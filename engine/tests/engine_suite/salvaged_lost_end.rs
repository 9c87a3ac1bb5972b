//! Review28, through the store: a cleanly closed `SyncMode::Never` store
//! whose WAL's closing header rewrite tore inside its sector (either
//! half of the closed header kept) and whose last page a device lost at
//! a record boundary, the close marker and the last write with it. The
//! default opens refuse it (a damaged header); `PointInTime` keeps every
//! write before the loss and reports the lost end as it does under the
//! intact closed header (`Stats::wal_replay_cut` at the WAL's end, and
//! the WAL in `Stats::wal_headers_salvaged`). Failed before
//! `wal::header::torn_from_closed`: no cut reported, the last write
//! dropped silently.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options, SyncMode, WalRecovery};

#[test]
fn a_torn_closed_header_s_lost_end_is_reported_at_a_point_in_time() {
    let never = Options {
        sync: SyncMode::Never,
        ..Options::default()
    };
    let dir = common::scratch_dir();
    let db = Db::open(dir.path(), never.clone()).unwrap();
    for i in 0..10 {
        db.put(&common::key(i), &common::value(i)).unwrap();
    }
    db.close().unwrap();
    let wal = common::newest_wal(dir.path());
    let sealed = std::fs::read(&wal).unwrap();
    let last_write = common::wal_record_offset(&sealed, 9);
    // The header before the seal (flags 0), whose checksum or flags the
    // torn rewrite kept.
    let mut old = sealed[..24].to_vec();
    common::set_wal_flags(&mut old, 0);
    for kept in [20..24, 10..12] {
        let mut bytes = sealed[..last_write].to_vec();
        bytes[kept.clone()].copy_from_slice(&old[kept.clone()]);
        std::fs::write(&wal, &bytes).unwrap();
        for read_only in [true, false] {
            let opened = common::open_either(dir.path(), never.clone(), read_only);
            assert!(opened.is_err_and(|e| e.is_corruption()), "{kept:?}");
        }
        let pit = Options {
            wal_recovery: WalRecovery::PointInTime,
            ..never.clone()
        };
        let db = Db::open_read_only(dir.path(), pit).unwrap();
        assert_eq!(common::contents(&db).len(), 9, "{kept:?}");
        let stats = db.stats();
        assert_eq!(stats.wal_headers_salvaged, vec![wal.clone()]);
        assert_eq!(
            stats
                .wal_replay_cut
                .map(|c| (c.path, c.offset, c.bytes_not_replayed)),
            Some((wal.clone(), last_write as u64, 0)),
            "{kept:?}: the lost end not reported"
        );
    }
}
