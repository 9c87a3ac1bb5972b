//! The store's table files: numbering, writing, opening and filter
//! rebuilds. Every table written gets a new filter built from exactly the
//! keys it holds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod cuts;
#[cfg(test)]
mod cuts_tests;
mod writer;

pub(crate) use cuts::{MAX_COMPACTION_FACTOR, OutputCuts, TableSpan};

use bloomlsm_sstable::{
    BlockCache, FilterStatus, Table, TableOptions, TableProperties, TableSummary,
};

use crate::FilterKind;
use crate::counters::Counters;
use crate::cursor::EntrySink;
use crate::damage::{Damage, TableRecordField};
use crate::error::{Error, Result};
use crate::filter_budget::Plan;
use crate::fs::{FileSystem, names};
use crate::manifest::TableMeta;
use crate::open_table_files::{LazyTableFile, OpenTableFiles};
use crate::options::{CorruptFilterPolicy, Options};
use crate::version::TableHandle;
use writer::{OutputSpec, TableWriter};

/// Where tables live and how they are written and read.
#[derive(Debug)]
pub(crate) struct TableFiles {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    cache: Arc<BlockCache>,
    /// The bound on open table files (`Options::max_open_files`); `None`:
    /// every table keeps its file open.
    open_files: Option<Arc<OpenTableFiles>>,
    /// The next file number to hand out (tables and WALs share numbers).
    next_file: AtomicU64,
    options: Options,
}

/// The largest next file number a manifest may record (a larger one reads
/// as damage: no store gets near it, allocating a few numbers a second).
/// [`TableFiles::new_file_number`] never hands out this number or more.
pub(crate) const MAX_FILE_NUMBER: u64 = 1 << 62;

/// The largest file number a stray file may have for an open to accept it
/// ([`crate::Error::FileNumbersExhausted`] otherwise), leaving the store
/// 2^32 numbers (32 PiB of 8 MiB tables) after it. A file past it within
/// 2^32 of the manifest's next number is the store's own, numbered by an
/// earlier open that started below it, and is accepted.
pub const MAX_OPEN_FILE_NUMBER: u64 = MAX_FILE_NUMBER - (1 << 32);

impl TableFiles {
    pub(crate) fn new(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        options: &Options,
        next_file: u64,
    ) -> Self {
        Self {
            dir: dir.to_path_buf(),
            fs,
            cache: Arc::new(BlockCache::new(options.block_cache_bytes)),
            open_files: options
                .max_open_files
                .map(|max| Arc::new(OpenTableFiles::new(max))),
            next_file: AtomicU64::new(next_file),
            options: options.clone(),
        }
    }

    pub(crate) fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// The bound on open table files, if `Options::max_open_files` sets one.
    pub(crate) fn open_files(&self) -> Option<&OpenTableFiles> {
        self.open_files.as_deref()
    }

