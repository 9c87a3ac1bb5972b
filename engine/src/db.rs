//! The store: write path, read path, snapshots, stats and shutdown.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bloomlsm_filter::{Filter, KeyHash};
use bloomlsm_sstable::{BlockCache, EntryKind, FilterStatus, Outcome, TableIter};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{DirLock, FileSystem, RealFs};
use crate::memtable::{MemLookup, MemTable};
use crate::merge::{MergingIter, Source, VisibleIter};
use crate::options::{Options, SyncMode};
use crate::stats::{Counters, LevelStats, Stats, ratio};
use crate::trace::{LookupTrace, TraceResult, TraceSource, TraceStep};
use crate::version::Version;
use crate::wal::WalWriter;

/// What readers see: the memtables and the tables, swapped as one.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    /// Frozen memtables, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
}

#[derive(Debug)]
pub(crate) struct WriteState {
    pub(crate) wal: WalWriter,
    pub(crate) next_seq: u64,
}

#[derive(Debug, Default)]
pub(crate) struct BackgroundState {
    pub(crate) flush_pending: bool,
    pub(crate) compaction_pending: bool,
    pub(crate) shutdown: bool,
}

/// The two background threads: flushes never wait behind a long compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Worker {
    Flush,
    Compaction,
}

/// Shared state of an open store.
#[derive(Debug)]
pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) _lock: Box<dyn DirLock>,
    pub(crate) write: Mutex<WriteState>,
    pub(crate) current: RwLock<Arc<SuperVersion>>,
    /// Largest sequence number whose write is complete and visible.
    pub(crate) last_visible: AtomicU64,
    pub(crate) next_file: AtomicU64,
    /// Held while flushing frozen memtables.
    pub(crate) flush_lock: Mutex<()>,
    /// Held while compacting or rebuilding filters (they remove tables).
    pub(crate) compaction_lock: Mutex<()>,
    /// Serializes manifest writes and version swaps.
    pub(crate) install_lock: Mutex<()>,
    pub(crate) bg: Mutex<BackgroundState>,
    pub(crate) bg_cv: Condvar,
    /// Writers waiting for room in L0 or for a flush wait here.
    pub(crate) stall: Mutex<()>,
    pub(crate) stall_cv: Condvar,
    /// Live snapshots: sequence -> count.
    pub(crate) snapshots: Mutex<BTreeMap<u64, usize>>,
    pub(crate) counters: Counters,
    /// Set when a write or background job failed: writes are refused.
    pub(crate) write_error: Mutex<Option<String>>,
    pub(crate) closed: AtomicBool,
    /// The filter policy tables are written with (changed by `rebuild_filters`).
    pub(crate) filter_policy: RwLock<crate::options::FilterPolicy>,
    /// Where the next level-n compaction starts (round robin by key).
    pub(crate) compact_pointer: Mutex<Vec<Vec<u8>>>,
}

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
/// version a live snapshot can see.
#[derive(Debug)]
pub struct Snapshot {
    inner: Arc<DbInner>,
    seq: u64,
}

