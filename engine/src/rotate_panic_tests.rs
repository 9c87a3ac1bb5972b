//! A panic (a bug) in a memtable rotation once the new WAL takes writes and
//! before the view swap: the frozen memtable's WAL writer must still be
//! one the close fsyncs, as it is once the rotation is done. Before, it
//! was dropped with the panic, so under `SyncMode::Never` the writes it
//! held, all acknowledged, were never fsynced: the close returned (with
//! the stop), and a power loss then lost them.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use crate::fs::fault::FaultFs;
use crate::{Db, Error, Options, SyncMode};

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn a_rotation_that_panics_leaves_every_acknowledged_write_durable_at_close() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    for i in 0..50 {
        db.put(&key(i), b"v").unwrap();
    }
    db.inner
        .rotate_pause
        .set(Some(Arc::new(|| panic!("injected rotation panic"))));
    let flushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.flush()));
    assert!(flushed.is_err(), "the rotation panics");
    db.inner.rotate_pause.set(None);
    for i in 0..50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"v".to_vec()), "key {i}");
    }
    // The close fsyncs every live WAL (and returns the stop).
    assert!(matches!(db.close(), Err(Error::WritesStopped(_))));
    fs.simulate_power_loss().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..50 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(b"v".to_vec()),
            "key {i} lost"
        );
    }
    db.close().unwrap();
}

/// `Db::flush` rotates under the write lock, as a write does: a panic
/// there must stop writes before that lock is released. Before, the stop
/// came after the unwinding released it, and a write in between was
/// appended to the new WAL and inserted into the memtable the view still
/// held, whose WAL is the frozen one: acknowledged with the store in the
/// half-rotated state the panic left.
#[test]
fn a_flushs_rotation_panic_stops_writes_before_the_write_lock_is_released() {
    for sync in [SyncMode::Never, SyncMode::Always] {
        let dir = crate::scratch_dirs::scratch_dir();
        let options = Options { sync, ..options() };
        let db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
        for i in 0..50 {
            db.put(&key(i), b"v").unwrap();
        }
        db.inner
            .rotate_pause
            .set(Some(Arc::new(|| panic!("injected rotation panic"))));
        let (unwound, resume) = db.inner.unwound_pause.arm_once();
        let flusher = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.flush())
        };
        unwound.recv().unwrap();
        db.inner.rotate_pause.set(None);
        // The flush has unwound past the write lock and not yet returned.
        let written = db.put(b"in the window", b"x");
        resume.send(()).unwrap();
        assert!(flusher.join().is_err(), "the rotation panics");
        assert!(
            matches!(written, Err(Error::WritesStopped(_))),
            "{sync:?}: a write was taken after the panic, before the stop: {written:?}"
        );
        let db = Arc::into_inner(db).unwrap();
        assert!(matches!(db.close(), Err(Error::WritesStopped(_))));
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..50 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(b"v".to_vec()), "key {i}");
        }
        db.close().unwrap();
    }
}
