//! A batch held half-inserted in the memtable (the write paused under the
//! write lock after some of its inserts) while everything that does not
//! take the write lock runs: snapshots, gets, scans, the flush of a frozen
//! memtable, compactions down a deep tree and a filter rebuild, each of
//! which installs a manifest. None may see any of the batch, and none may
//! make it visible or durable in part: once the write returns, all of it
//! is visible at once, a snapshot taken during the pause still sees none
//! of it, and a reopen holds it whole.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Db, FilterPolicy, Options, WriteBatch};

fn options() -> Options {
    Options {
        memtable_bytes: 1024,
        target_file_bytes: 512,
        block_size: 128,
        l1_bytes: 1024,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn contents(pairs: crate::DbIter) -> Model {
    pairs.map(|r| r.unwrap()).collect()
}

/// Inserts made before the pause.
const BEFORE_PAUSE: u64 = 40;

#[test]
fn a_half_inserted_batch_is_invisible_to_reads_flushes_compactions_and_rebuilds() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    let mut before = Model::new();
    for round in 0..3u64 {
        for i in 0..150u64 {
            let v = format!("old-{round}-{i}").into_bytes();
            db.put(&key(i), &v).unwrap();
            before.insert(key(i), v);
        }
    }
    // A frozen memtable left for the flush during the pause.
    for i in 150..170u64 {
        let v = format!("frozen-{i}").into_bytes();
        db.put(&key(i), &v).unwrap();
        before.insert(key(i), v);
    }
    {
        let mut w = db.inner.write.lock();
        db.inner.rotate_memtable(&mut w).unwrap();
    }
    assert_eq!(db.inner.current.load().imm.len(), 1);
    let deepest = db
        .stats()
        .levels
        .iter()
        .rposition(|l| l.tables > 0)
        .unwrap();
    assert!(deepest >= 2, "not deep: level {deepest}");
    let seq_before = db.last_sequence();

    // The batch: deletes of deep keys, rewrites, a key put, deleted, put.
    let mut after = before.clone();
    let mut batch = WriteBatch::new();
    for i in 0..170u64 {
        if i.is_multiple_of(3) {
            batch.delete(&key(i));
            after.remove(&key(i));
        } else {
            let v = format!("new-{i}").into_bytes();
            batch.put(&key(i), &v);
            after.insert(key(i), v);
        }
    }
    batch.put(b"same", b"1").delete(b"same").put(b"same", b"2");
    after.insert(b"same".to_vec(), b"2".to_vec());
    let ops = batch.len() as u64;

    // Pause the write after `BEFORE_PAUSE` inserts.
    let inserts = Arc::new(AtomicU64::new(0));
    let (paused_tx, paused_rx) = std::sync::mpsc::channel();
    let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
    let resume_rx = parking_lot::Mutex::new(resume_rx);
    {
        let inserts = Arc::clone(&inserts);
        db.inner.insert_pause.set(Some(Arc::new(move || {
            if inserts.fetch_add(1, Ordering::SeqCst) + 1 == BEFORE_PAUSE {
                paused_tx.send(()).unwrap();
                resume_rx.lock().recv().unwrap();
            }
        })));
    }
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.write(batch))
    };
    paused_rx.recv().unwrap();

    // Half the batch is in the memtable now.
    let check_before = |what: &str| {
        assert_eq!(db.last_sequence(), seq_before, "{what}");
        assert!(
            contents(db.scan::<&[u8], _>(..).unwrap()) == before,
            "{what}: a scan saw part of the batch"
        );
        for (k, v) in &before {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{what}");
        }
        assert_eq!(db.get(b"same").unwrap(), None, "{what}");
    };
    check_before("paused");
    let snapshot = db.snapshot();
    assert_eq!(snapshot.sequence(), seq_before);
    let held = db.scan::<&[u8], _>(..).unwrap();
    db.inner.flush_all_immutable().unwrap();
    assert!(db.inner.current.load().imm.is_empty());
    check_before("after the flush of the frozen memtable");
    db.inner.settle_background_work().unwrap();
    check_before("after compactions");
    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 3.0 })
        .unwrap();
    check_before("after a filter rebuild");
    assert_eq!(
        crate::manifest::ManifestState::decode(
            &dir.path().join("MANIFEST"),
            &std::fs::read(dir.path().join("MANIFEST")).unwrap()
        )
        .unwrap()
        .last_seq,
        seq_before,
        "a manifest written during the pause names the half batch's sequences"
    );

    resume_tx.send(()).unwrap();
    writer.join().unwrap().unwrap();
    db.inner.insert_pause.set(None);
    assert_eq!(inserts.load(Ordering::SeqCst), ops);
    assert_eq!(db.last_sequence(), seq_before + ops);
    assert!(contents(db.scan::<&[u8], _>(..).unwrap()) == after);
    assert!(contents(held) == before, "an iterator from the pause");
    assert!(
        contents(snapshot.scan::<&[u8], _>(..).unwrap()) == before,
        "a snapshot from the pause"
    );
    assert_eq!(snapshot.get(b"same").unwrap(), None);
    assert_eq!(db.get(b"same").unwrap(), Some(b"2".to_vec()));
    drop(snapshot);
    db.wait_for_background_work().unwrap();
    assert!(contents(db.scan::<&[u8], _>(..).unwrap()) == after);
    Arc::into_inner(db).unwrap().close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.last_sequence(), seq_before + ops);
    assert!(
        contents(db.scan::<&[u8], _>(..).unwrap()) == after,
        "reopened"
    );
    db.close().unwrap();
}
