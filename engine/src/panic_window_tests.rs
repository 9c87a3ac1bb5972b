//! A panic caught by `stopping_writes_on_error` (or the background loop)
//! has already released the locks it held when writes stop: another
//! thread can start work in between. That is harmless only if what the
//! panic cut short left nothing on disk that the view does not show. An
//! install that panics after its manifest write (durable) and before its
//! view swap leaves exactly that: the manifest names each table rebuilt in
//! place at its new, longer size while the view still holds the table as
//! it was. A filter rebuild started in that window rebuilds the table from
//! the view: it cuts the file back to the old size and appends its own
//! filter, so the manifest's size no longer ends at a footer; if that
//! rebuild never installs (the same bug panics again, an error, a crash),
//! the store does not reopen. Invariant: once any manifest written by a
//! job is durable, writes stop before any other job can start.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{Db, Error, FilterPolicy, Options, SyncMode};

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        l1_bytes: 16 << 10,
        target_file_bytes: 8 << 10,
        block_size: 1024,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i * 7919 % 1000).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("{i:048}").into_bytes()
}

#[test]
fn a_rebuild_in_the_window_after_a_panicked_install_keeps_the_store_openable() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    for i in 0..1000 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.wait_for_background_work().unwrap();
    assert!(db.inner.current.load().version.all_metas().len() >= 3);

    // The first rebuild's install panics once its manifest is durable, and
    // its caller stops in the window (locks released, writes not stopped).
    let fired = Arc::new(AtomicBool::new(false));
    let once = Arc::clone(&fired);
    db.inner.after_manifest_pause.set(Some(Arc::new(move || {
        if !once.swap(true, Ordering::SeqCst) {
            panic!("injected install panic");
        }
    })));
    let (paused, resume) = db.inner.unwound_pause.arm_once();
    let first = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 5.0 }))
    };
    paused
        .recv_timeout(Duration::from_secs(60))
        .expect("the first rebuild never reached the window");
    assert!(fired.load(Ordering::SeqCst));
    // Rebuilt in place: the files grew past the sizes the view knows.
    let grown = crate::test_model::tables_grown_in_place(&db, dir.path());
    assert!(grown > 0, "no table was rebuilt in place");

    // In the window: a second rebuild, which the same bug makes panic
    // before its install. It must be refused (writes stopped), or at
    // least leave the durable manifest true.
    db.inner
        .rebuild_pause
        .set(Some(Arc::new(|| panic!("injected rebuild panic"))));
    let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 16.0 })
    }));
    match second {
        Err(_) | Ok(Err(Error::WritesStopped(_))) => {}
        Ok(other) => panic!("second rebuild: {other:?}"),
    }
    resume.send(()).unwrap();
    assert!(first.join().is_err(), "the first rebuild panics");
    db.inner.after_manifest_pause.set(None);
    db.inner.rebuild_pause.set(None);
    let db = Arc::into_inner(db).unwrap();
    assert!(matches!(db.close(), Err(Error::WritesStopped(_))));

    // Every acknowledged write, after a reopen.
    let db = Db::open(dir.path(), options()).expect("the store reopens");
    for i in 0..1000 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}
