//! A merged flush (several frozen memtables into one L0 table,
//! `flush.rs`) installed while an L0 compaction is paused in its merge:
//! the compaction's outputs land in L1 after the merged table is in L0,
//! so the tree holds, for the same keys, an L0 table whose sequence range
//! spans snapshots taken between its memtables and L1 tables of older
//! versions kept for a snapshot released during the merge. Every answer
//! (now, and through each snapshot, by get and scan) must be the newest
//! version at or below its sequence, and stay so through the next L0
//! compaction of the merged table and a reopen.

use std::collections::BTreeMap;

use crate::{Db, Options, Snapshot};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u64 = 200;

fn options() -> Options {
    Options {
        block_size: 128,
        // The test freezes memtables itself; none fills up, and writers
        // never wait for the frozen ones.
        memtable_bytes: 1 << 20,
        max_immutable_memtables: 8,
        target_file_bytes: 1024,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 64,
        l0_stop_trigger: 64,
        // Inline work would take the compaction lock in every write.
        background_work: true,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// Writes round `round`: every key `i` with `i % step == 0` is put (or,
/// every third such key, deleted), in batches that write each key twice.
fn round(db: &Db, model: &mut Model, tag: &str, step: u64) {
    for i in (0..KEYS).step_by(step as usize) {
        let mut batch = crate::WriteBatch::new();
        batch.put(&key(i), format!("{tag}-{i}-first").as_bytes());
        if (i / step).is_multiple_of(3) {
            batch.delete(&key(i));
            model.remove(&key(i));
        } else {
            let v = format!("{tag}-{i}");
            batch.put(&key(i), v.as_bytes());
            model.insert(key(i), v.into_bytes());
        }
        db.write(batch).unwrap();
    }
}

fn freeze(db: &Db) {
    let mut w = db.inner.write.lock();
    db.inner.rotate_memtable(&mut w).unwrap();
}

fn check(db: &Db, snapshots: &[(Snapshot, Model)], model: &Model, what: &str) {
    for i in 0..KEYS {
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{what}: get {i}"
        );
    }
    let all: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(&all, model, "{what}: scan");
    for (s, seen) in snapshots {
        let at = s.sequence();
        for i in 0..KEYS {
            let k = key(i);
            assert_eq!(
                s.get(&k).unwrap(),
                seen.get(&k).cloned(),
                "{what}: get {i} at {at}"
            );
        }
        let all: Model = s
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(&all, seen, "{what}: scan at {at}");
    }
    let sv = db.inner.current.load_full();
    sv.version.check_invariants().unwrap();
}

#[test]
fn a_merged_flush_installed_during_an_l0_compaction_keeps_every_snapshot_answer() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut model = Model::new();
    round(&db, &mut model, "a", 1);
    db.flush().unwrap();
    // Held by the compaction's snapshot list, released during its merge.
    let released = db.snapshot();
    round(&db, &mut model, "b", 2);
    let (paused, resume) = db.inner.merge_pause.arm_once();
    // The second L0 table: the compaction thread picks L0 -> L1 and stops
    // in its merge.
    db.flush().unwrap();
    paused.recv().unwrap();
    let mut snapshots = Vec::new();
    {
        // Held so that no flush takes the memtables one at a time.
        let _flush = db.inner.flush_lock.lock();
        for (tag, step) in [("c", 3), ("d", 5), ("e", 2)] {
            round(&db, &mut model, tag, step);
            // At the boundary between two memtables of the merged table.
            snapshots.push((db.snapshot(), model.clone()));
            freeze(&db);
        }
    }
    db.inner.flush_all_immutable().unwrap();
    assert_eq!(db.inner.current.load().version.levels[0].len(), 3);
    check(
        &db,
        &snapshots,
        &model,
        "merged table in L0, compaction paused",
    );
    drop(released);
    resume.send(()).unwrap();
    db.wait_for_background_work().unwrap();
    check(&db, &snapshots, &model, "compaction installed");
    // More rounds: the merged table is compacted down over the outputs.
    for (tag, step) in [("f", 7), ("g", 4)] {
        round(&db, &mut model, tag, step);
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        check(&db, &snapshots, &model, tag);
    }
    // Released out of order: the middle one first.
    snapshots.remove(1);
    db.wait_for_background_work().unwrap();
    check(&db, &snapshots, &model, "middle snapshot released");
    snapshots.clear();
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    check(&db, &[], &model, "reopened");
}
