//! `Db::flush` checks that writes go on before it takes the write lock;
//! a write failing in between stops writes while the flush waits. The
//! flush must then refuse with `WritesStopped` and change no file, as
//! every call after a stop does: before the second check under the write
//! lock it froze the memtable and created a new WAL after the stop.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;

use crate::fs::fault::FaultFs;
use crate::{Db, Error, Options, SyncMode};

fn options(background_work: bool) -> Options {
    Options {
        memtable_bytes: 4 << 10,
        target_file_bytes: 4 << 10,
        block_size: 256,
        l1_bytes: 16 << 10,
        sync: SyncMode::Always,
        background_work,
        ..Options::default()
    }
}

/// The flush passes its first check and waits; a write's WAL append
/// fails and stops writes; the file system heals (so any file operation
/// the flush went on to make would succeed and be counted); the flush
/// goes on. It must refuse and make no mutating file operation.
#[test]
fn a_flush_that_passed_its_check_before_a_stop_refuses_and_changes_no_file() {
    for background_work in [false, true] {
        let case = format!("background_work {background_work}");
        let dir = crate::scratch_dirs::scratch_dir();
        let fs = FaultFs::new();
        let db = Arc::new(
            Db::open_with_fs(dir.path(), options(background_work), Arc::new(fs.clone())).unwrap(),
        );
        for i in 0..20u32 {
            db.put(format!("key{i:04}").as_bytes(), b"value").unwrap();
        }
        db.wait_for_background_work().unwrap();
        let (flush_paused, resume_flush) = db.inner.flush_call_pause.arm_once();
        let flusher = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.flush())
        };
        flush_paused.recv().unwrap();

        fs.fail_from_op(fs.ops());
        let failed = db.put(b"failing", b"write");
        assert!(failed.is_err(), "{case}: the armed write succeeded");
        assert!(
            matches!(db.put(b"probe", b"x"), Err(Error::WritesStopped(_))),
            "{case}: the failed write did not stop writes"
        );
        fs.heal();
        let ops_at_stop = fs.ops();

        resume_flush.send(()).unwrap();
        let flushed = flusher.join().unwrap();
        assert!(
            matches!(flushed, Err(Error::WritesStopped(_))),
            "{case}: flush after the stop returned {flushed:?}"
        );
        assert_eq!(
            fs.ops(),
            ops_at_stop,
            "{case}: the flush changed files after the stop"
        );
        for i in 0..20u32 {
            assert_eq!(
                db.get(format!("key{i:04}").as_bytes()).unwrap().as_deref(),
                Some(&b"value"[..]),
                "{case}: key{i:04}"
            );
        }
    }
}
