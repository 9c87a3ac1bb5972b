//! A write checks that writes go on under the write lock, appends, and
//! then, its memtable full, freezes it and creates a new WAL, all under
//! that lock; `Db::flush` checks again under it and rotates too. A
//! background flush or compaction that fails holds no such lock: its stop
//! could land between that check and the rotation, which then created a
//! WAL after `WritesStopped` was visible to every caller (and `flush`
//! returned `WritesStopped` having created it). So a stop made outside
//! the write path takes the write lock (`DbInner::stop_writes_outside_writes`):
//! it lands before such a check or after the rotation, never in between.
//! The same holds for an install that panics (a bug): its stop, made
//! before the install lock is released, takes the write lock too.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::time::Duration;

use crate::fs::fault::FaultFs;
use crate::{Db, Error, Options, SyncMode};

fn options(sync: SyncMode) -> Options {
    Options {
        memtable_bytes: 4 << 10,
        target_file_bytes: 4 << 10,
        block_size: 256,
        l1_bytes: 16 << 10,
        sync,
        background_work: true,
        ..Options::default()
    }
}

/// Who is held under the write lock, checked, before its rotation.
#[derive(Clone, Copy, Debug)]
enum Holder {
    /// A write that filled the memtable, after its insert.
    Write,
    /// `Db::flush`, after its check under the lock.
    Flush,
}

/// How the held background flush fails.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// Its first file operation fails.
    Error,
    /// Its install panics once its manifest is durable.
    InstallPanic,
}

fn stopped(db: &Db) -> bool {
    db.inner.write_error.lock().is_some()
}

/// A background flush holding a frozen memtable fails (`failure`) while `holder` is
/// paused under the write lock, past its check, before its rotation.
/// Either the stop becomes visible while the holder is paused (the holder
/// must then create no file after it), or it waits for the write lock
/// (the fixed engine; no pause point can say the stop is waiting, so the
/// test waits up to 2 s for it): the rotation then comes before the stop,
/// and nothing after the stop changes a file.
fn run(holder: Holder, failure: Failure, sync: SyncMode) {
    let case = format!("{holder:?} {failure:?} {sync:?}");
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Arc::new(Db::open_with_fs(dir.path(), options(sync), Arc::new(fs.clone())).unwrap());
    for i in 0..5u32 {
        db.put(format!("key{i:04}").as_bytes(), b"value").unwrap();
    }
    // A write fills the memtable: the background flush takes the frozen
    // one and is held after its check, before its table.
    let (flush_paused, resume_flush) = db.inner.flush_pause.arm_once();
    db.put(b"big0", &[7u8; 4 << 10]).unwrap();
    flush_paused.recv().unwrap();
    db.put(b"small", b"in the new memtable").unwrap();

    let (held, resume_held) = match holder {
        Holder::Write => db.inner.insert_pause.arm_once(),
        Holder::Flush => db.inner.flush_locked_pause.arm_once(),
    };
    let worker = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || match holder {
            Holder::Write => db.put(b"big1", &[8u8; 4 << 10]),
            Holder::Flush => db.flush(),
        })
    };
    held.recv().unwrap();

    match failure {
        // The held background flush fails at its first file operation.
        Failure::Error => fs.fail_from_op(fs.ops()),
        Failure::InstallPanic => {
            let armed = std::sync::atomic::AtomicBool::new(true);
            db.inner.after_manifest_pause.set(Some(Arc::new(move || {
                if armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("injected install panic");
                }
            })));
        }
    }
    resume_flush.send(()).unwrap();
    let mut visible = false;
    for _ in 0..2000 {
        if stopped(&db) {
            visible = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    fs.heal();
    if visible {
        // Visible to every caller while the holder is held past its
        // check: from here on no file may change.
        assert!(
            matches!(db.put(b"probe", b"x"), Err(Error::WritesStopped(_))),
            "{case}: the stop is not visible"
        );
        let ops_at_stop = fs.ops();
        resume_held.send(()).unwrap();
        let result = worker.join().unwrap();
        assert_eq!(
            fs.ops(),
            ops_at_stop,
            "{case}: files changed after the stop was visible ({result:?})"
        );
    } else {
        // The stop waits for the write lock: the rotation comes first.
        resume_held.send(()).unwrap();
        let result = worker.join().unwrap();
        if let Holder::Write = holder {
            result.unwrap();
        }
        while !stopped(&db) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let ops_at_stop = fs.ops();
        assert!(matches!(db.flush(), Err(Error::WritesStopped(_))), "{case}");
        assert!(
            matches!(db.put(b"probe", b"x"), Err(Error::WritesStopped(_))),
            "{case}"
        );
        assert_eq!(
            fs.ops(),
            ops_at_stop,
            "{case}: a file changed after the stop"
        );
    }
    assert_eq!(
        db.get(b"key0000").unwrap().as_deref(),
        Some(&b"value"[..]),
        "{case}"
    );
    assert_eq!(
        db.get(b"big0").unwrap().map(|v| v.len()),
        Some(4 << 10),
        "{case}"
    );
}

#[test]
fn a_background_stop_never_lands_between_a_writes_check_and_its_rotation() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        run(Holder::Write, Failure::Error, sync);
    }
}

#[test]
fn a_background_stop_never_lands_between_a_flushs_check_and_its_rotation() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        run(Holder::Flush, Failure::Error, sync);
    }
}

#[test]
fn an_install_panic_stop_never_lands_between_a_writes_check_and_its_rotation() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        run(Holder::Write, Failure::InstallPanic, sync);
    }
}

#[test]
fn an_install_panic_stop_never_lands_between_a_flushs_check_and_its_rotation() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        run(Holder::Flush, Failure::InstallPanic, sync);
    }
}
