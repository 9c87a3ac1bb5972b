//! Another opener works on the store between an open's first look at the
//! directory and its taking of the lock (another process starting the
//! store, or closing it, in that window). The open must see the store as
//! it is once the lock is held: nothing another holder wrote may be lost.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::fs::{DirLock, FileSystem, FsResult, RealFs};
use bloomlsm::{Db, Options};
use bloomlsm_sstable::{RandomAccessFile, WritableFile};
use parking_lot::Mutex;

type Hook = Box<dyn FnOnce() + Send>;

/// The real file system, except that the first `lock` first runs a hook:
/// what another opener does while this open has not yet taken the lock.
struct BeforeLockFs {
    hook: Mutex<Option<Hook>>,
}

impl std::fmt::Debug for BeforeLockFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeLockFs")
    }
}

impl BeforeLockFs {
    fn new(hook: impl FnOnce() + Send + 'static) -> Arc<Self> {
        Arc::new(Self {
            hook: Mutex::new(Some(Box::new(hook))),
        })
    }
}

impl FileSystem for BeforeLockFs {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        RealFs.create(path)
    }
    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        RealFs.open_read(path)
    }
    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        RealFs.open_read_direct(path)
    }
    fn read_all(&self, path: &Path) -> FsResult<Vec<u8>> {
        RealFs.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> FsResult<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> FsResult<()> {
        RealFs.remove(path)
    }
    fn list(&self, dir: &Path) -> FsResult<Vec<String>> {
        RealFs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> FsResult<()> {
        RealFs.create_dir_all(dir)
    }
    fn remove_dir(&self, dir: &Path) -> FsResult<()> {
        RealFs.remove_dir(dir)
    }
    fn sync_dir(&self, dir: &Path) -> FsResult<()> {
        RealFs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }
    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        let hook = self.hook.lock().take();
        if let Some(hook) = hook {
            hook();
        }
        RealFs.lock(path)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Another opener's whole session: open, `n` writes from `first` (the
/// first half flushed to a table, the rest only in the WAL), close.
fn session(dir: PathBuf, first: u32, n: u32) -> impl FnOnce() + Send {
    move || {
        let db = Db::open(&dir, Options::default()).unwrap();
        for i in first..first + n / 2 {
            db.put(&key(i), b"v").unwrap();
        }
        db.flush().unwrap();
        for i in first + n / 2..first + n {
            db.put(&key(i), b"v").unwrap();
        }
        db.close().unwrap();
    }
}

fn assert_all(db: &Db, range: std::ops::Range<u32>, when: &str) {
    let missing: Vec<u32> = range
        .filter(|&i| db.get(&key(i)).unwrap().is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "{when}: {} keys lost, from {:?}",
        missing.len(),
        missing.first()
    );
}

/// Two processes start on a new store at once: the other creates it,
/// writes and closes while this open (which saw an empty directory) waits
/// for the lock. This open must not write a new store's manifest over it.
#[test]
fn a_store_created_while_an_open_waits_for_the_lock_is_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    let fs = BeforeLockFs::new(session(dir.clone(), 0, 200));
    let db = Db::open_with_fs(&dir, Options::default(), fs).unwrap();
    assert_all(&db, 0..200, "after the racing open");
    db.close().unwrap();
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_all(&db, 0..200, "after a reopen");
}

/// A rolling restart: the new process retries its open while the old one
/// runs; the old one reopens, writes and closes (its last writes in its
/// WAL) between the new open's listing and its lock. Those acknowledged
/// writes must be recovered.
#[test]
fn writes_of_a_session_between_listing_and_lock_are_recovered() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    session(dir.clone(), 0, 100)();
    let fs = BeforeLockFs::new(session(dir.clone(), 100, 100));
    let db = Db::open_with_fs(&dir, Options::default(), fs).unwrap();
    assert_all(&db, 0..200, "after the racing open");
    db.close().unwrap();
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_all(&db, 0..200, "after a reopen");
}
