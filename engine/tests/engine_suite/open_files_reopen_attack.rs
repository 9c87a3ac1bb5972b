//! `Options::max_open_files` under failing opens and reads of table files.
//!
//! Invariants checked:
//! - A table whose open fails (a flush's output whose first reads fail)
//!   is removed, and no descriptor on it stays behind in the set of open
//!   files: without the bound the failed open drops its file, and with it
//!   a deleted file must not stay open (its space pinned, a place of the
//!   bound taken) for the life of the store.
//! - A table file that cannot be opened again once the bound closed it
//!   (`EMFILE`) fails a compaction with that I/O error naming the table;
//!   writes stop with that cause (`StopCause::Io`, `EMFILE`), reads of the
//!   table fail the same way (never a wrong answer or a panic), and once
//!   opens work again the store answers every acknowledged write, also
//!   after a reopen.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::fs::{AtPath, FileSystem, FsResult, RealFs};
use bloomlsm::sstable::RandomAccessFile;
use bloomlsm::{Db, Error, Options, StopCause, SyncMode};
use parking_lot::Mutex;

use common::real_fs_methods::real_fs_methods;
use common::{key, scratch_dir, value};

const EIO: i32 = 5;
const EMFILE: i32 = 24;

/// `RealFs`, except that table files opened for reads while
/// `fail_reads` is set fail every read with EIO, and the files of
/// `refused` cannot be opened for reads (EMFILE).
#[derive(Debug, Default)]
struct TableOpenFaults {
    fail_reads: AtomicBool,
    refused: Mutex<HashSet<PathBuf>>,
}

#[derive(Debug)]
struct FailingReads {
    inner: Arc<dyn RandomAccessFile>,
}

impl RandomAccessFile for FailingReads {
    fn read_exact_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(EIO))
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for TableOpenFaults {
    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        if self.refused.lock().contains(path) {
            return Err(io::Error::from_raw_os_error(EMFILE)).at(path);
        }
        let inner = RealFs.open_read(path)?;
        let table = path.extension().is_some_and(|x| x == "sst");
        if table && self.fail_reads.load(Ordering::SeqCst) {
            return Ok(Arc::new(FailingReads { inner }));
        }
        Ok(inner)
    }
    real_fs_methods!(create append_at overwrite open_read_direct read_all rename remove list
        create_dir_all remove_dir sync_dir exists lock lock_shared);
}

fn options(max_open_files: Option<usize>) -> Options {
    Options {
        sync: SyncMode::Always,
        background_work: false,
        block_cache_bytes: 0,
        max_open_files,
        ..Options::default()
    }
}

/// Descriptors this process has open on table files in `dir` (a deleted
/// one reads "<path> (deleted)").
fn table_descriptors(dir: &Path) -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .map(|target| target.display().to_string())
        .filter(|target| target.contains(".sst"))
        .collect()
}

fn table_paths(dir: &Path) -> HashSet<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect()
}

#[test]
fn a_table_whose_open_fails_leaves_no_descriptor_behind() {
    for max_open_files in [None, Some(4)] {
        let dir = scratch_dir();
        let fs = Arc::new(TableOpenFaults::default());
        let db = Db::open_with_fs(dir.path(), options(max_open_files), fs.clone()).unwrap();
        for i in 0..50 {
            db.put(&key(i), &value(i)).unwrap();
        }
        fs.fail_reads.store(true, Ordering::SeqCst);
        let e = db.flush().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EIO), "{max_open_files:?}: {e}");
        fs.fail_reads.store(false, Ordering::SeqCst);
        assert!(
            table_paths(dir.path()).is_empty(),
            "{max_open_files:?}: the failed flush's table is removed"
        );
        // No table is live: nothing may hold a table file open.
        let open = table_descriptors(dir.path());
        assert!(open.is_empty(), "{max_open_files:?}: still open: {open:?}");
        let stats = db.stats();
        assert_eq!(
            stats.open_table_files,
            max_open_files.map(|_| 0),
            "{max_open_files:?}"
        );
        // Every acknowledged write is still answered (from the memtable).
        for i in 0..50 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
        }
        drop(db);
    }
}

#[test]
fn a_failed_reopen_in_a_compaction_stops_writes_as_io_and_loses_nothing() {
    let dir = scratch_dir();
    let fs = Arc::new(TableOpenFaults::default());
    let db = Db::open_with_fs(dir.path(), options(Some(1)), fs.clone()).unwrap();
    for part in 0..3u64 {
        for i in part * 100..part * 100 + 100 {
            db.put(&key(i), &value(i)).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(table_paths(dir.path()).len(), 3);
    // The tables written so far cannot be opened again: the set holds one
    // of them at most, so the compaction must reopen one.
    *fs.refused.lock() = table_paths(dir.path());
    // Acknowledged and only in the memtable and WAL: the compaction's
    // flush writes them to a new table, which opens.
    for i in 300..350 {
        db.put(&key(i), &value(i)).unwrap();
    }
    let e = db.compact().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(EMFILE), "{e}");
    // The error names the table that could not be opened again.
    let named = match &e {
        Error::Io { path, .. } | Error::Table(bloomlsm::sstable::Error::Io { path, .. }) => path,
        other => panic!("not an I/O error naming a table: {other}"),
    };
    assert!(
        fs.refused.lock().contains(named),
        "names {} of {:?}",
        named.display(),
        fs.refused.lock()
    );
    match db.put(b"after", b"stop") {
        Err(Error::WritesStopped(stop)) => {
            assert_eq!(stop.raw_os_error(), Some(EMFILE), "{stop}");
            assert!(matches!(stop.cause(), StopCause::Io { .. }), "{stop}");
        }
        other => panic!("writes not stopped: {other:?}"),
    }
    // Reads of a table that cannot be reopened fail as that error; none
    // answers wrong.
    for i in 0..350 {
        match db.get(&key(i)) {
            Ok(v) => assert_eq!(v, Some(value(i)), "key {i}"),
            Err(e) => assert_eq!(e.raw_os_error(), Some(EMFILE), "key {i}: {e}"),
        }
    }
    fs.refused.lock().clear();
    for i in 0..350 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    let _ = db.close();
    assert!(table_descriptors(dir.path()).is_empty());
    let db = Db::open(dir.path(), options(Some(1))).unwrap();
    for i in 0..350 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(value(i)),
            "reopened, key {i}"
        );
    }
    assert_eq!(db.get(b"after").unwrap(), None);
    db.compact().unwrap();
    for i in 0..350 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(value(i)),
            "compacted, key {i}"
        );
    }
    db.close().unwrap();
}
