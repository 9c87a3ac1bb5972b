//! Recovery, locking, bad input and concurrency of a store.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::{Db, Error, Options, SyncMode, WalCutCause};

#[test]
fn synced_writes_survive_drop_without_close() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        sync: SyncMode::Always,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        for i in 0..500u32 {
            db.put(&i.to_be_bytes(), b"x").unwrap();
        }
        std::mem::forget(db); // no close, no Drop: as if the process died
    }
    // The forgotten Db still holds the lock in this process; a child would
    // not, so release it by removing the lock file's holder: reopen through a
    // copy of the directory.
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    let db = Db::open(copy.path(), opts).unwrap();
    for i in 0..500u32 {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), Some(b"x".to_vec()));
    }
}

#[test]
fn torn_wal_tail_is_tolerated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..100u32 {
            db.put(&i.to_be_bytes(), b"value").unwrap();
        }
        db.close().unwrap();
    }
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .unwrap();
    // Tear the last write (as a crash mid-append would; the close marker
    // after it goes too).
    let mut bytes = std::fs::read(&wal).unwrap();
    let torn_len = common::close_marker_offset(&bytes) as u64 - 3;
    bytes.truncate(torn_len as usize);
    std::fs::write(&wal, &bytes).unwrap();
    // The close's header says the WAL ends with its marker: a torn end is
    // no crash's, and is refused (review rev6: a zeroed last page of a
    // closed WAL was taken for a torn tail and its writes dropped).
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Corruption { path, .. }) => assert_eq!(path, wal),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a closed WAL's torn end was taken for a torn tail"),
    }
    // Under the header a crash leaves (synced, not closed: the close never
    // ran, `engine/src/wal/header.rs`) it is a torn tail.
    common::as_if_never_closed(&mut bytes);
    std::fs::write(&wal, &bytes).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..99u32 {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), Some(b"value".to_vec()));
    }
    assert_eq!(db.get(&99u32.to_be_bytes()).unwrap(), None);
    // The open says what it dropped: the torn record's bytes. The header
    // says synced, so it is read strictly: a torn tail, and nothing else.
    let cut = db
        .stats()
        .wal_replay_cut
        .expect("the torn record was dropped");
    assert_eq!(cut.path, wal);
    assert_eq!(cut.cause, WalCutCause::TornTail);
    assert!(
        cut.offset < torn_len && cut.bytes_not_replayed == torn_len - cut.offset,
        "{cut:?}"
    );
    db.close().unwrap();
    // The next open replays whole WALs (the dropped bytes went with the
    // WAL the last open turned into a table).
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.stats().wal_replay_cut, None);
}

#[test]
fn second_open_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    db.close().unwrap();
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        max_key_bytes: 16,
        max_value_bytes: 32,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    assert!(matches!(db.put(b"", b"v"), Err(Error::InvalidKey { .. })));
    assert!(matches!(
        db.put(&[7u8; 17], b"v"),
        Err(Error::InvalidKey { .. })
    ));
    assert!(matches!(
        db.put(b"k", &[0u8; 33]),
        Err(Error::ValueTooLarge { .. })
    ));
    db.put(&[7u8; 16], &[1u8; 32]).unwrap();
    db.put(&[0xff, 0xfe, 0x00], b"non-utf8 key").unwrap();
    let mut b = bloomlsm::WriteBatch::new();
    b.put(b"ok", b"1").put(b"", b"2");
    assert!(db.write(b).is_err());
    assert_eq!(
        db.get(b"ok").unwrap(),
        None,
        "a refused batch writes nothing"
    );
    assert_eq!(
        db.get(&[0xff, 0xfe, 0x00]).unwrap(),
        Some(b"non-utf8 key".to_vec())
    );
}

#[test]
fn unrelated_directory_and_file_path_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::NotAStore { .. })
    ));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "a refused open adds no file (not even LOCK)"
    );
    let file = dir.path().join("notes.txt");
    assert!(Db::open(&file, Options::default()).is_err());
}

#[test]
fn readers_and_writers_run_concurrently_with_background_work() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        memtable_bytes: 32 << 10,
        l1_bytes: 128 << 10,
        target_file_bytes: 32 << 10,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let n = 20_000u64;
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for round in 0..3u64 {
                for i in 0..n {
                    db.put(
                        format!("k{i:06}").as_bytes(),
                        format!("{i}:{round}").as_bytes(),
                    )
                    .unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let db = Arc::clone(&db);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut checked = 0u64;
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    i = (i * 31 + 7) % n;
                    if let Some(v) = db.get(format!("k{i:06}").as_bytes()).unwrap() {
                        let v = String::from_utf8(v).unwrap();
                        assert!(
                            v.starts_with(&format!("{i}:")),
                            "key {i} has a value never written: {v}"
                        );
                    }
                    checked += 1;
                }
                checked
            })
        })
        .collect();
    writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let checked: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    db.wait_for_background_work().unwrap();
    for i in 0..n {
        assert_eq!(
            db.get(format!("k{i:06}").as_bytes()).unwrap(),
            Some(format!("{i}:2").into_bytes())
        );
    }
    let stats = db.stats();
    println!(
        "{checked} concurrent reads checked; {} flushes, {} compactions",
        stats.flushes, stats.compactions
    );
    assert!(stats.flushes > 0 && stats.compactions > 0);
}
