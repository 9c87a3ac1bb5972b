//! `Options::max_open_files`: a table's file closed by the bound while the
//! table is being opened (between the reads of its index and its filter)
//! and not reopened (`EMFILE`: the process is at its descriptor limit, the
//! case the bound is for).
//!
//! Without the bound every read of a table's open goes to the one
//! descriptor it opened, so the open succeeds whole or fails. With it, the
//! filter's read may need a reopen; a failed reopen must not be taken for a
//! damaged filter (under the default `CorruptFilterPolicy::Ignore` the
//! table would live without its filter for good, and
//! `Stats::tables_without_usable_filter` would report damage): the open
//! fails as the I/O error it is, or the filter is read.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bloomlsm::fs::{AtPath, FileSystem, FsResult, RealFs};
use bloomlsm::sstable::RandomAccessFile;
use bloomlsm::{Db, Options, SyncMode};
use parking_lot::Mutex;

use common::real_fs_methods::real_fs_methods;
use common::{key, scratch_dir, value};

const EMFILE: i32 = 24;

type Hook = Arc<dyn Fn() + Send + Sync>;

/// `RealFs`, except that once armed with a hook, the next table file
/// opened for reads (the new table of a flush) runs the hook after its
/// third read through any of its descriptors (the index, after the footer
/// and the properties), and once `refuse` is set that file cannot be
/// opened again (EMFILE).
#[derive(Default)]
struct EvictDuringOpen {
    hook: Mutex<Option<Hook>>,
    watched: Mutex<Option<PathBuf>>,
    reads: Arc<AtomicUsize>,
    refuse: AtomicBool,
    reopens_refused: AtomicUsize,
}

impl std::fmt::Debug for EvictDuringOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvictDuringOpen").finish_non_exhaustive()
    }
}

struct HookAfterThirdRead {
    inner: Arc<dyn RandomAccessFile>,
    reads: Arc<AtomicUsize>,
    hook: Hook,
}

impl std::fmt::Debug for HookAfterThirdRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookAfterThirdRead").finish_non_exhaustive()
    }
}

impl RandomAccessFile for HookAfterThirdRead {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)?;
        if self.reads.fetch_add(1, Ordering::SeqCst) == 2 {
            (self.hook)();
        }
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for EvictDuringOpen {
    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        let table = path.extension().is_some_and(|x| x == "sst");
        if table && self.hook.lock().is_some() && self.watched.lock().is_none() {
            *self.watched.lock() = Some(path.to_path_buf());
        }
        if self.watched.lock().as_deref() == Some(path) {
            if self.refuse.load(Ordering::SeqCst) {
                self.reopens_refused.fetch_add(1, Ordering::SeqCst);
                return Err(io::Error::from_raw_os_error(EMFILE)).at(path);
            }
            let hook = self.hook.lock().clone().unwrap();
            return Ok(Arc::new(HookAfterThirdRead {
                inner: RealFs.open_read(path)?,
                reads: Arc::clone(&self.reads),
                hook,
            }));
        }
        RealFs.open_read(path)
    }
    real_fs_methods!(create append_at overwrite open_read_direct read_all rename remove list
        create_dir_all remove_dir sync_dir exists lock lock_shared);
}

#[test]
fn a_filter_whose_reopen_fails_mid_open_is_not_taken_for_damage() {
    let dir = scratch_dir();
    let fs = Arc::new(EvictDuringOpen::default());
    let options = Options {
        sync: SyncMode::Always,
        background_work: false,
        block_cache_bytes: 0,
        max_open_files: Some(1),
        ..Options::default()
    };
    let db = Arc::new(Db::open_with_fs(dir.path(), options, fs.clone()).unwrap());
    // Two older tables, whose reads take the set's one place.
    for part in 0..2u64 {
        for i in part * 100..part * 100 + 100 {
            db.put(&key(i), &value(i)).unwrap();
        }
        db.flush().unwrap();
    }
    for i in 200..300 {
        db.put(&key(i), &value(i)).unwrap();
    }
    // While the new table is opened, after its index is read: reads of
    // the older tables until the set has let go of the new table's file
    // (as reads on other threads would).
    let weak = Arc::downgrade(&db);
    let fs_in_hook = Arc::clone(&fs);
    *fs.hook.lock() = Some(Arc::new(move || {
        let db = weak.upgrade().unwrap();
        // Reads of an older table until one is answered without opening
        // its file: the set's one place is that table's, not the new one's.
        for round in 0..1000u64 {
            let i = (round * 37) % 100;
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
            let opens = db.stats().table_file_opens;
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
            if db.stats().table_file_opens == opens {
                fs_in_hook.refuse.store(true, Ordering::SeqCst);
                return;
            }
        }
        panic!("the set never let go of the new table's file");
    }));
    let flushed = db.flush();
    // The set let go of the new table's file after its index was read
    // (before the fix its filter read reopened the file, and was refused).
    assert!(fs.refuse.load(Ordering::SeqCst), "the hook ran");
    let stats = db.stats();
    println!(
        "flush: {flushed:?}; reopens refused {}; without usable filter {}",
        fs.reopens_refused.load(Ordering::SeqCst),
        stats.total.tables_without_usable_filter
    );
    match flushed {
        // Refused as the I/O error it is.
        Err(e) => assert_eq!(e.raw_os_error(), Some(EMFILE), "{e}"),
        // Or opened whole: no table lost its filter to a failed reopen.
        Ok(()) => assert_eq!(
            stats.total.tables_without_usable_filter, 0,
            "a table took a failed reopen (EMFILE) for a damaged filter"
        ),
    }
}
