//! The write path: validate, make room, log, apply, rotate.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::MutexGuard;

use bloomlsm_sstable::{EntryKind, MAX_SEQUENCE};

use crate::batch::{MAX_BATCH_BYTES, WriteBatch};
use crate::counters::Counters;
use crate::error::{Error, Result};
use crate::fs::names;
use crate::inner::{DbInner, WriteState};
use crate::memtable::MemTable;
use crate::options::SyncMode;
use crate::version::SuperVersion;
use crate::wal::WalWriter;

impl DbInner {
    /// Refuses a batch that could not be stored whole, before anything is
    /// written.
    fn validate(&self, batch: &WriteBatch) -> Result<()> {
        let bytes = batch.encoded_len();
        if bytes > MAX_BATCH_BYTES {
            return Err(Error::BatchTooLarge {
                bytes,
                max: MAX_BATCH_BYTES,
            });
        }
        for (kind, key, value) in batch.ops() {
            // A put stores a new key, so `max_key_bytes` bounds it; a
            // delete may name any key a table can hold, so that keys a
            // store holds from a larger limit it had before can be removed.
            let max = match kind {
                EntryKind::Put => self.options.max_key_bytes,
                EntryKind::Delete => bloomlsm_sstable::DEFAULT_MAX_KEY_BYTES,
            };
            if key.is_empty() || key.len() > max {
                return Err(Error::InvalidKey {
                    len: key.len(),
                    max,
                });
            }
            if kind == EntryKind::Put && value.len() > self.options.max_value_bytes {
                return Err(Error::ValueTooLarge {
                    len: value.len(),
                    max: self.options.max_value_bytes,
                });
            }
        }
        Ok(())
    }

    /// Applies `batch` atomically. Returns `Ok` exactly when the batch was
    /// applied (logged and in the memtable); a failure after that point
    /// (a rotation or inline flush) stops later writes instead.
    pub(crate) fn write(&self, mut batch: WriteBatch) -> Result<()> {
        // Refusals in order: a read-only (or closed) store, then the
        // caller's batch, then the store's state. An empty batch is a
        // write too: refused once writes stopped, as every write is, so
        // `Ok` never says a stopped store takes writes.
        self.check_not_read_only()?;
        self.validate(&batch)?;
        self.check_writable()?;
        if batch.is_empty() {
            return Ok(());
        }
        let mut w = self.make_room()?;
        self.check_writable()?;
        let first = w.next_seq;
        let count = batch.len() as u64;
        if first
            .checked_add(count - 1)
            .is_none_or(|last| last > MAX_SEQUENCE)
        {
            return Err(Error::SequenceExhausted);
        }
        // A panic (a bug) from here on may leave the batch logged, or half
        // in the memtable, with its sequence numbers not taken: writes stop
        // before the write lock is released, so no later write is given the
        // same numbers, which made the half batch visible and the WAL
        // unreadable at the next open (`write_panic_tests.rs`).
        self.stopping_writes_on_panic_in_writes("write", || {
            let payload = batch.encode(first);
            let Some(wal) = w.wal.as_mut() else {
                return Err(Error::ReadOnly);
            };
            if let Err(e) = wal.append(payload, self.options.sync == SyncMode::Always) {
                self.stop_writes("WAL append", &e);
                return Err(e);
            }
            let mem = Arc::clone(&self.current.load().mem);
            for (i, (kind, key, value)) in batch.ops().enumerate() {
                mem.insert(key, first + i as u64, kind, value);
                #[cfg(test)]
                self.insert_pause.pause();
            }
            w.next_seq = first + count;
            self.last_visible
                .store(first + count - 1, Ordering::Release);
            if mem.approximate_bytes() >= self.options.memtable_bytes {
                // On failure writes are stopped; this write stands.
                let _ = self.rotate_memtable(&mut w);
            }
            Ok(())
        })?;
        drop(w);
        if !self.options.background_work {
            let _ = self.stopping_writes_on_error("inline flush or compaction", || {
                self.do_background_work()
            });
        }
        Ok(())
    }

