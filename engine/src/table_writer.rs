//! Writes a stream of entries into one or more new tables, each with a
//! filter built from exactly its own keys.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_sstable::{Entry, FilterStatus, Table, TableBuilder, TableOptions, WritableFile};

use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::fs::names;
use crate::manifest::TableMeta;
use crate::options::CorruptFilterPolicy;
use crate::stats::Counters;
use crate::version::TableHandle;

impl DbInner {
    pub(crate) fn table_options(&self, level: usize) -> TableOptions {
        TableOptions {
            block_size: self.options.block_size,
            filter_kind: self.options.filter_kind,
            bits_per_key: {
                let (shape, actual) = self.level_keys(level);
                self.filter_policy
                    .read()
                    .bits_per_key(level, &shape, &actual)
            },
            max_key_bytes: self.options.max_key_bytes,
            max_value_bytes: self.options.max_value_bytes,
        }
    }

    /// For the `Optimized` policy: the shape of the tree (each level above
    /// the deepest at its capacity, or what it holds if more: L0
    /// `l0_compaction_trigger` memtables, L1 and below their byte budgets in
    /// entries; the deepest level at what it holds), and what each level
    /// holds now.
    fn level_keys(&self, writing: usize) -> (Vec<u64>, Vec<u64>) {
        let sv = std::sync::Arc::clone(&self.current.read());
        let levels = &sv.version.levels;
        let entries = |l: usize| -> u64 { levels[l].iter().map(|t| t.meta.entries).sum() };
        let total_entries: u64 = (0..levels.len()).map(entries).sum();
        let total_bytes: u64 = levels.iter().flatten().map(|t| t.meta.file_size).sum();
        let entry_bytes = total_bytes
            .checked_div(total_entries)
            .map_or(64, |b| b.max(1));
        let deepest = (0..levels.len())
            .rev()
            .find(|&l| !levels[l].is_empty())
            .unwrap_or(0)
            .max(writing)
            .max(1);
        let shape = (0..=deepest)
            .map(|l| {
                if l == deepest {
                    return entries(l).max(1);
                }
                let capacity = if l == 0 {
                    self.options.memtable_bytes as u64 * self.options.l0_compaction_trigger as u64
                } else {
                    self.options.level_budget(l)
                };
                (capacity / entry_bytes).max(entries(l)).max(1)
            })
            .collect();
        let actual = (0..=deepest).map(entries).collect();
        (shape, actual)
    }

    pub(crate) fn new_file_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::SeqCst)
    }

    /// Writes entries (in table order) to new tables for `level`, cutting a
    /// table past `cut_bytes` only between user keys (so tables of a sorted
    /// level never share a user key). Tables are fsynced, the directory too.
    pub(crate) fn write_tables(
        &self,
        level: usize,
        entries: &mut dyn Iterator<Item = Result<Entry>>,
        cut_bytes: u64,
    ) -> Result<Vec<Arc<TableHandle>>> {
        let mut out = Vec::new();
        let mut current: Option<(u64, TableBuilder<Box<dyn WritableFile>>)> = None;
        let mut last_key: Option<Vec<u8>> = None;
        for entry in entries {
            let entry = entry?;
            let new_key = last_key.as_deref() != Some(entry.user_key.as_slice());
            if new_key
                && let Some((_, builder)) = &current
                && builder.estimated_file_size() >= cut_bytes
                && let Some((number, builder)) = current.take()
            {
                out.push(self.finish_table(level, number, builder)?);
            }
            if current.is_none() {
                let number = self.new_file_number();
                let path = names::table(&self.dir, number);
                let file = self.fs.create(&path).map_err(|e| Error::io(&path, e))?;
                current = Some((
                    number,
                    TableBuilder::new(file, &path, self.table_options(level)),
                ));
            }
            if let Some((_, builder)) = &mut current {
                builder.add(&entry.user_key, entry.seq, entry.kind, &entry.value)?;
            }
            if new_key {
                last_key = Some(entry.user_key);
            }
        }
        if let Some((number, builder)) = current.take() {
            out.push(self.finish_table(level, number, builder)?);
        }
        if !out.is_empty() {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io(&self.dir, e))?;
        }
        Ok(out)
    }

    fn finish_table(
        &self,
        level: usize,
        number: u64,
        builder: TableBuilder<Box<dyn WritableFile>>,
    ) -> Result<Arc<TableHandle>> {
        let summary = builder.finish()?;
        Counters::add(&self.counters.bytes_written, summary.file_size);
        if summary.properties.filter_kind.is_some() {
            Counters::add(&self.counters.filters_built, 1);
        }
        let p = &summary.properties;
        let meta = TableMeta {
            level,
            number,
            file_size: summary.file_size,
            entries: p.entries,
            smallest_seq: p.smallest_seq,
            largest_seq: p.largest_seq,
            smallest_key: p.smallest_key.clone(),
            largest_key: p.largest_key.clone(),
        };
        self.open_table(meta)
    }

    /// Opens the table a manifest record names, checking its size.
    pub(crate) fn open_table(&self, meta: TableMeta) -> Result<Arc<TableHandle>> {
        let path = names::table(&self.dir, meta.number);
        let file =
            crate::fs::open_table_file(self.fs.as_ref(), &path, self.options.use_direct_reads)
                .map_err(|e| Error::io(&path, e))?;
        let size = file.len().map_err(|e| Error::io(&path, e))?;
        if size != meta.file_size {
            return Err(Error::Corruption {
                path: path.clone(),
                offset: size,
                reason: format!(
                    "table is {size} bytes; the manifest recorded {}",
                    meta.file_size
                ),
            });
        }
        let table = Table::open(file, &path, meta.number, Some(Arc::clone(&self.cache)))?;
        if let FilterStatus::Unusable(reason) = table.filter_status()
            && self.options.on_corrupt_filter == CorruptFilterPolicy::Fail
        {
            return Err(Error::Corruption {
                path,
                offset: table.footer().filter.offset,
                reason: reason.to_string(),
            });
        }
        Ok(Arc::new(TableHandle::new(
            meta,
            Arc::new(table),
            path,
            Arc::clone(&self.fs),
            Arc::clone(&self.cache),
        )))
    }
}

impl DbInner {
    /// Rewrites the filter of every live table `select` picks, with the
    /// current policy for its level, and swaps the new files in.
    pub(crate) fn rebuild_tables(&self, select: impl Fn(&TableHandle) -> bool) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        let sv = Arc::clone(&self.current.read());
        let chosen: Vec<Arc<TableHandle>> = sv
            .version
            .levels
            .iter()
            .flatten()
            .filter(|t| select(t))
            .cloned()
            .collect();
        if chosen.is_empty() {
            return Ok(());
        }
        let mut added = Vec::with_capacity(chosen.len());
        for old in &chosen {
            let number = self.new_file_number();
            let path = names::table(&self.dir, number);
            let file = self.fs.create(&path).map_err(|e| Error::io(&path, e))?;
            let options = self.table_options(old.meta.level);
            let summary = bloomlsm_sstable::rebuild_filter(
                &old.table,
                file,
                &path,
                options.filter_kind,
                options.bits_per_key,
            )?;
            Counters::add(&self.counters.bytes_written, summary.file_size);
            if summary.properties.filter_kind.is_some() {
                Counters::add(&self.counters.filters_built, 1);
            }
            let meta = TableMeta {
                number,
                file_size: summary.file_size,
                ..old.meta.clone()
            };
            added.push(self.open_table(meta)?);
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        self.install(&added, &chosen, None)
    }
}
