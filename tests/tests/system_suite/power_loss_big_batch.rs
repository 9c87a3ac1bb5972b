//! Power loss at every file-system operation around one batch larger than
//! the memtable: its WAL append (torn by a short write, or its pages and
//! sectors persisted out of order), the rotation it causes, the inline
//! flush and compactions that follow on a deep tree of narrow tables, a
//! few single writes after it, and the close.
//!
//! The batch rewrites half the keys, deletes keys that live only in deep
//! levels, and writes one key three times (put, delete, put) and another
//! (put, put, delete): the later op of a key in a batch wins. After the
//! power loss the reopened store must hold the state before the batch, or
//! the batch whole, followed by a prefix of the later writes: never part
//! of the batch. Every acknowledged write is there (`SyncMode::Always`, or
//! `Never` after a close that returned `Ok`), at most the first refused
//! one besides, and the sequence numbers go on past every one recovered.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, PartialWrite, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode, WriteBatch};
use bloomlsm_tests::{
    close_with_no_orphan_table, contents, copy_store_dir, first_differences, key, scratch_dir,
    value,
};

/// Keys written before the batch.
const KEYS: u64 = 240;
/// Single writes after the batch.
const AFTER: u64 = 3;
/// Crashes at each of the first operations of the batch's write (its WAL
/// append, fsync and the rotation after it), each with its own torn
/// prefix and fate of the unsynced bytes; one at every other operation.
const SEEDS: u64 = 16;
/// Operations of the batch's write crashed at with `SEEDS` seeds.
const SEEDED_OPS: u64 = 4;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        memtable_bytes: 2048,
        target_file_bytes: 1024,
        block_size: 256,
        l1_bytes: 2048,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        background_work: false,
        ..Options::default()
    }
}

/// The batch, thousands of ops: every other key rewritten eight times
/// and then once more, every sixth (from 1) deleted, a key put, deleted
/// and put again, one put twice then deleted.
fn batch_ops() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut ops = Vec::new();
    ops.push((b"same".to_vec(), Some(b"first".to_vec())));
    // Thousands of ops the later ones overwrite.
    for round in 0..8 {
        for i in (0..KEYS).step_by(2) {
            ops.push((key(i), Some(format!("early-{round}").into_bytes())));
        }
    }
    for i in 0..KEYS {
        if i.is_multiple_of(2) {
            ops.push((
                key(i),
                Some(format!("batch-{i}-{}", "b".repeat(100)).into_bytes()),
            ));
        } else if i % 6 == 1 {
            ops.push((key(i), None));
        }
    }
    ops.push((b"same".to_vec(), None));
    ops.push((b"gone".to_vec(), Some(b"one".to_vec())));
    ops.push((b"same".to_vec(), Some(b"last".to_vec())));
    ops.push((b"gone".to_vec(), Some(b"two".to_vec())));
    ops.push((b"gone".to_vec(), None));
    ops
}

fn after_key(i: u64) -> Vec<u8> {
    format!("after{i}").into_bytes()
}

/// The models: before the batch, after it, after each later write.
fn stages() -> Vec<Model> {
    let mut m: Model = (0..KEYS).map(|i| (key(i), value(i))).collect();
    let mut stages = vec![m.clone()];
    for (k, v) in batch_ops() {
        match v {
            Some(v) => m.insert(k, v),
            None => m.remove(&k),
        };
    }
    stages.push(m.clone());
    for i in 0..AFTER {
        m.insert(after_key(i), value(i));
        stages.push(m.clone());
    }
    stages
}

/// A closed store holding the keys, in a deep tree; its last sequence.
fn before_batch(sync: SyncMode) -> (tempfile::TempDir, u64) {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(sync)).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    // Overwrites of a few hot keys push the first writes down the tree.
    for _ in 0..6 {
        for i in 0..20 {
            db.put(&key(i * 7), &value(i * 7)).unwrap();
        }
    }
    let deepest = db
        .stats()
        .levels
        .iter()
        .rposition(|l| l.tables > 0)
        .unwrap();
    assert!(deepest >= 3, "the tree is not deep: level {deepest}");
    let seq = db.last_sequence();
    db.close().unwrap();
    (dir, seq)
}