    /// Waits (or slows down) while L0 or the frozen memtables are full,
    /// then takes the write lock. Counts the write once in `write_stalls`
    /// if it waited or slowed at all, however many rounds it waited.
    ///
    /// Invariant: the frozen memtables stay at most
    /// `max_immutable_memtables` whatever the number of writers. A write
    /// freezes at most one memtable, under the write lock, so the room is
    /// checked again once the lock is held: a writer that saw room before
    /// another writer's rotation took the last slot waits instead
    /// (`write_room_tests.rs`).
    fn make_room(&self) -> Result<MutexGuard<'_, WriteState>> {
        let mut slowed = false;
        let mut counted = false;
        let mut count_stall = || {
            if !counted {
                Counters::add(&self.counters.write_stalls, 1);
                counted = true;
            }
        };
        loop {
            self.check_writable()?;
            let sv = self.current.load_full();
            let l0 = sv.version.levels[0].len();
            let full = sv.imm.len() >= self.options.max_immutable_memtables
                || l0 >= self.options.l0_stop_trigger;
            if !full {
                if l0 >= self.options.l0_slowdown_trigger && !slowed {
                    count_stall();
                    std::thread::sleep(Duration::from_millis(1));
                    slowed = true;
                    continue;
                }
                #[cfg(test)]
                self.room_pause.pause();
                let w = self.write.lock();
                if self.current.load().imm.len() < self.options.max_immutable_memtables {
                    return Ok(w);
                }
                // Another writer froze the last slot meanwhile: the next
                // round finds the frozen memtables full and waits.
                drop(w);
                continue;
            }
            count_stall();
            if !self.options.background_work {
                self.stopping_writes_on_error("inline flush or compaction", || {
                    self.do_background_work()
                })?;
                continue;
            }
            self.schedule_work();
            let mut guard = self.stall.lock();
            self.stall_cv
                .wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    /// Freezes the active memtable and starts a new one with a new WAL.
    /// The frozen memtable's WAL stays open (and is synced first in
    /// `SyncMode::Always`) until its flush is installed. A failure stops
    /// writes.
    pub(crate) fn rotate_memtable(&self, w: &mut WriteState) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let number = match self.tables.new_file_number() {
            Ok(n) => n,
            Err(e) => {
                self.stop_writes("creating a new WAL", &e);
                return Err(e);
            }
        };
        let path = names::wal(&self.dir, number);
        let always = self.options.sync == SyncMode::Always;
        let created = self.fs.create(&path).map_err(Error::from).and_then(|f| {
            let wal = WalWriter::create(f, path, always)?;
            self.tables.sync_dir()?;
            Ok(wal)
        });
        let synced = created.and_then(|new_wal| {
            if always && let Some(wal) = w.wal.as_mut() {
                wal.sync()?;
            }
            Ok(new_wal)
        });
        let new_wal = match synced {
            Ok(wal) => wal,
            Err(e) => {
                self.stop_writes("creating a new WAL", &e);
                return Err(e);
            }
        };
        // The frozen WAL joins those the close fsyncs before the view
        // swap, so a panic (a bug) between them cannot drop its writer
        // with acknowledged writes never fsynced (`rotate_panic_tests.rs`).
        // The active memtable changes only here, under the write lock: the
        // view's is the frozen WAL's.
        if let Some(frozen) = w.wal.replace(new_wal) {
            let frozen_number = self.current.load().mem.wal_number;
            self.frozen_wals.lock().push((frozen_number, frozen));
        }
        #[cfg(test)]
        self.rotate_pause.pause();
        self.replace_view(|current| {
            let mut imm = vec![Arc::clone(&current.mem)];
            imm.extend(current.imm.iter().cloned());
            SuperVersion {
                mem: Arc::new(MemTable::new(number)),
                imm,
                version: Arc::clone(&current.version),
            }
        });
        // WALs older than every memtable still in the view are flushed
        // (their installs have closed them already; this is the backstop).
        let oldest_live = self.current.load().oldest_live_wal();
        self.frozen_wals.lock().retain(|(n, _)| *n >= oldest_live);
        self.schedule_work();
        Ok(())
    }
}