    /// A file number never handed out before in this store, always below
    /// [`MAX_FILE_NUMBER`], so the next number a manifest records is at
    /// most [`MAX_FILE_NUMBER`] and reads back. Past it, refused with
    /// [`Error::FileNumbersExhausted`] (naming the manifest).
    pub(crate) fn new_file_number(&self) -> Result<u64> {
        self.next_file
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_FILE_NUMBER).then_some(n + 1)
            })
            .map_err(|n| Error::FileNumbersExhausted {
                path: self.dir.join(names::MANIFEST),
                number: n,
            })
    }

    /// The number the next `new_file_number` returns (for the manifest).
    pub(crate) fn next_file_number(&self) -> u64 {
        self.next_file.load(Ordering::SeqCst)
    }

    /// How tables are written. The key and value limits are the format's,
    /// not `Options::max_key_bytes`/`max_value_bytes`: those limit what a
    /// write may add (checked before it is logged), while a table holds
    /// whatever is already stored, which a store written under larger
    /// limits and opened under smaller ones may exceed; a flush,
    /// compaction or replay refusing it would stop all writes.
    fn table_options(&self, bits_per_key: f64) -> TableOptions {
        TableOptions {
            block_size: self.options.block_size,
            filter_kind: self.options.filter_kind,
            bits_per_key,
            max_key_bytes: bloomlsm_sstable::DEFAULT_MAX_KEY_BYTES,
            max_value_bytes: bloomlsm_sstable::DEFAULT_MAX_VALUE_BYTES,
            // Every table this build writes has version 2's smaller index;
            // version 1 tables of older stores are read as they are.
            format_version: bloomlsm_sstable::format::FORMAT_VERSION,
        }
    }

    /// Writes the entries `fill` gives its sink (in table order) to new
    /// tables for `level`, cut where `cuts` says, only between user keys
    /// (so tables of a sorted level never share a user key).
    /// Tables and the directory are fsynced. On error, the tables this call
    /// created are removed.
    pub(crate) fn write(
        &self,
        level: usize,
        cuts: OutputCuts,
        filters: &Plan,
        counters: &Counters,
        fill: &mut dyn FnMut(&mut dyn EntrySink) -> Result<()>,
    ) -> Result<Vec<Arc<TableHandle>>> {
        let spec = OutputSpec {
            level,
            bits_per_key: filters.bits_per_key,
            allowance: filters.allowance,
        };
        let mut writer = TableWriter::new(self, spec, cuts, counters);
        let written = fill(&mut writer).and_then(|()| writer.finish());
        match written {
            Ok(()) => Ok(std::mem::take(&mut writer.out)),
            Err(e) => {
                // The finished tables' handles are dropped without being
                // marked obsolete: remove every file created here by path.
                for path in &writer.created {
                    let _ = self.fs.remove(path);
                }
                Err(e)
            }
        }
    }

    /// Counts a finished table and opens it.
    fn finish(
        &self,
        level: usize,
        number: u64,
        summary: TableSummary,
        counters: &Counters,
    ) -> Result<Arc<TableHandle>> {
        Counters::add(&counters.bytes_written, summary.file_size);
        Counters::add(&counters.levels[level].bytes_written, summary.file_size);
        if summary.properties.filter_kind.is_some() {
            Counters::add(&counters.filters_built, 1);
        }
        let p = &summary.properties;
        self.open(TableMeta {
            level,
            number,
            file_size: summary.file_size,
            entries: p.entries,
            smallest_seq: p.smallest_seq,
            largest_seq: p.largest_seq,
            smallest_key: p.smallest_key.clone(),
            largest_key: p.largest_key.clone(),
        })
    }

    /// Opens the table a manifest record names, checking its size.
    pub(crate) fn open(&self, meta: TableMeta) -> Result<Arc<TableHandle>> {
        let path = names::table(&self.dir, meta.number);
        let table = self.open_table(&meta, &path)?;
        Ok(Arc::new(TableHandle::new(
            meta,
            Arc::new(table),
            path,
            Arc::clone(&self.fs),
            Arc::clone(&self.cache),
            self.open_files.clone(),
        )))
    }

    /// The reader of the table `meta` records, in its file at `path`.
    fn open_table(&self, meta: &TableMeta, path: &Path) -> Result<Table> {
        let direct = self.options.use_direct_reads;
        let Some(open_files) = &self.open_files else {
            let file = crate::fs::open_table_file(self.fs.as_ref(), path, direct)?;
            return self.open_table_in(meta, path, file);
        };
        let lazy = Arc::new(LazyTableFile::new(
            meta.number,
            path.to_path_buf(),
            Arc::clone(&self.fs),
            direct,
            Arc::clone(open_files),
        ));
        // Every read of the open goes to one descriptor, as without the
        // bound: the open succeeds whole or fails (a reopen failing between
        // the index and the filter read would leave the table without its
        // filter, taken for damage).
        let table = lazy
            .pin()
            .map_err(|e| Error::io(path, e))
            .and_then(|()| self.open_table_in(meta, path, Arc::clone(&lazy) as _));
        lazy.unpin();
        if table.is_err() {
            // No handle on the table was made, so none closes its file when
            // it drops: a failed flush's or copy's file, removed next, would
            // stay open in the set (a table rebuilt in place reopens).
            open_files.close(meta.number);
        }
        table
    }

    /// [`TableFiles::open_table`] reading through `file`.
    fn open_table_in(
        &self,
        meta: &TableMeta,
        path: &Path,
        file: Arc<dyn bloomlsm_sstable::RandomAccessFile>,
    ) -> Result<Table> {
        let size = file.len().map_err(|e| Error::io(path, e))?;
        // Bytes past the recorded size are an in-place filter rebuild whose
        // install never became durable: not the table's.
        if size < meta.file_size {
            return Err(Error::corruption(
                path,
                size,
                Damage::TableSize {
                    found: size,
                    recorded: meta.file_size,
                },
            ));
        }
        let table = Table::open_at(
            file,
            path,
            meta.file_size,
            meta.number,
            Some(Arc::clone(&self.cache)),
        )?;
        if let FilterStatus::Unusable(reason) = table.filter_status()
            && self.options.on_corrupt_filter == CorruptFilterPolicy::Fail
        {
            // A read that failed (EIO, say) found no damaged byte: it is an
            // I/O error of its kind, not corruption (`Error::io_kind`, and
            // the `WriteStop` a failed flush or compaction leaves). It
            // carries the reason (which block, where) with the OS's error
            // number inside (`Error::raw_os_error` finds it): EIO has no
            // kind of its own (`Uncategorized`), so only the number tells
            // it apart.
            // (Under the other policies such a read is retried by later
            // lookups, `Table::filter_status`.)
            if let bloomlsm_sstable::FilterLoadError::Read { source, .. } = reason {
                let source = std::io::Error::new(source.kind(), reason.clone());
                return Err(Error::io(path, source));
            }
            return Err(Error::corruption(
                path,
                table.footer().filter.offset,
                Damage::Filter(reason.clone()),
            ));
        }
        Ok(table)
    }

    /// `old` with a new filter of `kind` at `bits_per_key`: appended to its
    /// own file when the file system can and the bytes this leaves unused
    /// stay within `1 / MAX_DEAD_SHARE` of the table's
    /// ([`Rebuilt::in_place`]), else a copy under a new number. The caller
    /// syncs the directory and installs the result in place of `old`.
    pub(crate) fn rebuild(
        &self,
        old: &TableHandle,
        bits_per_key: f64,
        kind: FilterKind,
        counters: &Counters,
    ) -> Result<Rebuilt> {
        let dead = old.table.bytes_dead_after_append();
        if dead <= (old.meta.file_size - dead) / MAX_DEAD_SHARE {
            let path = names::table(&self.dir, old.meta.number);
            // On an error (a file system that cannot append, `Unsupported`;
            // a table file that cannot be opened for writing while new files
            // can be created), the copy below, which needs neither.
            if let Ok(file) = self.fs.append_at(&path, old.meta.file_size) {
                let table = self.append_filter(old, file, &path, bits_per_key, kind, counters)?;
                return Ok(Rebuilt {
                    table,
                    in_place: true,
                });
            }
        }
        Ok(Rebuilt {
            table: self.rebuild_copy(old, bits_per_key, kind, counters)?,
            in_place: false,
        })
    }

    /// [`TableFiles::rebuild`] in place: the table keeps its number, and
    /// its manifest record changes only in its size. Nothing is removed on
    /// failure: the file is the live table's, and whatever was appended
    /// lies past the size every reader and the manifest know.
    fn append_filter(
        &self,
        old: &TableHandle,
        file: Box<dyn bloomlsm_sstable::WritableFile>,
        path: &Path,
        bits_per_key: f64,
        kind: FilterKind,
        counters: &Counters,
    ) -> Result<Arc<TableHandle>> {
        let summary = bloomlsm_sstable::append_filter(&old.table, file, path, kind, bits_per_key)?;
        let appended = summary.file_size - old.meta.file_size;
        Counters::add(&counters.bytes_written, appended);
        Counters::add(&counters.levels[old.meta.level].bytes_written, appended);
        if summary.properties.filter_kind.is_some() {
            Counters::add(&counters.filters_built, 1);
        }
        let meta = TableMeta {
            file_size: summary.file_size,
            ..old.meta.clone()
        };
        let table = self.open_table(&meta, path)?;
        // The same file as `old`'s: it lives until the last handle on it
        // (the old one held by a reader, or this one) lets go.
        Ok(Arc::new(old.appended_to(meta, Arc::new(table))))
    }

    /// [`TableFiles::rebuild`] as a copy of `old` under a new number (data
    /// blocks copied unchanged).
    fn rebuild_copy(
        &self,
        old: &TableHandle,
        bits_per_key: f64,
        kind: FilterKind,
        counters: &Counters,
    ) -> Result<Arc<TableHandle>> {
        let number = self.new_file_number()?;
        let path = names::table(&self.dir, number);
        let file = self.fs.create(&path)?;
        let rebuilt = bloomlsm_sstable::rebuild_filter(&old.table, file, &path, kind, bits_per_key)
            .map_err(Error::from)
            .and_then(|summary| {
                Counters::add(&counters.bytes_written, summary.file_size);
                Counters::add(
                    &counters.levels[old.meta.level].bytes_written,
                    summary.file_size,
                );
                if summary.properties.filter_kind.is_some() {
                    Counters::add(&counters.filters_built, 1);
                }
                self.open(TableMeta {
                    number,
                    file_size: summary.file_size,
                    ..old.meta.clone()
                })
            });
        if rebuilt.is_err() {
            let _ = self.fs.remove(&path);
        }
        rebuilt
    }

    pub(crate) fn sync_dir(&self) -> Result<()> {
        Ok(self.fs.sync_dir(&self.dir)?)
    }
}

