//! A reader takes its view first and its sequence after (a flush
//! and a compaction between the two used to drop the version the reader's
//! sequence needed, so `get` said "absent" for a key that never was).
//! A test-only pause point stops a reader between the two steps while the
//! tree changes under it.

use std::sync::Arc;
use std::time::Duration;

use crate::{Db, Options};

fn options() -> Options {
    Options {
        background_work: false,
        ..Options::default()
    }
}

/// Puts `k = v1` in a table, so that a newer version and a compaction can
/// drop it.
fn store_with_v1() -> (tempfile::TempDir, Arc<Db>) {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    db.put(b"k", b"v1").unwrap();
    db.flush().unwrap();
    (dir, db)
}

/// Writes `k = v2` and merges everything: `v1`, shadowed and protected by
/// no snapshot, is gone from the new tables.
fn overwrite_and_compact(db: &Db) {
    db.put(b"k", b"v2").unwrap();
    db.compact().unwrap();
}

fn is_v1_or_v2(value: &Option<Vec<u8>>) -> bool {
    matches!(value.as_deref(), Some(b"v1") | Some(b"v2"))
}

#[test]
fn a_get_paused_between_view_and_sequence_still_finds_the_key() {
    let (_dir, db) = store_with_v1();
    let (paused, resume) = db.inner.read_pause.arm_once();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.get(b"k").unwrap())
    };
    paused.recv().unwrap();
    overwrite_and_compact(&db);
    resume.send(()).unwrap();
    let value = reader.join().unwrap();
    assert!(is_v1_or_v2(&value), "got {value:?}");
}

#[test]
fn a_scan_paused_between_view_and_sequence_still_finds_the_key() {
    let (_dir, db) = store_with_v1();
    let (paused, resume) = db.inner.read_pause.arm_once();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            db.scan::<&[u8], _>(..)
                .unwrap()
                .map(|r| r.unwrap().1)
                .collect::<Vec<_>>()
        })
    };
    paused.recv().unwrap();
    overwrite_and_compact(&db);
    resume.send(()).unwrap();
    let values = reader.join().unwrap();
    assert_eq!(values.len(), 1, "got {values:?}");
    assert!(is_v1_or_v2(&values.into_iter().next()), "the key vanished");
}

#[test]
fn a_snapshot_taken_during_a_compaction_keeps_what_it_sees() {
    let (_dir, db) = store_with_v1();
    let (paused, resume) = db.inner.read_pause.arm_once();
    let taker = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.snapshot())
    };
    paused.recv().unwrap();
    db.put(b"k", b"v2").unwrap();
    db.flush().unwrap();
    // The compaction may have to wait for the snapshot being registered:
    // run it beside, and let the snapshot go on after a moment.
    let compactor = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.compact().unwrap())
    };
    std::thread::sleep(Duration::from_millis(100));
    resume.send(()).unwrap();
    let snapshot = taker.join().unwrap();
    compactor.join().unwrap();
    let value = snapshot.get(b"k").unwrap();
    assert!(
        is_v1_or_v2(&value),
        "snapshot at {} got {value:?}",
        snapshot.sequence()
    );
}

/// A snapshot's get that took its view and passed its `closed` check
/// before a close, then reads on while the close syncs, seals and empties
/// the view: it answers from the view it took (its tables and memtable
/// kept alive by it), never from the emptied one; the next read is
/// `Closed`. For a key in a table and for one in the memtable.
#[test]
fn a_get_paused_across_a_close_answers_from_its_view() {
    for (key, want) in [(&b"k"[..], &b"v1"[..]), (b"m", b"in memory")] {
        let (_dir, db) = store_with_v1();
        db.put(b"m", b"in memory").unwrap();
        let snapshot = Arc::new(db.snapshot());
        let (paused, resume) = db.inner.read_pause.arm_once();
        let reader = {
            let snapshot = Arc::clone(&snapshot);
            std::thread::spawn(move || snapshot.get(key))
        };
        paused.recv().unwrap();
        // The close's own steps, the `Db` kept: sync, seal, empty view.
        db.inner.shutdown().unwrap();
        let emptied = db.inner.current.load_full();
        assert!(emptied.mem.is_empty() && emptied.version.levels[0].is_empty());
        resume.send(()).unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got.unwrap().as_deref(), Some(want), "{key:?}");
        assert!(matches!(snapshot.get(key), Err(crate::Error::Closed)));
        drop(Arc::into_inner(db).unwrap());
    }
}