impl Db {
    /// Opens (creating if missing) the store in `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        Self::open_with_fs(path, options, Arc::new(RealFs))
    }

    /// Opens the store through a given file system (tests inject faults here).
    pub fn open_with_fs(
        path: impl AsRef<Path>,
        options: Options,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Self> {
        let inner = Arc::new(crate::recovery::open_inner(path.as_ref(), options, fs)?);
        let mut background = Vec::new();
        if inner.options.background_work {
            for (worker, name) in [
                (Worker::Flush, "bloomlsm-flush"),
                (Worker::Compaction, "bloomlsm-compact"),
            ] {
                let shared = Arc::clone(&inner);
                let handle = std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || shared.background_loop(worker))
                    .map_err(|e| Error::io(path.as_ref(), e))?;
                background.push(handle);
            }
        }
        let db = Self {
            inner,
            background: Mutex::new(background),
        };
        db.inner.schedule_work();
        Ok(db)
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b)
    }

    /// Deletes `key` (writes a tombstone).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b)
    }

    /// Applies a batch atomically: after a crash, all of it or none of it.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// The current value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, None, None)
    }

    /// The current value of `key` and every step the lookup took.
    pub fn get_traced(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, LookupTrace)> {
        let mut trace = LookupTrace::default();
        let value = self.inner.get(key, None, Some(&mut trace))?;
        Ok((value, trace))
    }

    /// Key-value pairs with keys in `range`, in key order, as of now.
    /// For everything: `db.scan::<&[u8], _>(..)`.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        let seq = self.inner.last_visible.load(Ordering::Acquire);
        self.inner.scan(bounds(&range), seq)
    }

    /// A consistent view as of now.
    pub fn snapshot(&self) -> Snapshot {
        let seq = self.inner.last_visible.load(Ordering::Acquire);
        *self.inner.snapshots.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: Arc::clone(&self.inner),
            seq,
        }
    }

    /// Freezes the memtable and writes it to an L0 table; waits.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_open()?;
        {
            let mut w = self.inner.write.lock();
            if !self.inner.current.read().mem.is_empty() {
                self.inner.rotate_memtable(&mut w)?;
            }
        }
        self.inner.flush_all_immutable()
    }

    /// Flushes, then merges every table into the deepest level in use;
    /// each output table gets a new filter built from exactly its keys.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.inner.compact_all()
    }

    /// Rewrites every table's filter to `policy` without merging data (data
    /// blocks copied unchanged; new filter, properties and footer; swapped
    /// in atomically), and writes future tables with it. Waits.
    pub fn rebuild_filters(&self, policy: crate::options::FilterPolicy) -> Result<()> {
        self.inner.check_writable()?;
        let mut candidate = self.inner.options.clone();
        candidate.filter_policy = policy.clone();
        candidate.validate()?;
        *self.inner.filter_policy.write() = policy;
        self.inner.rebuild_tables(|_| true)
    }

    /// Counters and per-level figures.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the store runs with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Largest sequence number visible to readers.
    pub fn last_sequence(&self) -> u64 {
        self.inner.last_visible.load(Ordering::Acquire)
    }

    /// Blocks until background flushes and compactions have nothing left
    /// to do (useful before measuring reads).
    pub fn wait_for_background_work(&self) -> Result<()> {
        self.inner.flush_all_immutable()?;
        self.inner.compact_while_needed()
    }

    /// Syncs the WAL and stops background work. Drop does the same, best
    /// effort. Memtable contents stay in the WAL and are recovered at open.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let sync = self.inner.write.lock().wal.sync();
        {
            let mut bg = self.inner.bg.lock();
            bg.shutdown = true;
            self.inner.bg_cv.notify_all();
        }
        self.inner.stall_cv.notify_all();
        for handle in self.background.lock().drain(..) {
            let _ = handle.join();
        }
        sync
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
        self.inner.get(key, Some(self.seq), None)
    }

    /// Pairs with keys in `range` as of the snapshot.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        self.inner.scan(bounds(&range), self.seq)
    }

    /// The snapshot's sequence number.
    pub fn sequence(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snaps = self.inner.snapshots.lock();
        if let Some(count) = snaps.get_mut(&self.seq) {
            *count -= 1;
            if *count == 0 {
                snaps.remove(&self.seq);
            }
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

/// Pairs of a scan, in key order. Holds the tables it reads alive.
pub struct DbIter {
    inner: VisibleIter<MergingIter>,
    _view: Arc<SuperVersion>,
}

impl std::fmt::Debug for DbIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter").finish_non_exhaustive()
    }
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

impl DbInner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        match &*self.write_error.lock() {
            Some(reason) => Err(Error::WritesStopped(reason.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn stop_writes(&self, reason: String) {
        let mut e = self.write_error.lock();
        if e.is_none() {
            *e = Some(reason);
        }
        drop(e);
        self.stall_cv.notify_all();
    }

    fn validate(&self, batch: &WriteBatch) -> Result<()> {
        for (kind, key, value) in &batch.ops {
            if key.is_empty() || key.len() > self.options.max_key_bytes {
                return Err(Error::InvalidKey {
                    len: key.len(),
                    max: self.options.max_key_bytes,
                });
            }
            if *kind == EntryKind::Put && value.len() > self.options.max_value_bytes {
                return Err(Error::ValueTooLarge {
                    len: value.len(),
                    max: self.options.max_value_bytes,
                });
            }
        }
        Ok(())
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.validate(&batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        self.make_room()?;
        let mut w = self.write.lock();
        self.check_writable()?;
        let first = w.next_seq;
        let payload = batch.encode(first);
        if let Err(e) = w
            .wal
            .append(&payload, self.options.sync == SyncMode::Always)
        {
            self.stop_writes(format!("WAL append failed: {e}"));
            return Err(e);
        }
        let mem = Arc::clone(&self.current.read().mem);
        let count = batch.ops.len() as u64;
        for (i, (kind, key, value)) in batch.ops.into_iter().enumerate() {
            mem.insert(key, first + i as u64, kind, value);
        }
        w.next_seq = first + count;
        self.last_visible
            .store(first + count - 1, Ordering::Release);
        if mem.approximate_bytes() >= self.options.memtable_bytes {
            self.rotate_memtable(&mut w)?;
        }
        drop(w);
        if !self.options.background_work {
            self.do_background_work()?;
        }
        Ok(())
    }

    /// Waits (or slows down) while L0 or the frozen memtables are full.
    fn make_room(&self) -> Result<()> {
        let mut slowed = false;
        loop {
            self.check_writable()?;
            let sv = Arc::clone(&self.current.read());
            let l0 = sv.version.levels[0].len();
            let full = sv.imm.len() >= self.options.max_immutable_memtables
                || l0 >= self.options.l0_stop_trigger;
            if !full {
                if l0 >= self.options.l0_slowdown_trigger && !slowed {
                    Counters::add(&self.counters.write_stalls, 1);
                    std::thread::sleep(Duration::from_millis(1));
                    slowed = true;
                    continue;
                }
                return Ok(());
            }
            Counters::add(&self.counters.write_stalls, 1);
            if !self.options.background_work {
                self.do_background_work()?;
                continue;
            }
            self.schedule_work();
            let mut guard = self.stall.lock();
            self.stall_cv
                .wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    /// Freezes the active memtable and starts a new one with a new WAL.
    pub(crate) fn rotate_memtable(&self, w: &mut WriteState) -> Result<()> {
        let number = self.new_file_number();
        let path = crate::fs::names::wal(&self.dir, number);
        let result = self
            .fs
            .create(&path)
            .and_then(|f| self.fs.sync_dir(&self.dir).map(|()| f))
            .map_err(|e| Error::io(&path, e));
        let file = match result {
            Ok(f) => f,
            Err(e) => {
                self.stop_writes(format!("cannot create a new WAL: {e}"));
                return Err(e);
            }
        };
        if self.options.sync == SyncMode::Always {
            w.wal.sync()?;
        }
        w.wal = WalWriter::new(file, path);
        {
            let mut current = self.current.write();
            let mut imm = vec![Arc::clone(&current.mem)];
            imm.extend(current.imm.iter().cloned());
            *current = Arc::new(SuperVersion {
                mem: Arc::new(MemTable::new(number)),
                imm,
                version: Arc::clone(&current.version),
            });
        }
        self.schedule_work();
        Ok(())
    }

    pub(crate) fn schedule_work(&self) {
        let mut bg = self.bg.lock();
        bg.flush_pending = true;
        bg.compaction_pending = true;
        self.bg_cv.notify_all();
    }

    fn background_loop(self: Arc<Self>, worker: Worker) {
        loop {
            {
                let mut bg = self.bg.lock();
                loop {
                    if bg.shutdown {
                        return;
                    }
                    let pending = match worker {
                        Worker::Flush => &mut bg.flush_pending,
                        Worker::Compaction => &mut bg.compaction_pending,
                    };
                    if *pending {
                        *pending = false;
                        break;
                    }
                    self.bg_cv.wait(&mut bg);
                }
            }
            if self.write_error.lock().is_some() {
                continue;
            }
            let result = match worker {
                Worker::Flush => self.flush_all_immutable().map(|()| {
                    // New L0 tables may call for a compaction.
                    self.bg.lock().compaction_pending = true;
                    self.bg_cv.notify_all();
                }),
                Worker::Compaction => self.compact_while_needed(),
            };
            if let Err(e) = result {
                self.stop_writes(format!("background work failed: {e}"));
            }
            self.stall_cv.notify_all();
        }
    }

    /// Runs compactions until no level needs one (or the store shuts down).
    fn compact_while_needed(&self) -> Result<()> {
        if self.options.on_corrupt_filter == crate::options::CorruptFilterPolicy::Rebuild {
            self.rebuild_tables(|t| matches!(t.table.filter_status(), FilterStatus::Unusable(_)))?;
        }
        self.compact_while_needed_locked()
    }

    /// Flushes and compactions inline (when `background_work` is off).
    pub(crate) fn do_background_work(&self) -> Result<()> {
        self.flush_all_immutable()?;
        self.compact_while_needed()
    }

    /// Reads `key` at `snapshot` (default: the latest), recording stats and,
    /// when asked, every step.
    fn get(
        &self,
        key: &[u8],
        snapshot: Option<u64>,
        mut trace: Option<&mut LookupTrace>,
    ) -> Result<Option<Vec<u8>>> {
        Counters::add(&self.counters.gets, 1);
        if key.is_empty() || key.len() > self.options.max_key_bytes {
            return Ok(None);
        }
        // Sequence first, then the view: every write at or below `seq` is in
        // this view (a flush swaps memtable for table in one step).
        let seq = snapshot.unwrap_or_else(|| self.last_visible.load(Ordering::Acquire));
        let sv = Arc::clone(&self.current.read());
        let hash = KeyHash::of(key);
        if let Some(t) = trace.as_deref_mut() {
            t.key_hash = hash.raw();
            t.snapshot_seq = seq;
        }
        let memtables = std::iter::once((TraceSource::Memtable, &sv.mem)).chain(
            sv.imm
                .iter()
                .enumerate()
                .map(|(i, m)| (TraceSource::ImmutableMemtable(i), m)),
        );
        for (source, mem) in memtables {
            let found = mem.get(key, seq);
            let (result, answer) = match found {
                MemLookup::Value(v) => (TraceResult::Value, Some(Some(v))),
                MemLookup::Deleted => (TraceResult::Deleted, Some(None)),
                MemLookup::Missing => (TraceResult::Missing, None),
            };
            if let Some(t) = trace.as_deref_mut() {
                t.steps.push(TraceStep {
                    source,
                    filter: None,
                    block: None,
                    result,
                });
            }
            if let Some(answer) = answer {
                Counters::add(&self.counters.memtable_hits, 1);
                return Ok(answer);
            }
        }
        let version = &sv.version;
        let l0 = version.levels[0].iter();
        let deeper = (1..version.levels.len()).filter_map(|level| version.candidate(level, key));
        for handle in l0.chain(deeper) {
            let level = handle.meta.level;
            let lookup = handle.table.get(key, hash, seq)?;
            self.counters.levels[level].record(&lookup);
            let (result, answer) = match &lookup.outcome {
                Outcome::Found { value: Some(v), .. } => {
                    (TraceResult::Value, Some(Some(v.clone())))
                }
                Outcome::Found { value: None, .. } => (TraceResult::Deleted, Some(None)),
                _ => (TraceResult::Missing, None),
            };
            if let Some(t) = trace.as_deref_mut() {
                t.steps.push(TraceStep {
                    source: TraceSource::Table {
                        level,
                        number: handle.meta.number,
                    },
                    filter: Some(lookup.verdict()),
                    block: lookup.block,
                    result,
                });
            }
            if let Some(answer) = answer {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    fn scan(&self, (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>), seq: u64) -> Result<DbIter> {
        let sv = Arc::clone(&self.current.read());
        let from: Vec<u8> = match &start {
            Bound::Included(k) | Bound::Excluded(k) => k.clone(),
            Bound::Unbounded => Vec::new(),
        };
        let mem_end = match &end {
            Bound::Included(k) => {
                let mut k = k.clone();
                k.push(0);
                Some(k)
            }
            Bound::Excluded(k) => Some(k.clone()),
            Bound::Unbounded => None,
        };
        let mut sources: Vec<Source> = Vec::new();
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            sources.push(Box::new(
                mem.range_entries(&from, mem_end.as_deref())
                    .into_iter()
                    .map(Ok),
            ));
        }
        for handle in sv.version.levels.iter().flatten() {
            let t = &handle.meta;
            if t.largest_key.as_slice() < from.as_slice()
                || mem_end
                    .as_deref()
                    .is_some_and(|e| t.smallest_key.as_slice() >= e)
            {
                continue;
            }
            let mut it = TableIter::new(Arc::clone(&handle.table), true);
            it.seek(&from)?;
            sources.push(Box::new(it.map(|r| r.map_err(Error::from))));
        }
        Ok(DbIter {
            inner: VisibleIter::new(MergingIter::new(sources), seq, (start, end)),
            _view: sv,
        })
    }

    fn stats(&self) -> Stats {
        let sv = Arc::clone(&self.current.read());
        let mut levels = Vec::new();
        let mut total = LevelStats::default();
        for (level, tables) in sv.version.levels.iter().enumerate() {
            let mut s = LevelStats::default();
            let mut weighted_fpr = 0.0;
            let mut filtered_keys = 0u64;
            for t in tables {
                s.tables += 1;
                s.entries += t.meta.entries;
                s.file_bytes += t.meta.file_size;
                if let FilterStatus::Unusable(_) = t.table.filter_status() {
                    s.tables_without_usable_filter += 1;
                }
                if let Some(f) = t.table.filter() {
                    s.filter_bytes += f.memory_bytes() as u64;
                    weighted_fpr += f.theoretical_fpr() * f.len() as f64;
                    filtered_keys += f.len();
                }
            }
            let distinct: u64 = tables
                .iter()
                .map(|t| t.table.properties().distinct_keys)
                .sum();
            s.bits_per_key = if distinct > 0 {
                s.filter_bytes as f64 * 8.0 / distinct as f64
            } else {
                0.0
            };
            s.theoretical_fpr = if filtered_keys > 0 {
                weighted_fpr / filtered_keys as f64
            } else {
                0.0
            };
            s.fill_counters(&self.counters.levels[level]);
            total.accumulate(&s);
            levels.push(s);
        }
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let gets = get(&self.counters.gets);
        Stats {
            gets,
            memtable_hits: get(&self.counters.memtable_hits),
            data_blocks_read_per_get: ratio(total.data_blocks_read, gets),
            levels,
            total,
            flushes: get(&self.counters.flushes),
            compactions: get(&self.counters.compactions),
            filters_built: get(&self.counters.filters_built),
            bytes_written: get(&self.counters.bytes_written),
            bytes_compacted_read: get(&self.counters.bytes_compacted_read),
            write_stalls: get(&self.counters.write_stalls),
            block_cache_used_bytes: self.cache.used_bytes(),
        }
    }
}
