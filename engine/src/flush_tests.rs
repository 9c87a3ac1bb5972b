//! A flush that finds several frozen memtables waiting writes them into
//! one L0 table (`flush.rs`): one run for absent gets to probe, every
//! version kept (a snapshot between the memtables still reads its own
//! values), and every flushed memtable's WAL retired, across a reopen.

use crate::{Db, Options};

fn options() -> Options {
    Options {
        // The test decides when memtables freeze (none fills up); writers
        // never wait for the frozen ones.
        memtable_bytes: 1 << 20,
        max_immutable_memtables: 8,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Freezes the active memtable (a new one and a new WAL take its place),
/// as a full memtable does, without flushing it.
fn freeze(db: &Db) {
    let mut w = db.inner.write.lock();
    db.inner.rotate_memtable(&mut w).unwrap();
}

fn wal_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")
        })
        .count()
}

#[test]
fn a_flush_writes_every_frozen_memtable_waiting_into_one_l0_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    // The flush thread is held back (as by a slow device) while three
    // memtables freeze: the oldest holds
    // even keys, the next overwrites some and deletes others and adds odd
    // keys, the newest overwrites again.
    let held = db.inner.flush_lock.lock();
    for i in (0..600).step_by(2) {
        db.put(&key(i), b"first").unwrap();
    }
    freeze(&db);
    let before_second = db.snapshot();
    for i in (0..600u32).step_by(3) {
        if i.is_multiple_of(2) {
            db.put(&key(i), b"second").unwrap();
        } else {
            db.delete(&key(i)).unwrap();
        }
    }
    for i in (1..600).step_by(4) {
        db.put(&key(i), b"odd").unwrap();
    }
    freeze(&db);
    for i in (0..600).step_by(5) {
        db.put(&key(i), b"third").unwrap();
    }
    freeze(&db);
    assert_eq!(db.inner.current.load().imm.len(), 3);
    assert_eq!(wal_files(dir.path()), 4);

    // Whichever flushes first, the flush thread or this call, finds the
    // three waiting.
    drop(held);
    db.inner.flush_all_immutable().unwrap();
    db.wait_for_background_work().unwrap();

    let stats = db.stats();
    assert_eq!(
        stats.levels[0].tables, 1,
        "one L0 table for three memtables"
    );
    assert_eq!(stats.flushes, 1);
    assert!(db.inner.current.load().imm.is_empty());
    assert_eq!(wal_files(dir.path()), 1, "the flushed memtables' WALs go");
    // Every version kept: the table holds the writes of all three.
    assert_eq!(stats.levels[0].entries, 300 + 200 + 150 + 120);

    let expected = |i: u32| -> Option<&'static [u8]> {
        if i.is_multiple_of(5) {
            Some(b"third")
        } else if i % 4 == 1 {
            Some(b"odd")
        } else if i.is_multiple_of(3) {
            if i.is_multiple_of(2) {
                Some(b"second")
            } else {
                None
            }
        } else if i.is_multiple_of(2) {
            Some(b"first")
        } else {
            None
        }
    };
    let check = |db: &Db, when: &str| {
        for i in 0..600 {
            assert_eq!(
                db.get(&key(i)).unwrap().as_deref(),
                expected(i),
                "{when}: key {i}"
            );
        }
    };
    check(&db, "after the flush");
    for i in 0..600u32 {
        let old: Option<&[u8]> = i.is_multiple_of(2).then_some(b"first");
        assert_eq!(
            before_second.get(&key(i)).unwrap().as_deref(),
            old,
            "snapshot: key {i}"
        );
    }
    drop(before_second);

    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    check(&db, "after a reopen");
    assert_eq!(db.stats().levels[0].tables, 1);
}
