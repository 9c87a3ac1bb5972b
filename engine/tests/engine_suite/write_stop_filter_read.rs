//! Under `CorruptFilterPolicy::Fail`, a flushed table whose filter block
//! cannot be *read* (the OS call fails: EIO) is an I/O failure, not damage:
//! the flush's error and the `WriteStop` every later write is refused with
//! keep the read's kind (`io_kind`) and do not say corruption, so a caller
//! deciding between "retry or replace the disk" and "repair the store"
//! decides right. No byte of the table is damaged: the reopened store reads
//! it, filter included, and holds every acknowledged write.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bloomlsm::fs::{FileSystem, FsResult, RealFs};
use bloomlsm::sstable::RandomAccessFile;
use bloomlsm::{CorruptFilterPolicy, Db, Error, Options, SyncMode};

use common::real_fs_methods::real_fs_methods;
use common::{key, scratch_dir, value};

/// EIO, as a failing disk returns it.
const EIO: i32 = 5;

/// `RealFs`, except that once armed, the next table file opened for reads
/// fails its fourth read: `Table::open_at` reads the footer, the
/// properties block, the index block, then the filter block.
#[derive(Debug, Default)]
struct FilterReadFails {
    armed: AtomicBool,
}

#[derive(Debug)]
struct FailsFourthRead {
    inner: Arc<dyn RandomAccessFile>,
    reads: AtomicUsize,
}

impl RandomAccessFile for FailsFourthRead {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.reads.fetch_add(1, Ordering::SeqCst) == 3 {
            return Err(io::Error::from_raw_os_error(EIO));
        }
        self.inner.read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for FilterReadFails {
    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        let inner = RealFs.open_read(path)?;
        let table = path.extension().is_some_and(|x| x == "sst");
        if table && self.armed.swap(false, Ordering::SeqCst) {
            return Ok(Arc::new(FailsFourthRead {
                inner,
                reads: AtomicUsize::new(0),
            }));
        }
        Ok(inner)
    }
    real_fs_methods!(create append_at overwrite open_read_direct read_all rename remove list
        create_dir_all remove_dir sync_dir exists lock lock_shared);
}

fn options() -> Options {
    Options {
        sync: SyncMode::Always,
        on_corrupt_filter: CorruptFilterPolicy::Fail,
        background_work: false,
        ..Options::default()
    }
}

#[test]
fn a_failed_filter_read_stops_writes_as_io_not_corruption() {
    let dir = scratch_dir();
    let fs = Arc::new(FilterReadFails::default());
    let db = Db::open_with_fs(dir.path(), options(), Arc::clone(&fs) as _).unwrap();
    for i in 0..100 {
        db.put(&key(i), &value(i)).unwrap();
    }
    fs.armed.store(true, Ordering::SeqCst);
    let failed = db.flush().unwrap_err();
    assert!(!fs.armed.load(Ordering::SeqCst), "no table was opened");
    // The message names the file and what could not be read there (the
    // filter block and its offset), as it did before the OS number was
    // kept: "I/O error on <table>: <errno text>" alone does not say which
    // read of the table failed.
    let text = failed.to_string();
    assert!(text.contains(".sst"), "{text}");
    assert!(text.contains("filter block at offset"), "{text}");
    let eio = io::Error::from_raw_os_error(EIO).kind();
    assert!(!failed.is_corruption(), "an EIO is not damage: {failed}");
    assert_eq!(failed.io_kind(), Some(eio), "{failed}");
    // EIO has no `ErrorKind` of its own: only its number tells it apart.
    assert_eq!(failed.raw_os_error(), Some(EIO), "{failed:?}");

    let stop = match db.put(b"after", b"failure") {
        Err(Error::WritesStopped(stop)) => stop,
        other => panic!("expected WritesStopped, got {other:?}"),
    };
    assert!(!stop.is_corruption(), "{stop:?}");
    assert_eq!(stop.io_kind(), Some(eio), "{stop:?}");
    assert_eq!(stop.raw_os_error(), Some(EIO), "{stop:?}");
    assert!(matches!(db.close(), Err(Error::WritesStopped(s)) if s == stop));

    // Nothing on disk was damaged: the same policy opens the store, with
    // every acknowledged write.
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..100 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.close().unwrap();
}
