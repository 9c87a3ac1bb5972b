//! An immutable view of the live tables per level. Readers clone an `Arc`
//! of the current view; a table file is deleted only when it has left the
//! manifest AND the last view holding it is dropped.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm_sstable::{BlockCache, Table};

use crate::damage::TreeOrderError;
use crate::fs::FileSystem;
use crate::level_fences;
use crate::manifest::TableMeta;
use crate::memtable::MemTable;
use crate::open_table_files::OpenTableFiles;

/// What readers see: the memtables and the tables, swapped as one.
/// Invariant: every write with a sequence at or below the store's visible
/// sequence when this view was installed is in it (a flush swaps a frozen
/// memtable for its table in one step).
#[derive(Debug)]
pub(crate) struct SuperVersion {
    /// The memtable taking writes.
    pub(crate) mem: Arc<MemTable>,
    /// Frozen memtables waiting for flush, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
}

impl SuperVersion {
    /// The oldest WAL a memtable of this view still needs: every WAL
    /// older than it holds only flushed writes.
    pub(crate) fn oldest_live_wal(&self) -> u64 {
        self.imm
            .iter()
            .map(|m| m.wal_number)
            .fold(self.mem.wal_number, u64::min)
    }
}

/// A live table: its manifest record and the open reader.
#[derive(Debug)]
pub(crate) struct TableHandle {
    pub(crate) meta: TableMeta,
    pub(crate) table: Arc<Table>,
    /// The file, shared by every handle naming it: one moved by a trivial
    /// move and the one it came from, a table whose filter was rebuilt in
    /// place and the table as it was.
    file: Arc<TableFileLife>,
}

/// A table file, deleted (and its blocks evicted from the cache) when it
/// has been marked obsolete and the last handle naming it drops: a reader
/// holding any handle on it (an old view, an open iterator) keeps it.
#[derive(Debug)]
struct TableFileLife {
    number: u64,
    path: PathBuf,
    /// Set once the manifest no longer names this file.
    obsolete: AtomicBool,
    fs: Arc<dyn FileSystem>,
    cache: Arc<BlockCache>,
    /// Where `Options::max_open_files` bounds open files: the set that
    /// may hold this file open.
    open_files: Option<Arc<OpenTableFiles>>,
    /// `forks::forks_seen()` when the handle was made: a copy of it in a
    /// process forked since sees another value, and deletes nothing (the
    /// file is the parent's, whose readers may still hold it).
    forks_seen: u64,
}

impl TableHandle {
    pub(crate) fn new(
        meta: TableMeta,
        table: Arc<Table>,
        path: PathBuf,
        fs: Arc<dyn FileSystem>,
        cache: Arc<BlockCache>,
        open_files: Option<Arc<OpenTableFiles>>,
    ) -> Self {
        let file = Arc::new(TableFileLife {
            number: meta.number,
            path,
            obsolete: AtomicBool::new(false),
            fs,
            cache,
            open_files,
            forks_seen: crate::fs::forks::forks_seen(),
        });
        Self { meta, table, file }
    }

    /// A handle on the same file at `level` (a trivial move). The file is
    /// then owned by the new handle: the old one must leave the tree
    /// without being marked obsolete.
    pub(crate) fn moved_to(&self, level: usize) -> Self {
        Self {
            meta: TableMeta {
                level,
                ..self.meta.clone()
            },
            table: Arc::clone(&self.table),
            file: Arc::clone(&self.file),
        }
    }

    /// The table `meta` and `table` describe, in this handle's own file (a
    /// filter rebuilt in place: same number, a longer size). The file is
    /// then owned by the new handle, as by [`TableHandle::moved_to`]; this
    /// one's readers keep it until they let go.
    pub(crate) fn appended_to(&self, meta: TableMeta, table: Arc<Table>) -> Self {
        debug_assert_eq!(meta.number, self.meta.number);
        Self {
            meta,
            table,
            file: Arc::clone(&self.file),
        }
    }

    /// The file is deleted when the last handle naming it drops.
    /// REQUIRES: no manifest on disk names this table (the one that drops
    /// it is durable, or it was never offered to an install).
    pub(crate) fn mark_obsolete(&self) {
        self.file.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for TableFileLife {
    fn drop(&mut self) {
        // No handle names the file: nothing reads it again through this
        // store's set (a later handle on it reopens it).
        if let Some(open_files) = &self.open_files {
            open_files.close(self.number);
        }
        if self.obsolete.load(Ordering::Acquire) {
            self.cache.evict_table(self.number);
            // A forked copy touches no file of the store (`Db::close`):
            // the parent's readers of this file may still reopen it by
            // path (`tests/fork_obsolete_tables.rs`), and the parent
            // deletes it when they let go.
            if crate::fs::forks::forks_seen() != self.forks_seen {
                return;
            }
            // Best effort: a file left behind is an orphan that the next
            // open removes.
            let _ = self.fs.remove(&self.path);
        }
    }
}

/// Tables per level. L0 is newest first by sequence number (tables may
/// overlap); deeper levels are sorted by smallest key and do not overlap.
///
/// Every change to `levels` ends with [`Version::sort`], which also
/// rebuilds `fences`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Version {
    pub(crate) levels: Vec<Vec<Arc<TableHandle>>>,
    /// Per level, the fence of each table's largest key
    /// ([`level_fences`]): what [`Version::candidate`] searches. Invariant
    /// after `sort`: `fences[l][i] == fence_of(levels[l][i].largest_key)`.
    fences: Vec<Vec<u64>>,
}

impl Version {
    pub(crate) fn new(num_levels: usize) -> Self {
        Self {
            levels: vec![Vec::new(); num_levels],
            fences: vec![Vec::new(); num_levels],
        }
    }

