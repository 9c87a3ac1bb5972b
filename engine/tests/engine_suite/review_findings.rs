//! Findings of the review of the engine's correctness fixes: each test
//! broke one promise, in the shape a user reaches it, before its fix.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode, WalRecovery, WriteBatch};
use common::{WAL_RECORDS_START, listing, newest_wal, wal_record, wal_record_in};

/// Bytes that look random (xorshift), as compressed or encrypted values do.
fn random_bytes(n: usize, mut x: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// The WAL files of a store, oldest first.
fn wals(dir: &Path) -> Vec<std::path::PathBuf> {
    listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| dir.join(n))
        .collect()
}

/// Finding 1 (promise 4/8): a crash in the middle of appending one large
/// batch (a torn tail, nothing after it) makes the default-mode open fail
/// with "too much damage": the torn-tail search's checksum budget
/// (4 x file + 1 MiB) is far too small for random payload bytes, where about
/// 1 offset in 4G/len holds a plausible length, each costing `len` bytes.
#[test]
fn a_torn_tail_inside_a_large_random_batch_is_tolerated() {
    // Each record fsynced, so recovery searches past the damage.
    let dir = tempfile::tempdir().unwrap();
    let synced = Options {
        sync: SyncMode::Always,
        ..Options::default()
    };
    let db = Db::open(dir.path(), synced).unwrap();
    db.put(b"before", b"1").unwrap();
    let mut big = WriteBatch::new();
    big.put(b"big", &random_bytes(4 << 20, 0x9e37_79b9_7f4a_7c15));
    db.write(big).unwrap();
    db.close().unwrap();
    let wal = newest_wal(dir.path());
    let len = std::fs::metadata(&wal).unwrap().len();
    // The process died with half of the big record written.
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.truncate((len - (2 << 20)) as usize);
    common::as_if_never_closed(&mut bytes);
    std::fs::write(&wal, &bytes).unwrap();
    let db = Db::open(dir.path(), Options::default())
        .expect("a torn tail (nothing intact after it) must be tolerated");
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"big").unwrap(), None);
}

/// Two live WALs written with `sync`: the flush of the first fails
/// (writes stop), so both stay.
fn two_live_wals(dir: &Path, sync: SyncMode) -> (std::path::PathBuf, std::path::PathBuf) {
    let options = Options {
        background_work: false,
        sync,
        ..Options::default()
    };
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir, options, Arc::new(fs.clone())).unwrap();
    db.put(b"w1", b"1").unwrap();
    db.put(b"w2", b"2").unwrap();
    fs.set_refuse_table_files(true);
    db.flush().unwrap_err();
    drop(db);
    let w = wals(dir);
    assert_eq!(w.len(), 2, "{w:?}");
    (w[0].clone(), w[1].clone())
}

/// Finding 2 (promise 4): in `TolerateTornTail` mode a torn tail in an
/// older WAL is accepted when the newer WAL's FIRST record is damaged and
/// an intact record follows it: the newer WAL is checked with a
/// point-in-time replay, which stops at its first damage and finds "no
/// records". The intact write is silently dropped (and its WAL deleted).
#[test]
fn torn_tail_mode_refuses_an_intact_record_after_damage_in_a_newer_wal() {
    // Each record fsynced (in a WAL written without fsync such damage is
    // what a power loss leaves, and the log ends there).
    let dir = tempfile::tempdir().unwrap();
    let (older, newer) = two_live_wals(dir.path(), SyncMode::Always);
    // The older WAL: its last record torn (cut 3 bytes short).
    let bytes = std::fs::read(&older).unwrap();
    std::fs::write(&older, &bytes[..bytes.len() - 3]).unwrap();
    // The newer WAL: a damaged record, then an intact one.
    let mut newer_bytes = std::fs::read(&newer).unwrap()[..WAL_RECORDS_START].to_vec();
    let mut damaged = wal_record_in(&newer_bytes, 3, b"w3");
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let record = wal_record_in(&newer_bytes, 4, b"w4");
    newer_bytes.extend_from_slice(&damaged);
    newer_bytes.extend_from_slice(&record);
    std::fs::write(&newer, &newer_bytes).unwrap();
    let opened = Db::open(
        dir.path(),
        Options {
            background_work: false,
            ..Options::default()
        },
    );
    match opened {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(db) => panic!(
            "opened, dropping the intact write w4 (w4 = {:?}); files now {:?}",
            db.get(b"w4").unwrap(),
            listing(dir.path())
        ),
    }
}

