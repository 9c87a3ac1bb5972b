//! Flushes and compactions. Both write NEW tables whose filters are built
//! from exactly the keys each holds; nothing is ever removed from a filter.
//! Inputs are deleted only after the manifest that drops them is durable
//! and the last reader holding them lets go (see `version.rs`).

use std::sync::Arc;

mod pick;
mod retain;

#[cfg(test)]
mod tests;

use bloomlsm_sstable::TableIter;

use crate::db::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::fs::names;
use crate::manifest::ManifestState;
use crate::memtable::MemTable;
use crate::merge::{MergingIter, Source};
use crate::recovery::write_manifest;
use crate::stats::Counters;
use crate::version::{TableHandle, Version};

pub(crate) use pick::Compaction;
use retain::RetainIter;

impl DbInner {
    /// Makes a new version durable and visible: `added` tables in, `removed`
    /// tables out; `wal_number` overrides the oldest WAL still needed.
    /// Callers hold the flush or compaction lock for their own inputs;
    /// installs themselves are serialized here.
    pub(crate) fn install(
        &self,
        added: &[Arc<TableHandle>],
        removed: &[Arc<TableHandle>],
        wal_number: Option<u64>,
    ) -> Result<()> {
        self.install_inner(added, removed, wal_number, None)
    }

    /// [`Self::install`], also retiring `flushed_mem` (now in `added`) and its WAL.
    fn install_inner(
        &self,
        added: &[Arc<TableHandle>],
        removed: &[Arc<TableHandle>],
        wal_number: Option<u64>,
        flushed_mem: Option<&Arc<MemTable>>,
    ) -> Result<()> {
        let _install = self.install_lock.lock();
        let sv = Arc::clone(&self.current.read());
        let mut version = Version::clone(&sv.version);
        for level in &mut version.levels {
            level.retain(|t| !removed.iter().any(|r| Arc::ptr_eq(r, t)));
        }
        for t in added {
            version.levels[t.meta.level].push(Arc::clone(t));
        }
        version.sort();
        version.check_invariants().map_err(Error::Internal)?;
        let remaining_imm: Vec<Arc<MemTable>> = sv
            .imm
            .iter()
            .filter(|m| !flushed_mem.is_some_and(|f| Arc::ptr_eq(f, m)))
            .cloned()
            .collect();
        // WALs below the oldest memtable still in memory are fully in tables.
        let oldest_needed = remaining_imm
            .iter()
            .chain(std::iter::once(&sv.mem))
            .map(|m| m.wal_number)
            .min();
        let state = ManifestState {
            next_file_number: self.next_file.load(std::sync::atomic::Ordering::SeqCst),
            last_seq: self.last_visible.load(std::sync::atomic::Ordering::Acquire),
            wal_number: wal_number.or(oldest_needed).unwrap_or(0),
            tables: version.all_metas(),
        };
        write_manifest(self.fs.as_ref(), &self.dir, &state)?;
        {
            let mut current = self.current.write();
            let imm = current
                .imm
                .iter()
                .filter(|m| !flushed_mem.is_some_and(|f| Arc::ptr_eq(f, m)))
                .cloned()
                .collect();
            *current = Arc::new(SuperVersion {
                mem: Arc::clone(&current.mem),
                imm,
                version: Arc::new(version),
            });
        }
        for t in removed {
            t.mark_obsolete();
        }
        if let Some(mem) = flushed_mem {
            let path = names::wal(&self.dir, mem.wal_number);
            // The manifest no longer needs it; a failure leaves an orphan
            // that the next open removes.
            let _ = self.fs.remove(&path);
        }
        Ok(())
    }

    /// Writes every frozen memtable to an L0 table, oldest first.
    pub(crate) fn flush_all_immutable(&self) -> Result<()> {
        let _flush = self.flush_lock.lock();
        loop {
            let sv = Arc::clone(&self.current.read());
            let Some(oldest) = sv.imm.last().cloned() else {
                return Ok(());
            };
            let mut entries = oldest.entries().map(Ok);
            let tables = self.write_tables(0, &mut entries, u64::MAX)?;
            self.install_inner(&tables, &[], None, Some(&oldest))?;
            Counters::add(&self.counters.flushes, 1);
            self.stall_cv.notify_all();
        }
    }

    /// Runs compactions until no level needs one, the store shuts down, or
    /// writes stop. Picks under the compaction lock, so the input set is
    /// exactly the tables live when the merge starts.
    pub(crate) fn compact_while_needed_locked(&self) -> Result<()> {
        loop {
            if self.bg.lock().shutdown {
                return Ok(());
            }
            self.check_writable()?;
            let _compaction = self.compaction_lock.lock();
            let sv = Arc::clone(&self.current.read());
            let picked = {
                let pointers = self.compact_pointer.lock();
                pick::pick(&sv.version.levels, &self.options, &pointers)
            };
            let Some(c) = picked else {
                return Ok(());
            };
            if let Some(p) = &c.next_pointer {
                self.compact_pointer.lock()[c.level] = p.clone();
            }
            self.merge(&c)?;
            self.stall_cv.notify_all();
        }
    }

    /// Merges every table of every level into the deepest level in use.
    pub(crate) fn compact_all(&self) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let sv = Arc::clone(&self.current.read());
        match pick::pick_all(&sv.version.levels) {
            Some(c) => self.merge(&c),
            None => Ok(()),
        }
    }

    /// Merges a compaction's inputs, keeps what readers and snapshots can
    /// still see, drops tombstones only where no deeper level can hold the
    /// key, writes new tables (each with a new filter) and installs them.
    /// REQUIRES: the compaction lock is held and every input is live.
    fn merge(&self, c: &Compaction<Arc<TableHandle>>) -> Result<()> {
        let inputs: Vec<Arc<TableHandle>> = c.all_inputs().cloned().collect();
        let sources: Vec<Source> = inputs
            .iter()
            .map(|t| {
                Counters::add(&self.counters.bytes_compacted_read, t.meta.file_size);
                Box::new(
                    TableIter::new(Arc::clone(&t.table), false).map(|r| r.map_err(Error::from)),
                ) as Source
            })
            .collect();
        // Read after the inputs were chosen: a snapshot registered later has
        // a sequence at or above every entry of the inputs, so the newest
        // version of each key, always kept, is the one it sees.
        let snapshots: Vec<u64> = self.snapshots.lock().keys().copied().collect();
        let mut stream = RetainIter::new(MergingIter::new(sources), snapshots, c.deeper.checker());
        let outputs =
            self.write_tables(c.output_level, &mut stream, self.options.target_file_bytes)?;
        self.install(&outputs, &inputs, None)?;
        Counters::add(&self.counters.compactions, 1);
        Ok(())
    }
}