    /// This version with `removed` tables out and `added` tables in, each
    /// level in search order; refused if the result breaks an invariant.
    pub(crate) fn edited(
        &self,
        added: &[Arc<TableHandle>],
        removed: &[Arc<TableHandle>],
    ) -> Result<Self, TreeOrderError> {
        // Only the compaction lock's holder removes tables, and it chose
        // them from the live tree: a removed table that is not live would
        // mean a copy or an output installed for inputs already replaced,
        // its inputs' replacements left beside it. Checked in every build:
        // the removal below visits every table anyway, and a set of the
        // removed handles makes each visit one lookup (it was a scan of
        // `removed` per table).
        let mut leaving: HashSet<*const TableHandle> = removed.iter().map(Arc::as_ptr).collect();
        let mut version = self.clone();
        let levels = version.levels.len();
        for level in &mut version.levels {
            level.retain(|t| !leaving.remove(&Arc::as_ptr(t)));
        }
        if let Some(r) = removed.iter().find(|r| leaving.contains(&Arc::as_ptr(r))) {
            return Err(TreeOrderError::RemovedNotLive {
                number: r.meta.number,
            });
        }
        for t in added {
            let level =
                version
                    .levels
                    .get_mut(t.meta.level)
                    .ok_or(TreeOrderError::NoSuchLevel {
                        number: t.meta.number,
                        level: t.meta.level,
                        levels,
                    })?;
            level.push(Arc::clone(t));
        }
        version.sort();
        version.check_invariants()?;
        Ok(version)
    }

    /// Puts each level in its search order. L0 tables hold disjoint
    /// sequence ranges (each the memtables of one flush), so newest first
    /// is largest sequence first; the file number says nothing, since a
    /// filter rebuild written as a copy gets a new, higher one.
    pub(crate) fn sort(&mut self) {
        for (level, tables) in self.levels.iter_mut().enumerate() {
            if level == 0 {
                tables.sort_by_key(|t| std::cmp::Reverse((t.meta.largest_seq, t.meta.number)));
            } else {
                tables.sort_by(|a, b| a.meta.smallest_key.cmp(&b.meta.smallest_key));
            }
        }
        self.fences = self
            .levels
            .iter()
            .map(|tables| {
                tables
                    .iter()
                    .map(|t| level_fences::fence_of(&t.meta.largest_key))
                    .collect()
            })
            .collect();
    }

    /// The one table of a sorted level (>= 1) whose range may hold `key`.
    pub(crate) fn candidate(&self, level: usize, key: &[u8]) -> Option<&Arc<TableHandle>> {
        let tables = &self.levels[level];
        let i = match self.fences.get(level) {
            Some(fences) if fences.len() == tables.len() => {
                // A change to `levels` without `sort` would leave the same
                // count and stale fences: the tests' debug builds check.
                debug_assert!(
                    fences
                        .iter()
                        .zip(tables)
                        .all(|(f, t)| *f == level_fences::fence_of(&t.meta.largest_key)),
                    "level {level}: fences out of date"
                );
                level_fences::first_not_below(fences, |i| &tables[i].meta.largest_key, key)
            }
            // Not reached (`sort` builds the fences), but a search of the
            // keys themselves is the same answer.
            _ => tables.partition_point(|t| t.meta.largest_key.as_slice() < key),
        };
        tables
            .get(i)
            .filter(|t| t.meta.smallest_key.as_slice() <= key)
    }

    pub(crate) fn all_metas(&self) -> Vec<TableMeta> {
        self.levels
            .iter()
            .flatten()
            .map(|t| t.meta.clone())
            .collect()
    }

    /// Checks the invariants the read path relies on: L0 tables hold
    /// disjoint sequence ranges, newest first; every deeper level is sorted
    /// with no two tables sharing a key. A version that fails is never
    /// installed: a lookup in it could return a wrong answer.
    pub(crate) fn check_invariants(&self) -> Result<(), TreeOrderError> {
        for pair in self.levels[0].windows(2) {
            let (newer, older) = (&pair[0].meta, &pair[1].meta);
            if newer.smallest_seq <= older.largest_seq {
                return Err(TreeOrderError::L0Sequences {
                    newer: newer.number,
                    newer_seqs: newer.smallest_seq..=newer.largest_seq,
                    older: older.number,
                    older_seqs: older.smallest_seq..=older.largest_seq,
                });
            }
        }
        for (level, tables) in self.levels.iter().enumerate().skip(1) {
            for pair in tables.windows(2) {
                let (a, b) = (&pair[0].meta, &pair[1].meta);
                if a.largest_key >= b.smallest_key {
                    return Err(TreeOrderError::LevelKeys {
                        level,
                        first: a.number,
                        second: b.number,
                    });
                }
            }
        }
        Ok(())
    }
}
