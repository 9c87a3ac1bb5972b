//! Review rev5 attack on the close marker (`engine/src/wal/seal.rs`): a
//! crash at every operation of a clean close (the WAL fsyncs, the marker's
//! append and fsync, the header seals), then a power loss under each fate;
//! and stores reopened, written and closed many times (the marker must not
//! move the recovered sequence).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, OverwriteFate, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode};

use common::{Model, contents};

fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        background_work: false,
        ..Options::default()
    }
}

/// A crash at the `crash_at`-th operation of a clean close after three
/// writes, then a power loss: the store opens with every write
/// (`SyncMode::Always`) or a prefix of them (`Never`), and the open reports
/// a cut only when it dropped a write.
#[test]
fn a_crash_anywhere_in_a_close_keeps_the_writes_and_reports_no_false_cut() {
    let mut false_cuts = Vec::new();
    for sync in [SyncMode::Always, SyncMode::Never] {
        for fate in [
            UnsyncedFate::Truncated,
            UnsyncedFate::Pages(1),
            UnsyncedFate::Pages(2),
            UnsyncedFate::Pages(3),
            UnsyncedFate::Pages(4),
            UnsyncedFate::Pages(5),
            UnsyncedFate::Pages(6),
        ] {
            for overwrite in [OverwriteFate::Lost, OverwriteFate::Applied] {
                for crash_at in 0..10 {
                    let dir = common::scratch_dir();
                    let fs = FaultFs::new();
                    fs.set_unsynced_fate(fate);
                    fs.set_overwrite_fate(overwrite);
                    let db =
                        Db::open_with_fs(dir.path(), options(sync), Arc::new(fs.clone())).unwrap();
                    // The last write ends 6 bytes before a 4 KiB page: the
                    // marker's length field lies in that page, the rest in
                    // the next, which a power loss may lose.
                    let mut models = vec![Model::new()];
                    for i in 0..3 {
                        let value = if i == 2 {
                            vec![b'v'; 200 + (4090 - wal_len(200))]
                        } else {
                            common::value(i)
                        };
                        db.put(&common::key(i), &value).unwrap();
                        let mut m = models.last().unwrap().clone();
                        m.insert(common::key(i), value);
                        models.push(m);
                    }
                    fs.fail_from_op(fs.ops() + crash_at);
                    let _ = db.close();
                    fs.heal();
                    fs.simulate_power_loss().unwrap();
                    let case = format!("{sync:?} {fate:?} {overwrite:?} crash at {crash_at}");
                    let wals: std::collections::BTreeMap<_, _> = std::fs::read_dir(dir.path())
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
                        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
                        .collect();
                    let db = Db::open(dir.path(), Options::default())
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let got = contents(&db);
                    let kept = models.iter().position(|m| *m == got);
                    let kept = kept.unwrap_or_else(|| panic!("{case}: not a prefix"));
                    if sync == SyncMode::Always {
                        assert_eq!(kept, 3, "{case}: an acknowledged write lost");
                    }
                    // A tail whose length field reads zeros (a lost page)
                    // may be a write's: reported. One whose length field
                    // survived says what it held.
                    if kept == 3
                        && let Some(cut) = db.stats().wal_replay_cut
                        && wals[&cut.path][cut.offset as usize..]
                            .iter()
                            .take(4)
                            .any(|&b| b != 0)
                    {
                        let tail = &wals[&cut.path][cut.offset as usize..];
                        false_cuts.push(format!("{case}: {cut:?} {tail:?}"));
                    }
                }
            }
        }
    }
    assert!(
        false_cuts.is_empty(),
        "cuts reported with every write kept:\n{}",
        false_cuts.join("\n")
    );
}

/// The length a WAL holding writes 0 and 1 and a write of key 2 with a
/// value of `value_len` bytes has.
fn wal_len(value_len: usize) -> usize {
    let dir = common::scratch_dir();
    let db = Db::open(dir.path(), options(SyncMode::Always)).unwrap();
    for i in 0..2 {
        db.put(&common::key(i), &common::value(i)).unwrap();
    }
    db.put(&common::key(2), &vec![b'v'; value_len]).unwrap();
    let len = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .max()
        .unwrap();
    drop(db);
    len as usize
}

/// Open, write, close, many times (each close leaves a marker at the next
/// sequence); an overwrite of the same key must win every time, so no
/// sequence is reused after a marker.
#[test]
fn reopened_stores_never_reuse_a_sequence_after_a_marker() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        let dir = common::scratch_dir();
        for round in 0..6u64 {
            let db = Db::open(dir.path(), options(sync)).unwrap();
            assert_eq!(
                db.get(b"k").unwrap(),
                round.checked_sub(1).map(|r| r.to_le_bytes().to_vec()),
                "{sync:?} round {round}"
            );
            if round % 3 != 2 {
                db.put(b"k", &round.to_le_bytes()).unwrap();
            } else {
                // A session that writes nothing, then one with a delete.
                db.close().unwrap();
                let db = Db::open(dir.path(), options(sync)).unwrap();
                db.put(b"k", &round.to_le_bytes()).unwrap();
                db.delete(b"gone").unwrap();
                db.close().unwrap();
                continue;
            }
            db.close().unwrap();
            let ro = Db::open_read_only(dir.path(), options(sync)).unwrap();
            assert_eq!(ro.get(b"k").unwrap(), Some(round.to_le_bytes().to_vec()));
            drop(ro);
        }
    }
}
