//! Flushes and compactions. Both write NEW tables whose filters are built
//! from exactly the keys each holds; nothing is ever removed from a filter.
//! Inputs are deleted only after the manifest that drops them is durable
//! and the last reader holding them lets go (see `version.rs`).

use std::sync::Arc;

use bloomlsm_sstable::{Entry, EntryKind, TableIter};

use crate::db::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::fs::names;
use crate::manifest::ManifestState;
use crate::memtable::MemTable;
use crate::merge::{MergingIter, Source};
use crate::recovery::write_manifest;
use crate::stats::Counters;
use crate::version::{TableHandle, Version};

/// A chosen compaction: `inputs` from `level`, `lower` from `level + 1`
/// (or any levels for a full compaction), written to `output_level`.
#[derive(Debug)]
pub(crate) struct Compaction {
    pub(crate) inputs: Vec<Arc<TableHandle>>,
    pub(crate) output_level: usize,
}

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

    /// The most urgent compaction, if any level needs one.
    pub(crate) fn pick_compaction(&self) -> Option<Compaction> {
        let sv = Arc::clone(&self.current.read());
        let v = &sv.version;
        if v.levels[0].len() >= self.options.l0_compaction_trigger {
            return Some(Compaction {
                inputs: v.levels[0].clone(),
                output_level: 1,
            });
        }
        let last = v.levels.len() - 1;
        let (mut best, mut best_score) = (None, 1.0f64);
        for level in 1..last {
            let score = v.level_bytes(level) as f64 / self.options.level_budget(level) as f64;
            if score > best_score {
                best = Some(level);
                best_score = score;
            }
        }
        let level = best?;
        let mut pointers = self.compact_pointer.lock();
        let tables = &v.levels[level];
        let pick = tables
            .iter()
            .find(|t| t.meta.smallest_key > pointers[level])
            .or_else(|| tables.first())
            .cloned()?;
        pointers[level] = pick.meta.largest_key.clone();
        Some(Compaction {
            inputs: vec![pick],
            output_level: level + 1,
        })
    }

    /// Runs one compaction (re-checked under the compaction lock: a flush
    /// may have added L0 tables meanwhile, which the install keeps).
    pub(crate) fn run_compaction(&self, c: Compaction) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        let sv = Arc::clone(&self.current.read());
        let live = |t: &Arc<TableHandle>| {
            sv.version.levels[t.meta.level]
                .iter()
                .any(|x| Arc::ptr_eq(x, t))
        };
        if c.inputs.is_empty() || !c.inputs.iter().all(live) {
            return Ok(());
        }
        let smallest = c
            .inputs
            .iter()
            .map(|t| t.meta.smallest_key.clone())
            .min()
            .unwrap_or_default();
        let largest = c
            .inputs
            .iter()
            .map(|t| t.meta.largest_key.clone())
            .max()
            .unwrap_or_default();
        let mut inputs = c.inputs.clone();
        inputs.extend(sv.version.overlapping(c.output_level, &smallest, &largest));
        let bottom = (c.output_level + 1..sv.version.levels.len())
            .all(|l| sv.version.overlapping(l, &smallest, &largest).is_empty());
        self.merge_into(&inputs, c.output_level, bottom)
    }

    /// Merges every table of every level into the deepest level in use.
    pub(crate) fn compact_all(&self) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        let sv = Arc::clone(&self.current.read());
        let inputs: Vec<Arc<TableHandle>> = sv.version.levels.iter().flatten().cloned().collect();
        if inputs.is_empty() {
            return Ok(());
        }
        let deepest = (0..sv.version.levels.len())
            .rev()
            .find(|&l| !sv.version.levels[l].is_empty())
            .unwrap_or(1);
        self.merge_into(&inputs, deepest.max(1), true)
    }

    /// Merges `inputs`, keeps what readers and snapshots can still see,
    /// drops the oldest tombstones when `bottom`, and writes new tables.
    /// REQUIRES: the compaction lock is held.
    fn merge_into(
        &self,
        inputs: &[Arc<TableHandle>],
        output_level: usize,
        bottom: bool,
    ) -> Result<()> {
        let sources: Vec<Source> = inputs
            .iter()
            .map(|t| {
                Counters::add(&self.counters.bytes_compacted_read, t.meta.file_size);
                Box::new(
                    TableIter::new(Arc::clone(&t.table), false).map(|r| r.map_err(Error::from)),
                ) as Source
            })
            .collect();
        let snapshots: Vec<u64> = self.snapshots.lock().keys().copied().collect();
        let mut stream = RetainIter::new(MergingIter::new(sources), snapshots, bottom);
        let outputs =
            self.write_tables(output_level, &mut stream, self.options.target_file_bytes)?;
        self.install(&outputs, inputs, None)?;
        Counters::add(&self.counters.compactions, 1);
        Ok(())
    }
}

