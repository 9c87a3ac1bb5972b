//! `max_immutable_memtables` bounds the frozen memtables however many
//! writers race: a writer that found room before another writer's
//! rotation filled the last slot must not freeze one more. The room a
//! write saw is checked again under the write lock, where every rotation
//! of a write happens.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use crate::{Db, Options};

fn options() -> Options {
    Options {
        memtable_bytes: 1024,
        max_immutable_memtables: 1,
        target_file_bytes: 1024,
        block_size: 128,
        l1_bytes: 2048,
        num_levels: 7,
        background_work: true,
        ..Options::default()
    }
}

/// Writer B finds room (no frozen memtable) and is held before the write
/// lock; writer A then fills the memtable and freezes it, and its flush
/// is held. B's write fills its memtable too: it must wait for the flush
/// (a write stall) rather than freeze a second memtable.
#[test]
fn a_writer_that_saw_room_before_another_froze_the_last_slot_waits() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    let big = vec![7u8; 2000];
    let (flush_paused, resume_flush) = db.inner.flush_pause.arm_once();
    let (room_paused, resume_b) = db.inner.room_pause.arm_once();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer_b = {
        let db = Arc::clone(&db);
        let big = big.clone();
        std::thread::spawn(move || {
            let result = db.put(b"b", &big);
            done_tx.send(()).unwrap();
            result
        })
    };
    room_paused.recv().unwrap();
    db.put(b"a", &big).unwrap();
    flush_paused.recv().unwrap();
    assert_eq!(db.inner.current.load().imm.len(), 1);
    assert_eq!(db.stats().write_stalls, 0);

    // B goes on: it either freezes a second memtable (and returns while
    // the flush is held) or stalls; one of the two must happen.
    resume_b.send(()).unwrap();
    loop {
        if done_rx.try_recv().is_ok() {
            panic!(
                "a write froze memtable {} past max_immutable_memtables 1",
                db.inner.current.load().imm.len()
            );
        }
        if db.stats().write_stalls > 0 {
            break;
        }
        std::thread::yield_now();
    }
    assert!(db.inner.current.load().imm.len() <= 1);
    resume_flush.send(()).unwrap();
    writer_b.join().unwrap().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(big.clone()));
    assert_eq!(db.get(b"b").unwrap(), Some(big));
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
}

/// Inline work (no background threads): the writer that lost the race
/// for the last slot flushes itself, after the flush the winner holds
/// (in its own inline work) returns, and neither writer waits forever.
#[test]
fn inline_a_writer_that_lost_the_last_slot_flushes_and_goes_on() {
    let dir = crate::scratch_dirs::scratch_dir();
    let opts = Options {
        background_work: false,
        ..options()
    };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let big = vec![7u8; 2000];
    let (room_paused, resume_b) = db.inner.room_pause.arm_once();
    let writer_b = {
        let db = Arc::clone(&db);
        let big = big.clone();
        std::thread::spawn(move || db.put(b"b", &big))
    };
    room_paused.recv().unwrap();
    let (flush_paused, resume_flush) = db.inner.flush_pause.arm_once();
    let writer_a = {
        let db = Arc::clone(&db);
        let big = big.clone();
        std::thread::spawn(move || db.put(b"a", &big))
    };
    // A froze its memtable and is held in its inline flush.
    flush_paused.recv().unwrap();
    assert_eq!(db.inner.current.load().imm.len(), 1);
    // B either freezes a second memtable (and then waits for the flush
    // lock A holds) or stalls; one of the two must happen.
    resume_b.send(()).unwrap();
    while db.stats().write_stalls == 0 {
        let frozen = db.inner.current.load().imm.len();
        assert!(
            frozen <= 1,
            "a write froze memtable {frozen} past max_immutable_memtables 1"
        );
        std::thread::yield_now();
    }
    assert!(db.inner.current.load().imm.len() <= 1);
    resume_flush.send(()).unwrap();
    writer_a.join().unwrap().unwrap();
    writer_b.join().unwrap().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(big.clone()));
    assert_eq!(db.get(b"b").unwrap(), Some(big));
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
}
