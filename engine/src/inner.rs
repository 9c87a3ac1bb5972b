//! The shared state of an open store, which lock guards what, and the
//! lock order.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::counters::Counters;
use crate::error::{Error, Result};
use crate::filter_budget::FilterClaims;
use crate::fs::{DirLock, FileSystem};
use crate::memtable::MemTable;
use crate::options::{FilterPolicy, Options};
use crate::recovery::Recovered;
use crate::table_files::TableFiles;
use crate::version::{SuperVersion, Version};
use crate::wal::WalWriter;

/// The write path's state. Guarded by `DbInner::write`.
#[derive(Debug)]
pub(crate) struct WriteState {
    /// The WAL of the active memtable; `None` exactly in a read-only
    /// store, which has no WAL, and once the store is closed (writes to
    /// either are refused before this lock is used).
    pub(crate) wal: Option<WalWriter>,
    /// The sequence number the next write gets.
    pub(crate) next_seq: u64,
}

/// What the background threads are asked to do. Guarded by `DbInner::bg`.
#[derive(Debug, Default)]
pub(crate) struct BackgroundState {
    pub(crate) flush_pending: bool,
    pub(crate) compaction_pending: bool,
    pub(crate) shutdown: bool,
}

/// Shared state of an open store.
///
/// Locks, taken in this order (a thread holding one may take only those
/// below it): `compaction_lock` (compactions and filter rebuilds: they
/// remove tables), `flush_lock` (flushes), `install_lock` (manifest write
/// and view swap), `write` (the WAL and sequence numbers), `frozen_wals`
/// (the writers of frozen memtables' WALs: taken by the install of a
/// flush, which must not wait for a write in progress), `filter_claims`
/// (filter bytes claimed by writes in flight; held while planning, which
/// clones the view), `view_swap` (held to replace the view `current`,
/// which readers load without any lock), then the leaves
/// `filter_policy`, `snapshots`, `compact_pointer`, `cleanup_futile`,
/// `no_cleanup_under`,
/// `write_error`, `bg`,
/// `stall`, `dir_lock`, each held for a few instructions and never while
/// taking another. `last_visible` and `closed` are atomics.
#[derive(Debug)]
pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    /// As given to `open`; the live filter policy is `filter_policy`.
    pub(crate) options: Options,
    /// Read-only: `ReadOnlyFs`, refusing every change.
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) tables: TableFiles,
    /// Opened with `Db::open_read_only`: every write, flush, compaction
    /// and filter rebuild is refused with `Error::ReadOnly`, no background
    /// thread runs, and the replayed WALs stay in the active memtable.
    pub(crate) read_only: bool,
    /// Where this open's WAL replay ended before the end of the WALs.
    pub(crate) wal_cut: Option<crate::wal_cut::WalCut>,
    /// WALs whose damaged header this open's replay read past.
    pub(crate) wal_headers_salvaged: Vec<PathBuf>,
    /// The LOCK file's lock; released by `shutdown`.
    dir_lock: Mutex<Option<Box<dyn DirLock>>>,
    /// `forks::forks_seen()` when the store was opened: a process forked
    /// from the one that opened the store (a daemon, say) sees another
    /// value, holds no lock on the store, and its copy refuses writes.
    opened_after_forks: u64,
    pub(crate) write: Mutex<WriteState>,
    /// WALs of frozen memtables not yet known flushed, oldest first, by
    /// number: kept open so `close` can make every acknowledged write
    /// durable, and closed by the install of their flush (a quiet store
    /// would otherwise hold the deleted files open until the next
    /// rotation, `tests/flushed_wal_closed.rs`). A lock of its own, not
    /// part of `write`: a flush's install never waits for a write in
    /// progress (`half_batch_tests.rs`).
    pub(crate) frozen_wals: Mutex<Vec<(u64, WalWriter)>>,
    /// The view. Readers load it without a lock or a shared write
    /// (`ArcSwap`: a get takes it with no atomic write to a line another
    /// reader writes); it is replaced only under `view_swap`, so each
    /// replacement is made from the one before it.
    pub(crate) current: ArcSwap<SuperVersion>,
    /// Held to replace `current` (a memtable rotation, an install).
    pub(crate) view_swap: Mutex<()>,
    /// Largest sequence number whose write is complete and visible.
    /// Readers load it AFTER loading `current`.
    pub(crate) last_visible: AtomicU64,
    pub(crate) flush_lock: Mutex<()>,
    pub(crate) compaction_lock: Mutex<()>,
    pub(crate) install_lock: Mutex<()>,
    pub(crate) bg: Mutex<BackgroundState>,
    pub(crate) bg_cv: Condvar,
    /// Writers waiting for room in L0 or for a flush wait on `stall_cv`.
    pub(crate) stall: Mutex<()>,
    pub(crate) stall_cv: Condvar,
    /// Live snapshots: sequence -> count. A snapshot's sequence is read
    /// while this lock is held, and compactions read the set under it.
    pub(crate) snapshots: Mutex<BTreeMap<u64, usize>>,
    pub(crate) counters: Counters,
    /// Set when a write or background job failed: writes are refused.
    pub(crate) write_error: Mutex<Option<crate::WriteStop>>,
    pub(crate) closed: AtomicBool,
    /// The filter policy tables are written with (set by `rebuild_filters`
    /// once it succeeds).
    pub(crate) filter_policy: RwLock<FilterPolicy>,
    /// Filter bytes that planned writes claimed beyond their uniform
    /// share, until their install (`filter_budget.rs`).
    pub(crate) filter_claims: FilterClaims,
    /// Installs so far, and the count when a rebalancing pass last found
    /// nothing to rebuild (no pass is due until the tree changes).
    pub(crate) installs: AtomicU64,
    pub(crate) rebalanced_at: AtomicU64,
    /// Where the next level-n compaction starts (round robin by key).
    pub(crate) compact_pointer: Mutex<Vec<Vec<u8>>>,
    /// Tables written by a bottommost cleanup that dropped nothing, each
    /// with the oldest live snapshot it was written under: not picked for
    /// one again while that is still the oldest (`compaction/cleanup.rs`),
    /// so cleanups cannot loop. Changed only by installs, each record
    /// leaving with its table (`compaction/futile.rs`).
    pub(crate) cleanup_futile: crate::compaction::FutileCleanups,
    /// A value of `installs` at which the tree had no table a bottommost
    /// cleanup could take under any snapshot (`u64::MAX`: none known);
    /// the search is skipped until the next install.
    pub(crate) no_cleanup_at: AtomicU64,
    /// `(installs, oldest live snapshot)` at which the tree had candidates
    /// for a bottommost cleanup but the snapshot (or `cleanup_futile`)
    /// held every one back: the search is skipped until either changes.
    pub(crate) no_cleanup_under: Mutex<Option<(u64, Option<u64>)>>,
    /// A value of `installs` at which the tree had no table for a
    /// deletion-triggered compaction (`u64::MAX`: none known). That pick is
    /// a function of the tree and the options alone, so the search is
    /// skipped until the next install.
    pub(crate) no_deletion_pick_at: AtomicU64,
    /// Test-only pause point in the read path (see `read.rs`).
    #[cfg(test)]
    pub(crate) read_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point between a filter rebuild's copies (written
    /// and synced) and their install (see `rebuild.rs`).
    #[cfg(test)]
    pub(crate) rebuild_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point before a filter rebuild waits for the flush
    /// in flight and plans (see `rebuild.rs`).
    #[cfg(test)]
    pub(crate) rebuild_plan_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point between a compaction's reading of the live
    /// snapshots and its merge (see `compaction/mod.rs`).
    #[cfg(test)]
    pub(crate) merge_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point after a compaction's filter lowerings and
    /// before its plan (see `rebalance.rs`).
    #[cfg(test)]
    pub(crate) lowered_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point after every pick of `compact_once` (trivial
    /// moves and merges alike), under the compaction lock, before the
    /// tree is touched (see `compaction/mod.rs`).
    #[cfg(test)]
    pub(crate) pick_pause: crate::test_hooks::ReadPause,
    /// Test-only observer of every install (see `install.rs`).
    #[cfg(test)]
    pub(crate) install_hook: crate::test_hooks::InstallHook,
    /// Test-only pause points in every install, under the install lock:
    /// before the manifest write, and after it (durable) before the view
    /// swap (see `install.rs`).
    #[cfg(test)]
    pub(crate) before_manifest_pause: crate::test_hooks::ReadPause,
    #[cfg(test)]
    pub(crate) after_manifest_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in `stopping_writes_on_error`: a panic caught,
    /// the locks it held released, writes not yet stopped.
    #[cfg(test)]
    pub(crate) unwound_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point after each entry a write inserts in the
    /// memtable, under the write lock (see `write.rs`).
    #[cfg(test)]
    pub(crate) insert_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in a write that found room for itself (the
    /// frozen memtables and L0 below their limits) and has not yet taken
    /// the write lock (see `write.rs`).
    #[cfg(test)]
    pub(crate) room_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in a memtable rotation, the new WAL taking
    /// writes and the view not yet swapped (see `write.rs`).
    #[cfg(test)]
    pub(crate) rotate_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in a flush, under the flush lock, after its
    /// check that writes go on and its choice of frozen memtables, before
    /// its table is written (see `flush.rs`).
    #[cfg(test)]
    pub(crate) flush_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in `Db::flush`, after its first check that
    /// writes go on, before it takes the write lock (see `db.rs`).
    #[cfg(test)]
    pub(crate) flush_call_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in `Db::flush`, under the write lock, after
    /// its second check that writes go on, before its rotation.
    #[cfg(test)]
    pub(crate) flush_locked_pause: crate::test_hooks::ReadPause,
    /// Test-only pause point in `stopping_writes_on_error`: `f` returned
    /// an error, the locks it held released, writes not yet stopped.
    #[cfg(test)]
    pub(crate) failed_pause: crate::test_hooks::ReadPause,
}

impl DbInner {
    /// The store as recovery left it. Read-write: every replayed write is
    /// in a table, a fresh WAL takes new writes. Read-only: the replayed
    /// writes are the active memtable, and there is no WAL.
    pub(crate) fn new(dir: PathBuf, options: Options, recovered: Recovered) -> Self {
        let num_levels = options.num_levels;
        Self {
            dir,
            read_only: recovered.wal.is_none(),
            wal_cut: recovered.wal_cut,
            wal_headers_salvaged: recovered.wal_headers_salvaged,
            fs: recovered.fs,
            tables: recovered.tables,
            dir_lock: Mutex::new(Some(recovered.lock)),
            opened_after_forks: crate::fs::forks::forks_seen(),
            write: Mutex::new(WriteState {
                wal: recovered.wal,
                next_seq: recovered.last_seq + 1,
            }),
            frozen_wals: Mutex::new(Vec::new()),
            current: ArcSwap::from_pointee(SuperVersion {
                mem: recovered.mem,
                imm: Vec::new(),
                version: Arc::new(recovered.version),
            }),
            view_swap: Mutex::new(()),
            last_visible: AtomicU64::new(recovered.last_seq),
            flush_lock: Mutex::new(()),
            compaction_lock: Mutex::new(()),
            install_lock: Mutex::new(()),
            bg: Mutex::new(BackgroundState::default()),
            bg_cv: Condvar::new(),
            stall: Mutex::new(()),
            stall_cv: Condvar::new(),
            snapshots: Mutex::new(BTreeMap::new()),
            counters: recovered.counters,
            write_error: Mutex::new(None),
            closed: AtomicBool::new(false),
            filter_policy: RwLock::new(options.filter_policy.clone()),
            compact_pointer: Mutex::new(vec![Vec::new(); num_levels]),
            cleanup_futile: crate::compaction::FutileCleanups::default(),
            no_cleanup_at: AtomicU64::new(u64::MAX),
            no_cleanup_under: Mutex::new(None),
            no_deletion_pick_at: AtomicU64::new(u64::MAX),
            filter_claims: FilterClaims::default(),
            installs: AtomicU64::new(0),
            rebalanced_at: AtomicU64::new(u64::MAX),
            options,
            #[cfg(test)]
            read_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            rebuild_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            rebuild_plan_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            merge_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            lowered_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            pick_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            install_hook: crate::test_hooks::InstallHook::default(),
            #[cfg(test)]
            before_manifest_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            after_manifest_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            unwound_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            insert_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            room_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            rotate_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            flush_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            flush_call_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            flush_locked_pause: crate::test_hooks::ReadPause::default(),
            #[cfg(test)]
            failed_pause: crate::test_hooks::ReadPause::default(),
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Replaces the view with what `next` makes of the current one, under
    /// `view_swap`, so each replacement is made from the one before it.
    pub(crate) fn replace_view(&self, next: impl FnOnce(&SuperVersion) -> SuperVersion) {
        let _swap = self.view_swap.lock();
        let current = self.current.load_full();
        self.current.store(Arc::new(next(&current)));
    }

    /// Refuses a change to a read-only store (after `Closed`).
    pub(crate) fn check_not_read_only(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_not_read_only()?;
        self.check_writes_not_stopped()
    }

    /// Whether this is a copy in a process forked from the one that
    /// opened the store.
    pub(crate) fn is_forked_copy(&self) -> bool {
        crate::fs::forks::forks_seen() != self.opened_after_forks
    }

    /// Refuses with `WritesStopped` a forked copy of the process that
    /// opened the store (it holds no lock on it, so another process may
    /// open it too, and two writers would corrupt it), or a store whose
    /// writes an error stopped.
    pub(crate) fn check_writes_not_stopped(&self) -> Result<()> {
        if self.is_forked_copy() {
            return Err(Error::WritesStopped(crate::WriteStop::forked_copy()));
        }
        match &*self.write_error.lock() {
            Some(stop) => Err(Error::WritesStopped(stop.clone())),
            None => Ok(()),
        }
    }

    /// Refuses every later write, flush, compaction and rebuild, after
    /// `error` failed `what` (the first stop is kept). Reads go on.
    pub(crate) fn stop_writes(&self, what: &'static str, error: &Error) {
        let mut e = self.write_error.lock();
        if e.is_none() {
            *e = Some(crate::WriteStop::after(what, error));
        }
        drop(e);
        self.stall_cv.notify_all();
    }

    /// As [`Self::stop_writes`], for a caller that holds no lock from
    /// `write` on in the lock order (a job whose locks are released, an
    /// install under the install lock): the stop is made under the write
    /// lock. A write checks that writes go on under that lock and then,
    /// still under it, appends and may rotate its memtable (a new WAL);
    /// `Db::flush` checks and rotates under one hold of it too. A stop
    /// made without the lock could land between the check and the
    /// rotation, which then created a WAL after `WritesStopped` was
    /// visible to every caller; under the lock it comes before the check
    /// or after the rotation (`stop_rotation_window_tests.rs`). Stops made
    /// inside the write path already hold the lock (`write.rs`).
    pub(crate) fn stop_writes_outside_writes(&self, what: &'static str, error: &Error) {
        let _w = self.write.lock();
        self.stop_writes(what, error);
    }

    /// Runs `f`; an error other than "already stopped" or "closed" stops
    /// writes (as a failed background job does), and is returned. A panic
    /// in `f` (a bug) stops writes too, then goes on unwinding, so a caller
    /// that catches it finds writes stopped. (Locks `f` held are released
    /// as it unwinds, a moment before the stop, which then waits for the
    /// write lock if a write holds it: another thread may start
    /// work in between, which is harmless, since every change made visible
    /// is a whole install and what the panic cut short was never one: an
    /// install that panics, perhaps with its manifest already durable,
    /// stops writes itself before its locks are released, `install.rs`,
    /// and so does a memtable rotation, under the write lock, `write.rs`
    /// and `Db::flush`.)
    pub(crate) fn stopping_writes_on_error<T>(
        &self,
        what: &'static str,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(result) => result,
            Err(payload) => {
                #[cfg(test)]
                self.unwound_pause.pause();
                self.stop_writes_outside_writes(what, &Error::panicked(payload.as_ref()));
                std::panic::resume_unwind(payload)
            }
        };
        result.inspect_err(|e| {
            if !matches!(e, Error::WritesStopped(_) | Error::Closed) {
                #[cfg(test)]
                self.failed_pause.pause();
                self.stop_writes_outside_writes(what, e);
            }
        })
    }

    /// Runs `f`, whose caller holds the write lock; if it panics (a bug),
    /// stops writes (`what`, cause `StopCause::Panic`) and then goes on
    /// unwinding. The stop comes before the write lock is released, so no
    /// later write works from what the panic left (`write.rs`, and the
    /// rotation in `Db::flush`).
    pub(crate) fn stopping_writes_on_panic_in_writes<T>(
        &self,
        what: &'static str,
        f: impl FnOnce() -> T,
    ) -> T {
        stopping_on_panic(f, |e| self.stop_writes(what, e))
    }

    /// Runs `f`, whose caller holds locks above `write` in the lock order
    /// (an install: the install lock, and the flush or compaction lock of
    /// its job) and not `write` itself; if it panics (a bug), stops writes
    /// (`what`, cause `StopCause::Panic`) before those locks are released,
    /// so no other job works from what the panic left, and then goes on
    /// unwinding. The stop is made under the write lock, as every stop
    /// outside the write path is ([`Self::stop_writes_outside_writes`]):
    /// never between a write's check and its rotation
    /// (`stop_rotation_window_tests.rs`).
    pub(crate) fn stopping_writes_on_panic<T>(
        &self,
        what: &'static str,
        f: impl FnOnce() -> T,
    ) -> T {
        stopping_on_panic(f, |e| self.stop_writes_outside_writes(what, e))
    }

    /// Whether a clean close may seal the live WALs (`wal/seal.rs`): the
    /// store is read-write, this process holds its lock, and no error has
    /// stopped writes.
    pub(crate) fn may_seal(&self) -> bool {
        !self.read_only && self.check_writes_not_stopped().is_ok()
    }

    /// Makes every acknowledged write durable (every live WAL, oldest
    /// first; a read-only store has none, and writes nothing), then, only
    /// if every one of those fsyncs succeeded, seals the live WALs
    /// (`wal/seal.rs`), and gives up the directory lock. REQUIRES:
    /// background threads have stopped. Later reads through snapshots and
    /// iterators fail with `Closed`; so does a write that had not yet
    /// taken the write lock, so nothing is appended after the seal.
    pub(crate) fn shutdown(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        let result = {
            let mut w = self.write.lock();
            let mut frozen = self.frozen_wals.lock();
            let mut synced = Ok(());
            for (_, wal) in frozen.iter_mut() {
                synced = synced.and(wal.sync());
            }
            if let Some(wal) = &mut w.wal {
                synced = synced.and(wal.sync());
            }
            let sealed = synced.and_then(|()| self.seal_live_wals(&mut w, &mut frozen));
            // Nothing is appended again: the WALs close now, not when the
            // last `Snapshot` or `DbIter` of this store drops.
            frozen.clear();
            w.wal = None;
            sealed
        };
        // Nor is anything read again (every read checks `closed` after
        // taking its view, `read.rs`): the memtables and tables leave the
        // view, so a snapshot kept past the close holds no file of the
        // store open (`tests/closed_store_releases.rs`). An iterator keeps
        // the view it took until it ends or drops (`iter.rs`).
        self.replace_view(|current| SuperVersion {
            mem: Arc::new(MemTable::new(current.mem.wal_number)),
            imm: Vec::new(),
            version: Arc::new(Version::new(self.options.num_levels)),
        });
        // Nor does the block cache hold the store's blocks in memory until
        // the last `Snapshot` or `DbIter` drops (`closed_cache_tests.rs`).
        // A read that checked `closed` just before it was set reads on
        // (a scan seeks every level, an iterator's `next` may skip many
        // blocks of deletes): the closed cache takes none of its blocks.
        self.tables.cache().close();
        self.dir_lock.lock().take();
        result.and_then(|()| self.unsealed_by_stopped_writes())
    }

    /// Why a close that synced every WAL still left no close marker
    /// (`may_seal` said no for a read-write store): an error stopped
    /// writes, before the close or during it (a background job that failed
    /// as it was stopped), or this is a forked copy that holds no lock.
    /// The caller hears of it even if no write of its own failed; every
    /// acknowledged write is durable all the same.
    fn unsealed_by_stopped_writes(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.check_writes_not_stopped()
    }
}

/// Runs `f`; if it panics, calls `stop` with the panic as an error, then
/// goes on unwinding (the two `stopping_writes_on_panic` guards).
fn stopping_on_panic<T>(f: impl FnOnce() -> T, stop: impl FnOnce(&Error)) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        stop(&Error::panicked(payload.as_ref()));
        std::panic::resume_unwind(payload)
    })
}
