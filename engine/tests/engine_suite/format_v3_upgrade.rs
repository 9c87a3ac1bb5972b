//! Review rev8: a store format version 3 store (a close marker, no
//! `CLOSED` header flag: closed cleanly by a build from before the flag)
//! opens as it is with this build, read-only and read-write; its marker
//! still makes its WAL strict; its first read-write open writes version 4
//! and the close flags its new WAL.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options, SyncMode};

/// The header flags of a WAL (`engine/src/wal/header.rs`: bit 0 `SYNCED`,
/// bit 1 `CLOSED`).
fn flags(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[10], bytes[11]])
}

#[test]
fn a_version_3_store_opens_strictly_and_is_upgraded() {
    for sync in [SyncMode::Never, SyncMode::Always] {
        let dir = common::scratch_dir();
        let options = Options {
            sync,
            background_work: false,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..30 {
            db.put(&common::key(i), &common::value(i)).unwrap();
        }
        db.close().unwrap();
        // Made version 3: the manifest says so; the WAL keeps its marker,
        // its header says "synced" without `CLOSED`.
        let mut manifest = common::read_manifest(dir.path());
        manifest.version = 3;
        common::write_manifest(dir.path(), &manifest);
        let wal = common::newest_wal(dir.path());
        let mut v3 = std::fs::read(&wal).unwrap();
        assert_eq!(flags(&v3), 3, "{sync:?}: SYNCED | CLOSED");
        common::as_if_never_closed(&mut v3);
        // The marker vouches: a bit flipped in the last write is refused.
        let marker = common::close_marker_offset(&v3);
        let mut flipped = v3.clone();
        flipped[marker - 3] ^= 0x08;
        std::fs::write(&wal, &flipped).unwrap();
        for read_only in [true, false] {
            let opened = common::open_either(dir.path(), options.clone(), read_only);
            assert!(opened.is_err_and(|e| e.is_corruption()), "{sync:?}");
        }
        std::fs::write(&wal, &v3).unwrap();
        let ro = Db::open_read_only(dir.path(), options.clone()).unwrap();
        assert_eq!(common::contents(&ro).len(), 30, "{sync:?}");
        assert_eq!(ro.stats().wal_replay_cut, None);
        ro.close().unwrap();
        assert_eq!(common::read_manifest(dir.path()).version, 3);
        let db = Db::open(dir.path(), options.clone()).unwrap();
        assert_eq!(common::contents(&db).len(), 30, "{sync:?}");
        db.put(b"after", b"upgrade").unwrap();
        db.close().unwrap();
        assert_eq!(
            common::read_manifest(dir.path()).version,
            bloomlsm::STORE_FORMAT_VERSION
        );
        let newest = std::fs::read(common::newest_wal(dir.path())).unwrap();
        assert_eq!(flags(&newest), 3, "{sync:?}: the new WAL is closed");
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(common::contents(&db).len(), 31, "{sync:?}");
    }
}
