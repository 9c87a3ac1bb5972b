//! The public API: [`Db`], [`Snapshot`], [`DbIter`].

use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::background::Worker;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RealFs};
use crate::inner::DbInner;
use crate::iter::DbIter;
use crate::options::{FilterPolicy, Options};
use crate::stats::Stats;
use crate::trace::LookupTrace;

/// An embeddable LSM-tree key-value store. `Send + Sync`: share it through
/// `&Db` or `Arc<Db>` between threads.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
/// db.put(b"key", b"value").unwrap();
/// assert_eq!(db.get(b"key").unwrap(), Some(b"value".to_vec()));
/// db.close().unwrap();
/// ```
#[derive(Debug)]
pub struct Db {
    pub(crate) inner: Arc<DbInner>,
    background: Mutex<Vec<JoinHandle<()>>>,
}

/// A consistent read-only view at one point in time. Compaction keeps every
/// version a live snapshot can see. Reads fail with [`Error::Closed`] once
/// the store is closed.
#[derive(Debug)]
pub struct Snapshot {
    inner: Arc<DbInner>,
    seq: u64,
}

impl Db {
    /// Opens (creating if missing) the store in `path`. A failed open
    /// leaves no file it created behind.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        Self::open_with_fs(path, options, Arc::new(RealFs))
    }

    /// Opens the store through a given file system (tests inject faults here).
    pub fn open_with_fs(
        path: impl AsRef<Path>,
        options: Options,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Self> {
        let dir = path.as_ref();
        let recovered = crate::recovery::recover(dir, &options, fs)?;
        let inner = Arc::new(DbInner::new(dir.to_path_buf(), options, recovered));
        let db = Self {
            inner,
            background: Mutex::new(Vec::new()),
        };
        if db.inner.options.background_work {
            for (worker, name) in Worker::ALL {
                let shared = Arc::clone(&db.inner);
                let handle = std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || shared.background_loop(worker))
                    .map_err(|e| Error::io(dir, e))?;
                db.background.lock().push(handle);
            }
        }
        db.inner.schedule_work();
        Ok(db)
    }

    /// Opens the existing store in `path` for reading only, as RocksDB's
    /// `DB::OpenForReadOnly` does, to study a store without changing it.
    ///
    /// It takes `LOCK` as [`Db::open`] does (so it is refused with
    /// [`Error::Locked`] while another `Db` has the store open, and keeps
    /// any other open out until closed; where `LOCK` exists but cannot be
    /// opened for writing, as on a read-only mount, it is locked for
    /// reading, which keeps writers out all the same), refuses a directory without a
    /// MANIFEST ([`Error::NoManifest`]), checks the manifest and tables
    /// as `open` does, and replays the WALs (same [`crate::WalRecovery`]
    /// checks and errors) into a memtable kept in memory. It never
    /// creates, writes, renames, truncates or deletes a file of the store
    /// (a missing `LOCK` is created to be locked, and unlinked at close),
    /// runs no background thread and rebuilds no filter (a damaged one is
    /// read around, as under [`crate::CorruptFilterPolicy::Ignore`];
    /// `Fail` still refuses the open). Reads answer what a read-write open
    /// would; every change (`put`, `delete`, `write`, `flush`, `compact`,
    /// `rebuild_filters`, `wait_for_background_work`) returns
    /// [`Error::ReadOnly`]. `close` writes nothing.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        Self::open_read_only_with_fs(path, options, Arc::new(RealFs))
    }

    /// [`Db::open_read_only`] through a given file system.
    pub fn open_read_only_with_fs(
        path: impl AsRef<Path>,
        options: Options,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Self> {
        let dir = path.as_ref();
        let recovered = crate::recovery::recover_read_only(dir, &options, fs)?;
        Ok(Self {
            inner: Arc::new(DbInner::new(dir.to_path_buf(), options, recovered)),
            background: Mutex::new(Vec::new()),
        })
    }

    /// Whether the store was opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(9 + key.len() + value.len());
        b.put(key, value);
        self.write(b)
    }

    /// Deletes `key` (writes a tombstone).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(5 + key.len());
        b.delete(key);
        self.write(b)
    }

    /// Applies a batch atomically: after a crash, all of it or none of it.
    /// `Ok` exactly when the batch was applied (visible to reads). A write
    /// whose WAL append or fsync fails returns `Err`, is not visible, and
    /// stops writes; its record may still have reached the device, so the
    /// next open may recover it, as the last write. A batch whose encoding
    /// is over [`crate::MAX_BATCH_BYTES`] is refused up front. An empty
    /// batch writes nothing and takes no sequence number, but is refused
    /// as any write is ([`Error::WritesStopped`] once an error stopped
    /// writes).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// The current value of `key` (`Some` of an empty vector for an
    /// empty value). An empty key, which no write stores, is absent:
    /// `Ok(None)`, not an error. A key longer than
    /// `Options::max_key_bytes` is looked up like any other: a store
    /// written under a larger limit may hold it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, None, &mut ())
    }

    /// The current value of `key` and every step the lookup took.
    pub fn get_traced(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, LookupTrace)> {
        let mut trace = LookupTrace::default();
        let value = self.inner.get(key, None, &mut trace)?;
        Ok((value, trace))
    }

    /// Key-value pairs with keys in `range`, in ascending key order (the
    /// iterator goes forward only), as of now. A range whose start is past
    /// its end yields nothing. For everything: `db.scan::<&[u8], _>(..)`.
    /// A damaged data block is reported as an error: by `scan` itself for
    /// the block each table's seek reads, by the iterator for later ones.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        self.inner.scan(bounds(&range), None)
    }

    /// A consistent view as of now.
    pub fn snapshot(&self) -> Snapshot {
        // The sequence is read under the lock compactions read the snapshot
        // set under: a compaction either sees this snapshot or ran on
        // inputs whose entries are all at or below its sequence.
        let mut snapshots = self.inner.snapshots.lock();
        #[cfg(test)]
        self.inner.read_pause.pause();
        let seq = self.inner.last_visible.load(Ordering::Acquire);
        *snapshots.entry(seq).or_insert(0) += 1;
        drop(snapshots);
        Snapshot {
            inner: Arc::clone(&self.inner),
            seq,
        }
    }

    /// Freezes the memtable and writes it, with every memtable frozen
    /// before it, to an L0 table; waits for that table only, not for
    /// memtables other writers freeze meanwhile. Refused
    /// with [`Error::WritesStopped`] after a failure (a failure here stops
    /// writes), and with [`Error::ReadOnly`] by a read-only store.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable()?;
        #[cfg(test)]
        self.inner.flush_call_pause.pause();
        self.inner.stopping_writes_on_error("flush", || {
            {
                let mut w = self.inner.write.lock();
                // A write that failed since the check above stopped
                // writes before it released this lock: checked again
                // here, a flush after such a stop freezes no memtable and
                // creates no WAL (`stop_flush_window_tests.rs`).
                self.inner.check_writable()?;
                #[cfg(test)]
                self.inner.flush_locked_pause.pause();
                // A panic in the rotation (a bug) stops writes before the
                // write lock is released, as in a write: no write goes
                // into the half-rotated state it leaves
                // (`rotate_panic_tests.rs`).
                self.inner.stopping_writes_on_panic_in_writes("flush", || {
                    if self.inner.current.load().mem.is_empty() {
                        return Ok(());
                    }
                    self.inner.rotate_memtable(&mut w)
                })?;
            }
            self.inner.flush_frozen_now()
        })
    }

    /// Flushes, then merges every table into the deepest level in use;
    /// each output table gets a new filter built from exactly its keys.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.inner
            .stopping_writes_on_error("compaction", || self.inner.compact_all())
    }

    /// Rewrites every table's filter to `policy` without merging data (data
    /// blocks copied unchanged; new filter, properties and footer; swapped
    /// in atomically, each table keeping its place), and writes future
    /// tables with it. Waits. [`Db::options`] reports the new policy once
    /// this returns `Ok`; on failure the old policy stays. Refuses with
    /// [`Error::ReadOnly`] on a read-only store, then
    /// [`Error::InvalidOptions`] for an invalid `policy`, then
    /// [`Error::WritesStopped`] after a stop.
    pub fn rebuild_filters(&self, policy: FilterPolicy) -> Result<()> {
        // As `write`: a read-only store first, then the caller's argument,
        // then the store's state (a stop).
        self.inner.check_not_read_only()?;
        policy.validate()?;
        self.inner.check_writable()?;
        self.inner
            .stopping_writes_on_error("filter rebuild", || self.inner.rebuild_all_filters(policy))
    }

    /// Counters and per-level figures.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the store runs with, with the filter policy tables are
    /// written with now.
    pub fn options(&self) -> Options {
        Options {
            filter_policy: self.inner.filter_policy.read().clone(),
            ..self.inner.options.clone()
        }
    }

    /// Largest sequence number visible to readers.
    pub fn last_sequence(&self) -> u64 {
        self.inner.last_visible.load(Ordering::Acquire)
    }

    /// Blocks until background flushes and compactions have nothing left
    /// to do (useful before measuring reads): it repeats flushes,
    /// compactions and filter rebalancing until a round changes nothing
    /// (at most 64 rounds, so writes from other threads meanwhile cannot
    /// hold it forever). A read-only store has none,
    /// and refuses this with [`Error::ReadOnly`] as it refuses `flush`.
    pub fn wait_for_background_work(&self) -> Result<()> {
        self.inner.check_writable()?;
        self.inner
            .stopping_writes_on_error("background work", || self.inner.settle_background_work())
    }

    /// Stops background work, makes every acknowledged write durable (each
    /// live WAL is fsynced) and releases the directory lock, so the store
    /// can be opened again even while a [`Snapshot`] or [`DbIter`] is
    /// alive (their reads then fail with [`Error::Closed`]). The store's
    /// files are closed and its memtables freed even while a `Snapshot`
    /// lives on; a `DbIter` holds the tables of its view until it ends (its
    /// first read after the close reports `Closed` and ends it) or drops. Drop does the
    /// same, best effort. Memtable contents stay in the WAL and are
    /// recovered at open. When every fsync succeeded and no error stopped
    /// writes, a close marker is appended to the newest WAL, each WAL
    /// written with `SyncMode::Never` is then marked synced and the one
    /// holding the marker closed (headers rewritten in place, in either
    /// sync mode), so later damage in them, at their end included, is
    /// refused as corruption rather than taken for a power loss's. An
    /// error from that rewrite is returned although every write is already
    /// durable: the device failed a write, which the caller should hear of
    /// (the WAL then keeps its old header or, torn, a damaged one, which
    /// recovery reads strictly: nothing is dropped either way). If an
    /// error had stopped writes, before the close or during it (a
    /// background flush or compaction no call saw fail included), or the
    /// `Db` is a copy in a process forked from the one that opened it
    /// (which holds no lock and refuses writes), no marker is written and
    /// the close returns that [`Error::WritesStopped`]. After an error the
    /// WALs are fsynced all the same (an fsync's error comes first); a
    /// forked copy touches no file, joins none of the parent's background
    /// threads (the child has none of them) and waits for no lock.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.inner.is_forked_copy() {
            // A copy in a forked child. The parent's background threads do
            // not exist here (a join would wait for good), and a lock one
            // of the parent's threads held at the fork stays held. So
            // nothing is joined, no lock waited for and no file touched:
            // the store belongs to the process that holds its lock.
            self.inner.closed.store(true, Ordering::SeqCst);
            if let Some(mut handles) = self.background.try_lock() {
                handles.drain(..).for_each(std::mem::forget);
            }
            return self.inner.check_writes_not_stopped();
        }
        {
            let mut bg = self.inner.bg.lock();
            bg.shutdown = true;
            self.inner.bg_cv.notify_all();
        }
        self.inner.stall_cv.notify_all();
        for handle in self.background.lock().drain(..) {
            let _ = handle.join();
        }
        self.inner.shutdown()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl Snapshot {
    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.check_open()?;
        self.inner.get(key, Some(self.seq), &mut ())
    }

    /// The value of `key` as of the snapshot and every step the lookup
    /// took: the runs holding newer versions are steps too (each found
    /// nothing visible at the snapshot's sequence).
    pub fn get_traced(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, LookupTrace)> {
        self.inner.check_open()?;
        let mut trace = LookupTrace::default();
        let value = self.inner.get(key, Some(self.seq), &mut trace)?;
        Ok((value, trace))
    }

    /// Pairs with keys in `range` as of the snapshot.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        self.inner.check_open()?;
        self.inner.scan(bounds(&range), Some(self.seq))
    }

    /// The snapshot's sequence number.
    pub fn sequence(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snaps = self.inner.snapshots.lock();
        let oldest = snaps.keys().next().copied();
        let mut released = false;
        if let Some(count) = snaps.get_mut(&self.seq) {
            *count -= 1;
            if *count == 0 {
                snaps.remove(&self.seq);
                released = oldest == Some(self.seq);
            }
        }
        drop(snaps);
        // The oldest snapshot is gone: tables it pinned may now be cleaned
        // up, even if no write ever comes (`compaction/cleanup.rs`).
        if released {
            self.inner.oldest_snapshot_released();
        }
    }
}

fn bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(range: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}
