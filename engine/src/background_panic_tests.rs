//! A panic in a flush or compaction (a bug) stops writes with
//! `StopCause::Panic`: a background thread's panic no longer ends the
//! thread and leaves writers waiting for good on work no thread would do,
//! and an inline one stops writes before it unwinds into the caller. Reads
//! go on, the close returns the stop, and a reopen holds every
//! acknowledged write.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use crate::{Db, Error, Options, StopCause, SyncMode};

fn options(background_work: bool) -> Options {
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 4,
        background_work,
        ..Options::default()
    }
}

/// Scattered keys: every L0 table meets the others, so compactions merge.
fn key(i: u64) -> Vec<u8> {
    format!("key{:010}", i.wrapping_mul(2_654_435_761) % 4_294_967_291).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("{i:064}").into_bytes()
}

fn make_compactions_panic(db: &Db) {
    db.inner
        .merge_pause
        .set(Some(Arc::new(|| panic!("injected compaction panic"))));
}

/// Every key written reads back after a reopen, and the store takes writes.
fn reopen_holds(dir: &std::path::Path, written: u64) {
    let db = Db::open(dir, options(false)).unwrap();
    for i in 0..written {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}

#[test]
fn a_panicking_background_compaction_stops_writes_instead_of_hanging_them() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options(true)).unwrap());
    make_compactions_panic(&db);
    let (done, outcome) = mpsc::channel();
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut written = 0;
            let err = loop {
                if written == 200_000 {
                    break None;
                }
                match db.put(&key(written), &value(written)) {
                    Ok(()) => written += 1,
                    Err(e) => break Some(e),
                }
            };
            done.send((written, err)).unwrap();
        })
    };
    let (written, err) = outcome
        .recv_timeout(Duration::from_secs(120))
        .expect("writes hung behind the panicked compaction");
    writer.join().unwrap();
    let stop = match err {
        Some(Error::WritesStopped(stop)) => stop,
        other => panic!("after {written} puts: {other:?}"),
    };
    assert_eq!(stop.cause(), StopCause::Panic, "{stop}");
    assert!(
        stop.message().contains("injected compaction panic"),
        "{stop}"
    );
    // Reads go on.
    for i in (0..written).step_by(13) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    let db = Arc::into_inner(db).unwrap();
    match db.close() {
        Err(Error::WritesStopped(s)) => assert_eq!(s, stop),
        other => panic!("close: {other:?}"),
    }
    reopen_holds(dir.path(), written);
}

#[test]
fn a_panic_in_inline_work_stops_writes_before_it_reaches_the_caller() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(false)).unwrap();
    make_compactions_panic(&db);
    let mut written = 0;
    let panicked = loop {
        assert!(written < 200_000, "no compaction ran");
        let put = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            db.put(&key(written), &value(written))
        }));
        match put {
            Ok(Ok(())) => written += 1,
            Ok(Err(e)) => panic!("after {written} puts: {e}"),
            // The put itself was applied before its inline work panicked.
            Err(_) => break written + 1,
        }
    };
    let stop = match db.put(b"next", b"put") {
        Err(Error::WritesStopped(stop)) => stop,
        other => panic!("{other:?}"),
    };
    assert_eq!(stop.cause(), StopCause::Panic, "{stop}");
    assert_eq!(stop.operation(), "inline flush or compaction");
    assert_eq!(db.get(&key(0)).unwrap(), Some(value(0)));
    assert!(matches!(db.close(), Err(Error::WritesStopped(s)) if s == stop));
    reopen_holds(dir.path(), panicked);
}
