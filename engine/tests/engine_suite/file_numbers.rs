//! File numbers stay readable: a stray table or WAL numbered past
//! `MAX_OPEN_FILE_NUMBER` is refused at open with a typed error naming it
//! (before, a store opened with one wrote a manifest whose next file
//! number its next open refused as damage, or wrapped to 0 in release
//! builds), and the store opens again, everything in it, once the file is
//! gone. Below the limit the store opens, numbers its new files above the
//! stray one, and reopens.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;

use bloomlsm::{Db, Error, MAX_OPEN_FILE_NUMBER, Options};

fn options() -> Options {
    Options {
        memtable_bytes: 4 << 10,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A store of 300 keys over several tables and a WAL, closed.
fn store(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..300 {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
    }
    db.close().unwrap();
}

/// [`store`], then an orphan table numbered `stray` (no manifest names it:
/// deleted at open, but its number is not handed out again), then the
/// store opened.
fn open_past_a_stray_orphan(dir: &Path, stray: u64) -> Db {
    store(dir);
    std::fs::write(dir.join(format!("{stray}.sst")), b"orphan").unwrap();
    Db::open(dir, options()).unwrap()
}

fn all_there(db: &Db) {
    for i in 0..300 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(format!("v{i}").into_bytes()),
            "key {i}"
        );
    }
}

fn numbers(dir: &Path) -> Vec<u64> {
    let mut n: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let stem = name
                .strip_suffix(".sst")
                .or_else(|| name.strip_suffix(".wal"))?;
            stem.parse().ok()
        })
        .collect();
    n.sort_unstable();
    n
}

#[test]
fn a_stray_file_numbered_near_the_end_is_refused_by_name() {
    for (number, ext) in [
        (u64::MAX, "sst"),
        (u64::MAX, "wal"),
        (MAX_OPEN_FILE_NUMBER, "sst"),
        (1 << 62, "wal"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path());
        let stray = dir.path().join(format!("{number}.{ext}"));
        std::fs::write(&stray, b"not a store file").unwrap();
        match Db::open(dir.path(), options()) {
            Err(Error::FileNumbersExhausted { path, number: n }) => {
                assert_eq!((path.as_path(), n), (stray.as_path(), number));
            }
            other => panic!("{number}.{ext}: expected FileNumbersExhausted, got {other:?}"),
        }
        // Nothing was lost, and the store opens once the file is gone.
        assert!(stray.exists(), "the refused open removed {stray:?}");
        std::fs::remove_file(&stray).unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        all_there(&db);
        db.close().unwrap();
    }
}

#[test]
fn below_the_limit_new_files_are_numbered_above_a_stray_one() {
    let dir = tempfile::tempdir().unwrap();
    // Room for the files this test writes (a few dozen), not for 2^32.
    let stray = MAX_OPEN_FILE_NUMBER - 10_000;
    let db = open_past_a_stray_orphan(dir.path(), stray);
    all_there(&db);
    for i in 300..600 {
        db.put(&key(i), b"later").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let high: Vec<u64> = numbers(dir.path())
        .into_iter()
        .filter(|&n| n > 1 << 40)
        .collect();
    assert!(!high.is_empty(), "no file numbered past the stray one");
    assert!(high.iter().all(|&n| n > stray), "{high:?}");
    // Reopened, it finds every key, the new ones in files of high numbers.
    let db = Db::open(dir.path(), options()).unwrap();
    all_there(&db);
    for i in 300..600 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"later".to_vec()), "key {i}");
    }
    db.close().unwrap();
}

#[test]
fn another_spelling_of_a_file_number_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path());
    let live = numbers(dir.path());
    let (wal, table) = (live[live.len() - 1], live[0]);
    // Spellings recovery would read, replay or delete by number as if they
    // were the store's own files (the live WAL's and a live table's numbers
    // among them).
    let strays = [
        format!("+{wal:06}.wal"),
        format!("0{wal:06}.wal"),
        format!("{:07}.wal", wal + 1),
        format!("0{table:06}.sst"),
        format!("+{:06}.sst", wal + 2),
    ];
    for s in &strays {
        std::fs::write(dir.path().join(s), format!("stray {s}")).unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    all_there(&db);
    db.put(&key(1), b"new").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    for s in &strays {
        let bytes = std::fs::read(dir.path().join(s)).unwrap();
        assert_eq!(bytes, format!("stray {s}").into_bytes(), "{s} changed");
    }
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"new".to_vec()));
    db.close().unwrap();
}

#[test]
fn a_stray_tmp_file_is_left_alone() {
    // The store writes one temporary name, `MANIFEST.tmp`; any other name
    // ending in `.tmp` is someone else's file.
    let dir = tempfile::tempdir().unwrap();
    store(dir.path());
    let strays = ["notes.tmp", "000007.sst.tmp", "backup.wal.tmp"];
    for s in strays {
        std::fs::write(dir.path().join(s), s).unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    all_there(&db);
    db.close().unwrap();
    for s in strays {
        let bytes = std::fs::read(dir.path().join(s));
        assert_eq!(bytes.ok(), Some(s.as_bytes().to_vec()), "{s} was removed");
    }
}

#[test]
fn a_directory_holding_only_a_stray_tmp_file_is_not_a_store() {
    // Without a manifest, anything but LOCK or the store's own temporary
    // manifest means the directory is someone else's: the open must not
    // create a store there (and then delete the file as a temporary).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("draft.tmp"), b"someone's work").unwrap();
    let got = Db::open(dir.path(), options());
    let kept = std::fs::read(dir.path().join("draft.tmp")).ok();
    assert!(
        matches!(got, Err(Error::NotAStore { .. })),
        "expected NotAStore, got {:?}",
        got.map(|_| "a store")
    );
    assert_eq!(kept, Some(b"someone's work".to_vec()));
}

#[test]
fn a_store_opened_below_the_limit_opens_again_after_its_own_writes() {
    // A stray orphan just under the limit is accepted (the store opens and
    // numbers its files above it, deleting the orphan). The files the
    // store then writes itself must never make its next open refuse it:
    // the stray is gone, and nothing else can be removed to open it.
    let dir = tempfile::tempdir().unwrap();
    let stray = MAX_OPEN_FILE_NUMBER - 3;
    let db = open_past_a_stray_orphan(dir.path(), stray);
    for i in 300..600 {
        db.put(&key(i), b"later").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    assert!(!dir.path().join(format!("{stray}.sst")).exists());
    let reopened = Db::open(dir.path(), options());
    let db = reopened.unwrap_or_else(|e| panic!("the store refused its own files: {e}"));
    all_there(&db);
    db.close().unwrap();
}