/// What one session got acknowledged: stages reached, and whether its
/// close returned `Ok`.
struct Session {
    acked: usize,
    closed: bool,
    /// Operations the open made (the number of the batch's first one).
    opened_at: u64,
}

fn session(dir: &Path, fs: &FaultFs, sync: SyncMode) -> Session {
    let mut out = Session {
        acked: 0,
        closed: false,
        opened_at: 0,
    };
    let Ok(db) = Db::open_with_fs(dir, options(sync), Arc::new(fs.clone())) else {
        return out;
    };
    out.opened_at = fs.ops();
    let mut b = WriteBatch::new();
    for (k, v) in batch_ops() {
        match v {
            Some(v) => b.put(&k, &v),
            None => b.delete(&k),
        };
    }
    if db.write(b).is_ok() {
        out.acked = 1;
        for i in 0..AFTER {
            if db.put(&after_key(i), &value(i)).is_err() {
                break;
            }
            out.acked += 1;
        }
    }
    out.closed = db.close().is_ok();
    out
}

fn sweep(sync: SyncMode) {
    let (pre, pre_seq) = before_batch(sync);
    let stages = stages();
    let (ops, batch_at) = ops_of_a_clean_session(pre.path(), sync);
    let batch_len = batch_ops().len() as u64;
    let mut seen = vec![0usize; stages.len()];
    let seeds = |op: u64| {
        if (batch_at..batch_at + SEEDED_OPS).contains(&op) {
            SEEDS
        } else {
            1
        }
    };
    for (crash_at, seed) in (0..ops).flat_map(|op| (0..seeds(op)).map(move |s| (op, s))) {
        let dir = copy_store_dir(pre.path());
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let seed = seed * ops + crash_at;
        fs.set_partial_writes(PartialWrite::Seeded(seed));
        fs.set_unsynced_fate(match seed % 3 {
            0 => UnsyncedFate::Truncated,
            1 => UnsyncedFate::Pages(seed),
            _ => UnsyncedFate::Sectors(seed),
        });
        let s = session(dir.path(), &fs, sync);
        fs.simulate_power_loss().unwrap();
        let what = format!("{sync:?}, crash at operation {crash_at} of {ops}, seed {seed}");
        let db = Db::open(dir.path(), options(sync))
            .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        let got = contents(&db);
        let Some(stage) = stages.iter().position(|m| *m == got) else {
            let closest = if got.contains_key(&key(0)) && got.get(&key(0)) != Some(&value(0)) {
                &stages[1]
            } else {
                &stages[0]
            };
            panic!(
                "{what}: the store holds part of the batch: {:?}",
                first_differences(&got, closest, "closest stage")
            );
        };
        // Point reads agree with the scan (deleted deep keys included).
        for i in 0..KEYS {
            assert_eq!(
                db.get(&key(i)).unwrap().as_ref(),
                got.get(&key(i)),
                "{what}: get {i}"
            );
        }
        assert_eq!(db.get(b"same").unwrap().as_ref(), got.get(&b"same"[..]));
        assert_eq!(db.get(b"gone").unwrap(), None, "{what}");
        let promised = sync == SyncMode::Always || s.closed;
        if promised {
            assert!(
                stage >= s.acked,
                "{what}: {} writes acknowledged, stage {stage} recovered",
                s.acked
            );
        }
        assert!(
            stage <= s.acked + 1,
            "{what}: a write never tried came back (stage {stage}, acked {})",
            s.acked
        );
        // Sequence numbers go on past every write recovered.
        let floor = match stage {
            0 => pre_seq,
            n => pre_seq + batch_len + (n as u64 - 1),
        };
        assert!(
            db.last_sequence() >= floor,
            "{what}: last sequence {} below {floor} (stage {stage})",
            db.last_sequence()
        );
        // The store takes a batch again, and keeps it.
        let mut b = WriteBatch::new();
        b.put(b"same", b"again").delete(&key(0));
        let before = db.last_sequence();
        db.write(b).unwrap();
        assert_eq!(db.last_sequence(), before + 2, "{what}");
        db.close().unwrap();
        let db = Db::open(dir.path(), options(sync)).unwrap();
        assert_eq!(db.get(b"same").unwrap(), Some(b"again".to_vec()), "{what}");
        assert_eq!(db.get(&key(0)).unwrap(), None, "{what}");
        assert!(db.last_sequence() >= before + 2, "{what}");
        drop(db);
        seen[stage] += 1;
    }
    println!(
        "{sync:?}: {ops} crash points, {SEEDS} seeds at the batch's first {SEEDED_OPS}; stages recovered: {seen:?}"
    );
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
}