/// Finding 3 (promise 4): the first replayed WAL record is not checked
/// against the tables: a checksummed record re-using a sequence number the
/// tables already hold is replayed. With the older version in L1 the
/// replayed one lands in L0 above it, so `get` answers the replayed value
/// until a compaction merges the two, after which it answers the older one:
/// the answer to one key changes with no write. (With L0 tables present
/// the open fails instead, with `Error::Internal`, not a corruption error
/// naming the WAL and offset.)
#[test]
fn a_wal_record_reusing_table_sequences_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..5u8 {
        db.put(&[b'a' + i], b"x").unwrap();
    }
    db.put(b"k", b"old").unwrap(); // seq 6
    db.compact().unwrap(); // everything in L1, seqs 1..=6
    db.close().unwrap();
    let wal = newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    assert_eq!(bytes.len(), WAL_RECORDS_START, "only the header");
    let record = wal_record_in(&bytes, 2, b"k"); // k = "v" at seq 2 < 6
    bytes.extend_from_slice(&record);
    std::fs::write(&wal, &bytes).unwrap();
    let opened = Db::open(dir.path(), options);
    let db = match opened {
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            return;
        }
        Ok(db) => db,
    };
    let before = db.get(b"k").unwrap();
    db.compact().unwrap();
    let after = db.get(b"k").unwrap();
    panic!(
        "a record at seq 2 below the tables' seq 6 was replayed: get(k) was {:?}, after a \
         compaction {:?}",
        before.map(String::from_utf8),
        after.map(String::from_utf8)
    );
}

/// Copies every file of `from` into `to` (a fresh directory).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Finding 4 (promise 8): a reopen that fails before its new manifest is
/// in place leaves files it created: the L0 table of the replayed writes
/// and `MANIFEST.tmp` (no undo covers them). Every failure point of a
/// reopen with writes to replay is tried, one transient fault each (so the
/// open's own clean-up works); whenever `MANIFEST` is unchanged by the
/// failed open, the directory must be exactly as before.
#[test]
fn a_failed_reopen_that_kept_the_old_manifest_leaves_no_file() {
    let base = tempfile::tempdir().unwrap();
    let template = base.path().join("template");
    {
        let db = Db::open(&template, Options::default()).unwrap();
        db.put(b"a", b"1").unwrap();
        db.flush().unwrap();
        db.put(b"b", b"2").unwrap(); // stays in the WAL: replayed at open
        db.close().unwrap();
    }
    let before = listing(&template);
    let manifest = std::fs::read(template.join("MANIFEST")).unwrap();
    // Count the mutating operations of a successful reopen.
    let probe = base.path().join("probe");
    copy_dir(&template, &probe);
    let fs = FaultFs::new();
    let o = Options {
        background_work: false,
        ..Options::default()
    };
    drop(Db::open_with_fs(&probe, o.clone(), Arc::new(fs.clone())).unwrap());
    let total = fs.ops();
    let mut left_behind = Vec::new();
    for n in 0..total {
        let dir = base.path().join(format!("case{n}"));
        copy_dir(&template, &dir);
        let fs = FaultFs::new();
        fs.fail_only_op(n);
        if Db::open_with_fs(&dir, o.clone(), Arc::new(fs)).is_ok() {
            continue;
        }
        if std::fs::read(dir.join("MANIFEST")).unwrap() == manifest && listing(&dir) != before {
            left_behind.push((n, listing(&dir)));
        }
    }
    assert!(
        left_behind.is_empty(),
        "before {before:?}; failed opens at these operations left: {left_behind:?}"
    );
}

/// Finding 5 (promise 6): in `SyncMode::Always`, a WAL fsync that fails
/// returns `Err` for the write, but its record is already in the file; the
/// `close` that follows fsyncs the same WAL, and the next open replays it.
/// As after any failed fsync, whether the record reached the device is
/// unknown: the documented promise is that the write is invisible, stops
/// writes, and comes back at most as the last write recovered.
#[test]
fn a_write_whose_wal_sync_failed_is_invisible_and_at_most_the_last_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        sync: SyncMode::Always,
        background_work: false,
        ..Options::default()
    };
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options.clone(), Arc::new(fs.clone())).unwrap();
    db.put(b"ok", b"1").unwrap();
    // The WAL write is operation `ops`, its fsync `ops + 1`: fail the fsync
    // only (the device recovers right after).
    let ops = fs.ops();
    fs.fail_from_op(ops + 1);
    let failed = db.put(b"failed", b"2");
    fs.heal();
    assert!(failed.is_err(), "the write must fail: {failed:?}");
    assert_eq!(db.get(b"failed").unwrap(), None, "not applied in memory");
    let after = db.put(b"after", b"3");
    assert!(
        matches!(after, Err(bloomlsm::Error::WritesStopped(_))),
        "{after:?}"
    );
    let closed = db.close();
    assert!(
        matches!(closed, Err(bloomlsm::Error::WritesStopped(_))),
        "{closed:?}"
    );
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"ok").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"after").unwrap(), None);
    let failed = db.get(b"failed").unwrap();
    assert!(
        failed.is_none() || failed == Some(b"2".to_vec()),
        "{failed:?}"
    );
    // The next write continues after whatever was recovered.
    db.put(b"next", b"4").unwrap();
    let seq = db.last_sequence();
    assert_eq!(seq, if failed.is_some() { 3 } else { 2 });
}

