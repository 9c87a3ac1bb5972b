//! A bound on the table files a store keeps open
//! (`Options::max_open_files`), as LevelDB's table cache bounds them: a
//! table's file is opened when a read needs it, and past the bound the
//! cache closes one (`quick_cache`'s CLOCK-Pro policy: it keeps the files
//! read most often, and a file read once may be closed right after). A table's index and filter stay in
//! memory either way (an absent get whose filter rules the table out never
//! opens it); only the descriptor comes and goes.
//!
//! Invariants:
//! - At most `max_open_files` files are held by the set; a file it has let
//!   go stays open only while a read that took it before is in flight.
//! - A table's file is deleted only when the last handle naming it drops
//!   (`version::TableFileLife`), which first takes it out of the set: a
//!   reader holding any handle can always open it again.
//! - Every open goes through the store's `FileSystem`, as the first one
//!   did, so fault injection and read-only stores see reopens too.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm_sstable::{RandomAccessFile, ReopenError};
use parking_lot::Mutex;
use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::{DefaultHashBuilder, OptionsBuilder, UnitWeighter};

use crate::fs::FileSystem;

/// The table files open now, by table number.
pub(crate) struct OpenTableFiles {
    files: Cache<u64, Arc<dyn RandomAccessFile>>,
    /// Files opened through the set (`Stats::table_file_opens`).
    opens: AtomicU64,
}

impl std::fmt::Debug for OpenTableFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenTableFiles")
            .field("open", &self.files.len())
            .field("max", &self.files.capacity())
            .finish()
    }
}

impl OpenTableFiles {
    /// A set holding at most `max_open` files. REQUIRES: `max_open >= 1`
    /// (`Options::validate`).
    pub(crate) fn new(max_open: usize) -> Self {
        // One shard: the cache splits its capacity across shards, each
        // rounded up, and the bound must be exact. Only block reads that
        // miss the block cache take its lock.
        let options = OptionsBuilder::new()
            .estimated_items_capacity(max_open)
            .weight_capacity(max_open as u64)
            .shards(1)
            .build();
        let files = match options {
            Ok(options) => Cache::with_options(
                options,
                UnitWeighter,
                DefaultHashBuilder::default(),
                DefaultLifecycle::default(),
            ),
            // Not reachable: every field the builder requires is set.
            Err(_) => Cache::new(max_open),
        };
        Self {
            files,
            opens: AtomicU64::new(0),
        }
    }

    /// Files opened through the set so far.
    pub(crate) fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// Files open now (held by the set).
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// Lets go of table `number`'s file, if the set holds it.
    pub(crate) fn close(&self, number: u64) {
        self.files.remove(&number);
    }

    /// Table `number`'s file, opened by `open` unless the set holds it
    /// (one thread opens it while others asking for it wait).
    fn file(
        &self,
        number: u64,
        open: impl FnOnce() -> io::Result<Arc<dyn RandomAccessFile>>,
    ) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.files.get_or_insert_with(&number, || {
            // Counted once opened: a failed open opened nothing.
            let file = open()?;
            self.opens.fetch_add(1, Ordering::Relaxed);
            Ok(file)
        })
    }
}

/// A table's file that is open only while [`OpenTableFiles`] holds it.
#[derive(Debug)]
pub(crate) struct LazyTableFile {
    number: u64,
    path: PathBuf,
    fs: Arc<dyn FileSystem>,
    direct: bool,
    open_files: Arc<OpenTableFiles>,
    /// While the table is opened ([`LazyTableFile::pin`]): the file every
    /// read goes to, whatever the set lets go of meanwhile.
    pinned: Mutex<Option<Arc<dyn RandomAccessFile>>>,
}

impl LazyTableFile {
    /// Table `number`'s file at `path`, opened through `fs` (directly when
    /// `direct`) whenever a read finds it closed.
    pub(crate) fn new(
        number: u64,
        path: PathBuf,
        fs: Arc<dyn FileSystem>,
        direct: bool,
        open_files: Arc<OpenTableFiles>,
    ) -> Self {
        Self {
            number,
            path,
            fs,
            direct,
            open_files,
            pinned: Mutex::new(None),
        }
    }

    /// Reads go to the file as it is open now (opened if the set does not
    /// hold it) until [`LazyTableFile::unpin`], as they go to one
    /// descriptor without the bound: a table's open reads its footer,
    /// index and filter through it and cannot half fail.
    /// The table's first open: its error is the OS error itself (the
    /// caller names the path), as without the bound.
    pub(crate) fn pin(&self) -> io::Result<()> {
        let file = self.open_or_held()?;
        *self.pinned.lock() = Some(file);
        Ok(())
    }

    /// Reads go through the set again.
    pub(crate) fn unpin(&self) {
        *self.pinned.lock() = None;
    }

    /// The file a read goes to. A reopen that fails is the error of the
    /// read, typed [`ReopenError`]: the reader names the table's path, and
    /// the message says the reopen failed, not a block read (the table
    /// reader passes it on as it is), with the OS error inside (`EMFILE`
    /// is how a caller tells "raise the limit" from damage;
    /// `Error::raw_os_error` finds it).
    fn file(&self) -> io::Result<Arc<dyn RandomAccessFile>> {
        if let Some(file) = &*self.pinned.lock() {
            return Ok(Arc::clone(file));
        }
        self.open_or_held().map_err(ReopenError::wrap)
    }

    /// The file as the set holds it, or opened now.
    fn open_or_held(&self) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.open_files.file(self.number, || {
            // The OS error itself (its kind and number); the reader names
            // the table's path.
            crate::fs::open_table_file(self.fs.as_ref(), &self.path, self.direct)
                .map_err(|e| e.source)
        })
    }
}

impl RandomAccessFile for LazyTableFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file()?.read_exact_at(buf, offset)
    }

    fn read_exact_at_bulk(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file()?.read_exact_at_bulk(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.file()?.len()
    }
}

#[cfg(test)]
mod tests;
