//! A panic (a bug) in the write path once the batch is logged: in the
//! middle of its memtable inserts. The batch was never acknowledged, so it
//! must not become visible in part: the sequence numbers it took stay
//! taken, and writes stop (as for a panic in a flush), so no later write
//! is given the same numbers and makes the half batch visible. A reopen
//! replays the batch all or nothing.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Db, Error, Options, StopCause, SyncMode, WriteBatch};

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        background_work: false,
        ..Options::default()
    }
}

/// Writes the batch (a = 1, b = 2) with a panic injected after its first
/// memtable insert, and checks that the write panicked there.
fn write_a_batch_that_panics_after_its_first_insert(db: &Db) {
    let fired = Arc::new(AtomicBool::new(false));
    let once = Arc::clone(&fired);
    db.inner.insert_pause.set(Some(Arc::new(move || {
        if !once.swap(true, Ordering::SeqCst) {
            panic!("injected insert panic");
        }
    })));
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"1");
    batch.put(b"b", b"2");
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.write(batch)));
    db.inner.insert_pause.set(None);
    assert!(written.is_err(), "the write panics");
    assert!(fired.load(Ordering::SeqCst));
}

#[test]
fn a_write_that_panics_half_inserted_stops_writes_and_stays_invisible() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"before", b"0").unwrap();
    write_a_batch_that_panics_after_its_first_insert(&db);

    // The next write is refused; had it been given the batch's first
    // sequence number, `a` (inserted at it) would read as written while
    // `b` would not.
    let next = db.put(b"c", b"3");
    let half = (db.get(b"a").unwrap(), db.get(b"b").unwrap());
    match next {
        Err(Error::WritesStopped(stop)) => assert_eq!(stop.cause(), StopCause::Panic),
        other => panic!("the write after the panic: {other:?}; a, b read {half:?}"),
    }
    assert_eq!(half, (None, None), "half a batch is visible");
    assert_eq!(db.get(b"before").unwrap(), Some(b"0".to_vec()));
    assert!(matches!(db.close(), Err(Error::WritesStopped(_))));

    // The batch was logged: a reopen replays it whole (or not at all).
    let db = Db::open(dir.path(), options()).unwrap();
    let (a, b) = (db.get(b"a").unwrap(), db.get(b"b").unwrap());
    assert_eq!(
        a.is_some(),
        b.is_some(),
        "half a batch recovered: {a:?} {b:?}"
    );
    assert_eq!(db.get(b"before").unwrap(), Some(b"0".to_vec()));
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}

/// Without the stop: the same panic, then a write given the same sequence
/// numbers. Whatever it shows before the reopen, the reopen must hold
/// every acknowledged write.
#[test]
fn a_write_after_a_half_inserted_panic_is_never_lost() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    write_a_batch_that_panics_after_its_first_insert(&db);
    let acknowledged = db.put(b"c", b"3").is_ok();
    let _ = db.close();
    let db = Db::open(dir.path(), options()).expect("the store reopens");
    if acknowledged {
        assert_eq!(db.get(b"c").unwrap(), Some(b"3".to_vec()));
    }
    db.close().unwrap();
}
