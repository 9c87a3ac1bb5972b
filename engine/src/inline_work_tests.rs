//! The flushes and compactions a write runs itself (`background_work`
//! off) are bounded while other threads write: each write runs the steps
//! due when it finished, and goes on to another only if no write came in
//! meanwhile (the next writer runs its own). Before, a writer went on
//! compacting while any compaction was due, so under a load from other
//! threads that kept making one due, its `put` never returned.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Db, Options};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Freezes the memtable and flushes it to an L0 table, without compacting.
fn flush_l0(db: &Db) {
    {
        let mut w = db.inner.write.lock();
        db.inner.rotate_memtable(&mut w).unwrap();
    }
    db.inner.flush_all_immutable().unwrap();
}

/// Inline work; every memtable of a few puts flushes to an L0 table, and
/// each L0 table makes a compaction due; writers never wait on L0.
fn options() -> Options {
    Options {
        background_work: false,
        memtable_bytes: 1024,
        l0_compaction_trigger: 1,
        l0_slowdown_trigger: 1000,
        l0_stop_trigger: 1000,
        max_immutable_memtables: 1000,
        ..Options::default()
    }
}

/// A hook at each compaction pick of the writing thread has another
/// thread write (its own inline work then waits for the compaction lock
/// this thread holds) and then makes another compaction due, flushing a
/// new L0 table, as concurrent writers would between this thread's steps;
/// it gives up (and the test fails) at `STEPS` picks.
#[test]
fn a_write_returns_while_other_writers_keep_a_compaction_due() {
    const STEPS: u32 = 20;
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    for i in 0..200 {
        db.put(&key(i), &[b'a'; 40]).unwrap();
    }
    // An L0 table the write's own inline work will find due.
    db.put(&key(1), b"in l0").unwrap();
    flush_l0(&db);
    assert!(db.stats().levels[0].tables >= 1);
    let caller = std::thread::current().id();
    let picks = Arc::new(AtomicU32::new(0));
    let others = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let weak = Arc::downgrade(&db);
    let (counted, spawned) = (Arc::clone(&picks), Arc::clone(&others));
    db.inner.pick_pause.set(Some(Arc::new(move || {
        if std::thread::current().id() != caller {
            return;
        }
        let pick = counted.fetch_add(1, Ordering::SeqCst);
        let Some(db) = weak.upgrade() else { return };
        if pick >= STEPS {
            return;
        }
        let before = db.last_sequence();
        let writer = Arc::clone(&db);
        let other = std::thread::spawn(move || {
            writer.put(&key(10_000 + pick), b"other").unwrap();
        });
        // Until the write is visible, or its writer ended (a failed put,
        // which the join below reports, rather than this loop spinning).
        while db.last_sequence() == before && !other.is_finished() {
            std::thread::yield_now();
        }
        spawned.lock().push(other);
        flush_l0(&db);
    })));
    db.put(&key(0), b"last").unwrap();
    let picks = picks.load(Ordering::SeqCst);
    db.inner.pick_pause.set(None);
    for other in others.lock().drain(..) {
        other.join().unwrap();
    }
    assert_eq!(
        picks, 1,
        "one put made {picks} compaction picks while other writers kept one due"
    );
    assert_eq!(db.get(&key(0)).unwrap().as_deref(), Some(&b"last"[..]));
    assert_eq!(db.get(&key(1)).unwrap().as_deref(), Some(&b"in l0"[..]));
    for pick in 0..picks.min(STEPS) {
        let k = key(10_000 + pick);
        assert_eq!(db.get(&k).unwrap().as_deref(), Some(&b"other"[..]));
    }
}