/// A table may be rebuilt in place while the bytes the append leaves
/// unused are at most this fraction (1 / `MAX_DEAD_SHARE`) of the rest:
/// past it, a copy drops them. They count in the level's size and the
/// store's space like any table bytes.
const MAX_DEAD_SHARE: u64 = 8;

/// A rebuilt table.
pub(crate) struct Rebuilt {
    pub(crate) table: Arc<TableHandle>,
    /// Its filter was appended to the old table's own file (same number,
    /// same path): the old handle leaves the view with its file kept.
    pub(crate) in_place: bool,
}

/// The table's properties agree with its manifest record on everything
/// the read path and compaction trust the record for. Recovery checks
/// every table it opens (after the tree's order, so a manifest whose
/// ranges break the order is refused as that); a table this process wrote
/// has its record made from its properties.
pub(crate) fn check_record(
    meta: &TableMeta,
    p: &TableProperties,
) -> std::result::Result<(), Damage> {
    let key = |k: &[u8]| k.escape_ascii().to_string();
    let differs = |field, found: String, recorded: String| {
        Err(Damage::TableRecord {
            field,
            found,
            recorded,
        })
    };
    if p.smallest_key != meta.smallest_key {
        return differs(
            TableRecordField::SmallestKey,
            key(&p.smallest_key),
            key(&meta.smallest_key),
        );
    }
    if p.largest_key != meta.largest_key {
        return differs(
            TableRecordField::LargestKey,
            key(&p.largest_key),
            key(&meta.largest_key),
        );
    }
    for (field, found, recorded) in [
        (
            TableRecordField::SmallestSeq,
            p.smallest_seq,
            meta.smallest_seq,
        ),
        (
            TableRecordField::LargestSeq,
            p.largest_seq,
            meta.largest_seq,
        ),
        (TableRecordField::Entries, p.entries, meta.entries),
    ] {
        if found != recorded {
            return differs(field, found.to_string(), recorded.to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod number_tests {
    use super::*;

    #[test]
    fn file_numbers_stop_below_the_largest_a_manifest_may_record() {
        let dir = Path::new("/nonexistent-store");
        let files = TableFiles::new(
            dir,
            Arc::new(crate::fs::RealFs),
            &Options::default(),
            MAX_FILE_NUMBER - 2,
        );
        assert_eq!(files.new_file_number().ok(), Some(MAX_FILE_NUMBER - 2));
        assert_eq!(files.new_file_number().ok(), Some(MAX_FILE_NUMBER - 1));
        for _ in 0..3 {
            match files.new_file_number() {
                Err(Error::FileNumbersExhausted { path, number }) => {
                    assert_eq!((path, number), (dir.join("MANIFEST"), MAX_FILE_NUMBER));
                }
                other => panic!("expected FileNumbersExhausted, got {other:?}"),
            }
        }
        // What a manifest written now would record reads back.
        assert_eq!(files.next_file_number(), MAX_FILE_NUMBER);
    }
}