/// Point-in-time recovery ends at the first damage; the newer WALs are
/// then removed: check they are not replayed on a later open either.
#[test]
fn point_in_time_drops_newer_wals_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let (older, newer) = two_live_wals(dir.path(), SyncMode::Never);
    let bytes = std::fs::read(&older).unwrap();
    std::fs::write(&older, &bytes[..bytes.len() - 3]).unwrap();
    let mut newer_bytes = std::fs::read(&newer).unwrap()[..WAL_RECORDS_START].to_vec();
    let record = wal_record_in(&newer_bytes, 3, b"w3");
    newer_bytes.extend_from_slice(&record);
    std::fs::write(&newer, newer_bytes).unwrap();
    let pit = Options {
        wal_recovery: WalRecovery::PointInTime,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), pit.clone()).unwrap();
    assert_eq!(db.get(b"w3").unwrap(), None);
    db.put(b"after", b"x").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"w1").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"w2").unwrap(), None);
    assert_eq!(db.get(b"w3").unwrap(), None);
    assert_eq!(db.get(b"after").unwrap(), Some(b"x".to_vec()));
}

/// Finding 6 (promise 4, DESIGN "replay must produce a prefix of the
/// writes"): an older WAL that lost ALL its records (zero length: in
/// `SyncMode::Never` a power cut may write back the newer WAL's pages and
/// none of the older one's) leaves `next` unset, so the newer WAL's first
/// record is never checked for continuity: its writes come back alone,
/// past a hole, in both recovery modes. (The regression test for a gap
/// between WALs cuts the older one at a record boundary, never to zero.)
#[test]
fn a_wal_emptied_by_power_loss_is_a_hole_never_replayed_past() {
    let shapes = [
        (WalRecovery::TolerateTornTail, SyncMode::Never),
        (WalRecovery::TolerateTornTail, SyncMode::Always),
        (WalRecovery::PointInTime, SyncMode::Never),
    ];
    for (mode, sync) in shapes {
        let dir = tempfile::tempdir().unwrap();
        // w1, w2 (seq 1, 2) in `older`
        let (older, newer) = two_live_wals(dir.path(), sync);
        // Every record lost: the header alone stays (fsynced at creation).
        let header = std::fs::read(&older).unwrap()[..WAL_RECORDS_START].to_vec();
        std::fs::write(&older, &header).unwrap();
        let mut newer_bytes = std::fs::read(&newer).unwrap()[..WAL_RECORDS_START].to_vec();
        let record = wal_record_in(&newer_bytes, 3, b"w3");
        newer_bytes.extend_from_slice(&record);
        std::fs::write(&newer, newer_bytes).unwrap();
        let options = Options {
            wal_recovery: mode,
            background_work: false,
            ..Options::default()
        };
        match Db::open(dir.path(), options) {
            Err(e) => assert!(
                mode == WalRecovery::TolerateTornTail
                    && sync == SyncMode::Always
                    && e.is_corruption(),
                "{mode:?}, {sync:?}: {e}"
            ),
            Ok(db) => assert_eq!(
                (db.get(b"w1").unwrap(), db.get(b"w3").unwrap()),
                (None, None),
                "{mode:?}: the write at seq 3 came back without those at 1 and 2"
            ),
        }
    }
}

/// Finding 1b (promise 4/8): the torn-tail search accepts ANY checksummed
/// record after the damage as "intact", even one inside the torn record's
/// own payload. A value that holds WAL-record bytes (a store copied into
/// another, a replication log kept as values) torn after that inner record
/// makes a default-mode open fail as corruption (`BeforeIntact`), though
/// nothing intact follows the tear. Checking that the found record
/// continues the sequence would tell the two apart.
#[test]
fn a_record_inside_a_torn_value_does_not_make_the_tail_corruption() {
    // Each record fsynced, so recovery searches past the damage.
    let dir = tempfile::tempdir().unwrap();
    let synced = Options {
        sync: SyncMode::Always,
        ..Options::default()
    };
    let db = Db::open(dir.path(), synced).unwrap();
    db.put(b"before", b"1").unwrap();
    let mut value = wal_record(7, b"inner");
    value.extend_from_slice(&[0u8; 64]);
    db.put(b"log", &value).unwrap();
    db.close().unwrap();
    let wal = newest_wal(dir.path());
    let len = std::fs::metadata(&wal).unwrap().len();
    // Torn inside the trailing zeros, after the inner record.
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.truncate((len - 32) as usize);
    common::as_if_never_closed(&mut bytes);
    std::fs::write(&wal, &bytes).unwrap();
    let db = Db::open(dir.path(), Options::default())
        .expect("a torn tail (no record of the log after it) must be tolerated");
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"log").unwrap(), None);
}