/// Keeps, for each user key, the versions some reader can still see: the
/// newest, plus each version that is the newest one visible to a live
/// snapshot. At the bottom level, tombstones with nothing older kept below
/// them hide nothing and are dropped.
pub(crate) struct RetainIter<I: Iterator<Item = Result<Entry>>> {
    inner: std::iter::Peekable<I>,
    snapshots: Vec<u64>,
    bottom: bool,
    ready: std::collections::VecDeque<Entry>,
    failed: bool,
}

impl<I: Iterator<Item = Result<Entry>>> RetainIter<I> {
    pub(crate) fn new(inner: I, snapshots: Vec<u64>, bottom: bool) -> Self {
        Self {
            inner: inner.peekable(),
            snapshots,
            bottom,
            ready: Default::default(),
            failed: false,
        }
    }

    /// A snapshot `s` sees the version `seq` when `seq <= s < newer`.
    fn needed_by_snapshot(&self, seq: u64, newer: u64) -> bool {
        let i = self.snapshots.partition_point(|&s| s < seq);
        self.snapshots.get(i).is_some_and(|&s| s < newer)
    }

    fn next_key(&mut self) -> Result<bool> {
        let Some(first) = self.inner.next() else {
            return Ok(false);
        };
        let first = first?;
        let mut versions = vec![first];
        while let Some(Ok(next)) = self.inner.peek() {
            if next.user_key != versions[0].user_key {
                break;
            }
            if let Some(Ok(e)) = self.inner.next() {
                versions.push(e);
            }
        }
        if let Some(Err(_)) = self.inner.peek()
            && let Some(Err(e)) = self.inner.next()
        {
            return Err(e);
        }
        let mut kept: Vec<Entry> = Vec::with_capacity(1);
        let mut newer = u64::MAX;
        for v in versions {
            let seq = v.seq;
            if kept.is_empty() || self.needed_by_snapshot(seq, newer) {
                kept.push(v);
            }
            newer = seq;
        }
        if self.bottom {
            while kept.last().is_some_and(|e| e.kind == EntryKind::Delete) {
                kept.pop();
            }
        }
        self.ready.extend(kept);
        Ok(true)
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for RetainIter<I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(Ok(e));
            }
            if self.failed {
                return None;
            }
            match self.next_key() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(key: &str, seq: u64, kind: EntryKind) -> Result<Entry> {
        Ok(Entry {
            user_key: key.as_bytes().to_vec(),
            seq,
            kind,
            value: vec![seq as u8],
        })
    }

    fn run(entries: Vec<Result<Entry>>, snapshots: Vec<u64>, bottom: bool) -> Vec<(String, u64)> {
        RetainIter::new(entries.into_iter(), snapshots, bottom)
            .map(|r| r.unwrap())
            .map(|e| (String::from_utf8(e.user_key).unwrap(), e.seq))
            .collect()
    }

    #[test]
    fn keeps_newest_and_snapshot_versions() {
        use EntryKind::*;
        let input = || {
            vec![
                e("a", 9, Put),
                e("a", 5, Put),
                e("a", 2, Put),
                e("b", 4, Delete),
                e("b", 1, Put),
            ]
        };
        assert_eq!(
            run(input(), vec![], false),
            vec![("a".into(), 9), ("b".into(), 4)]
        );
        assert_eq!(run(input(), vec![], true), vec![("a".into(), 9)]);
        assert_eq!(
            run(input(), vec![6], false),
            vec![("a".into(), 9), ("a".into(), 5), ("b".into(), 4)]
        );
        assert_eq!(
            run(input(), vec![3], true),
            vec![
                ("a".into(), 9),
                ("a".into(), 2),
                ("b".into(), 4),
                ("b".into(), 1)
            ]
        );
    }
}