/// File-system operations of a session that no fault cuts short, and
/// the number of the batch's first one.
fn ops_of_a_clean_session(pre: &Path, sync: SyncMode) -> (u64, u64) {
    let dir = copy_store_dir(pre);
    let fs = FaultFs::new();
    let s = session(dir.path(), &fs, sync);
    assert_eq!(s.acked as u64, 1 + AFTER);
    assert!(s.closed);
    (fs.ops(), s.opened_at)
}

#[test]
fn a_big_batch_survives_power_loss_whole_or_not_at_all_synced() {
    sweep(SyncMode::Always);
}

#[test]
fn a_big_batch_survives_power_loss_whole_or_not_at_all_unsynced() {
    sweep(SyncMode::Never);
}

/// The batch closed into its WAL unflushed (a memtable large enough to
/// hold it), then power lost at every operation of the next session: the
/// open that replays the batch and flushes it to L0 (new WAL, table,
/// manifest, old WALs removed), the later writes and the close. The
/// batch was acknowledged and the close made it durable, so every reopen
/// holds it whole.
fn replay_sweep(sync: SyncMode) {
    let (pre, _) = before_batch(sync);
    let stages = stages();
    let logged = copy_store_dir(pre.path());
    {
        let roomy = Options {
            memtable_bytes: 1 << 20,
            ..options(sync)
        };
        let db = Db::open(logged.path(), roomy).unwrap();
        let mut b = WriteBatch::new();
        for (k, v) in batch_ops() {
            match v {
                Some(v) => b.put(&k, &v),
                None => b.delete(&k),
            };
        }
        db.write(b).unwrap();
        db.close().unwrap();
    }
    let later = |dir: &Path, fs: &FaultFs| -> Session {
        let mut out = Session {
            acked: 1,
            closed: false,
            opened_at: 0,
        };
        let Ok(db) = Db::open_with_fs(dir, options(sync), Arc::new(fs.clone())) else {
            return out;
        };
        for i in 0..AFTER {
            if db.put(&after_key(i), &value(i)).is_err() {
                break;
            }
            out.acked += 1;
        }
        out.closed = db.close().is_ok();
        out
    };
    let ops = {
        let dir = copy_store_dir(logged.path());
        let fs = FaultFs::new();
        assert_eq!(later(dir.path(), &fs).acked as u64, 1 + AFTER);
        fs.ops()
    };
    for crash_at in 0..ops {
        let dir = copy_store_dir(logged.path());
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        fs.set_partial_writes(PartialWrite::Seeded(crash_at));
        fs.set_unsynced_fate(match crash_at % 3 {
            0 => UnsyncedFate::Truncated,
            1 => UnsyncedFate::Pages(crash_at),
            _ => UnsyncedFate::Sectors(crash_at),
        });
        let s = later(dir.path(), &fs);
        fs.simulate_power_loss().unwrap();
        let what = format!("{sync:?}, replay, crash at operation {crash_at} of {ops}");
        let db = Db::open(dir.path(), options(sync))
            .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        let got = contents(&db);
        let stage = stages.iter().position(|m| *m == got).unwrap_or_else(|| {
            panic!(
                "{what}: {:?}",
                first_differences(&got, &stages[1], "the batch")
            )
        });
        assert!(stage >= 1, "{what}: the closed batch was lost");
        if sync == SyncMode::Always || s.closed {
            assert!(stage >= s.acked, "{what}: stage {stage}, acked {}", s.acked);
        }
        assert!(
            stage <= s.acked + 1,
            "{what}: stage {stage}, acked {}",
            s.acked
        );
        close_with_no_orphan_table(db, dir.path(), &what);
    }
}

#[test]
fn a_logged_big_batch_survives_power_loss_in_its_replay_synced() {
    replay_sweep(SyncMode::Always);
}

#[test]
fn a_logged_big_batch_survives_power_loss_in_its_replay_unsynced() {
    replay_sweep(SyncMode::Never);
}
