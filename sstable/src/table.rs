//! Opens a table, keeps its footer, index, properties and filter in memory,
//! and answers point lookups with at most one data block read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm_filter::{AnyFilter, Filter, FilterError, FilterKind, KeyHash};

use crate::block::{Block, BlockIter};
use crate::block_error::BlockError;
use crate::cache::BlockCache;
use crate::entry::{EntryKind, split_internal_key};
use crate::error::{BlockReadError, CorruptionReason, Error, Result};
use crate::file::RandomAccessFile;
use crate::filter_status::{FilterLoadError, FilterStatus};
use crate::format::{
    BlockHandle, BlockKind, FOOTER_LEN, Footer, FooterError, TRAILER_LEN, verify_block,
};
use crate::index::TableIndex;
use crate::index_block;
use crate::lookup::{BlockSource, Lookup, Outcome};
use crate::properties::TableProperties;

mod filter_slot;
mod readahead;

use filter_slot::FilterSlot;
pub use filter_slot::MAX_RETRY_INTERVAL as MAX_FILTER_RETRY_INTERVAL;
pub(crate) use readahead::Readahead;

/// An open table, shared by readers (`Arc<Table>`). Immutable but for a
/// filter whose read failed at the open, which a later lookup's retry may
/// load (once, whole: `table/filter_slot.rs`).
#[derive(Debug)]
pub struct Table {
    id: u64,
    file: TableFile,
    footer: Footer,
    properties: TableProperties,
    pub(crate) index: TableIndex,
    /// The filter, or why it is missing; a filter whose read failed at the
    /// open is retried by later lookups (`table/filter_slot.rs`).
    filter: FilterSlot,
    cache: Option<Arc<BlockCache>>,
}

impl Table {
    /// Opens the table file at `path` with the standard file system.
    pub fn open_path(
        path: impl AsRef<Path>,
        id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Self> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::open(Arc::new(file), path, id, cache)
    }

    /// Reads and verifies footer, properties, index and filter. `id` must
    /// be unique among tables sharing `cache`.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: impl AsRef<Path>,
        id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file_size = file.len().map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Self::open_at(file, path, file_size, id, cache)
    }

    /// [`Table::open`] of the table that ends at `file_size`: its footer is
    /// the 64 bytes before it, and bytes past it are not the table's (an
    /// in-place filter rebuild that never completed,
    /// [`crate::append_filter`]). REQUIRES: the file holds `file_size` bytes.
    pub fn open_at(
        file: Arc<dyn RandomAccessFile>,
        path: impl AsRef<Path>,
        file_size: u64,
        id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let corrupt = |offset, reason: FooterError| Error::Corruption {
            path: path.clone(),
            kind: BlockKind::Footer,
            offset,
            reason: reason.into(),
        };
        if file_size < FOOTER_LEN as u64 {
            // The whole file is the footer's candidate; it is under 64 bytes.
            return Err(corrupt(0, FooterError::Length(file_size as usize)));
        }
        let footer_at = file_size - FOOTER_LEN as u64;
        let mut footer_bytes = [0u8; FOOTER_LEN];
        file.read_exact_at(&mut footer_bytes, footer_at)
            .map_err(|e| io(BlockReadError::wrap(BlockKind::Footer, footer_at, e)))?;
        let footer = Footer::decode(&footer_bytes).map_err(|e| match e {
            FooterError::Version(version) => Error::UnsupportedVersion {
                path: path.clone(),
                version,
                supported: crate::format::FORMAT_VERSION,
            },
            other => corrupt(footer_at, other),
        })?;
        let source = TableFile {
            path,
            file,
            size: file_size,
        };
        let props = source.read_verified(footer.properties, BlockKind::Properties)?;
        let properties = TableProperties::decode_for_open(&props)
            .map_err(|e| {
                source.io(BlockReadError::wrap(
                    BlockKind::Properties,
                    footer.properties.offset,
                    e,
                ))
            })?
            .map_err(|reason| {
                source.corruption(BlockKind::Properties, footer.properties.offset, reason)
            })?;
        let index = source.read_verified(footer.index, BlockKind::Index)?;
        let index = source.decode_index(footer.version, index, footer.index.offset)?;
        // Every block the writer wrote, no fewer: a version 2 index has no
        // count, so one cut at an entry boundary decodes on its own.
        let (blocks, data_end) = (index.len() as u64, index.data_end());
        if blocks != properties.data_blocks || data_end != properties.data_bytes {
            return Err(source.corruption(
                BlockKind::Index,
                footer.index.offset,
                BlockError::IndexDisagreesWithProperties {
                    blocks,
                    data_end,
                    recorded_blocks: properties.data_blocks,
                    recorded_bytes: properties.data_bytes,
                },
            ));
        }
        let loaded = (!footer.filter.is_null()).then(|| source.load_filter(footer.filter));
        let filter = FilterSlot::new(loaded, footer.filter, properties.filter_kind);
        Ok(Self {
            id,
            file: source,
            footer,
            properties,
            index,
            filter,
            cache,
        })
    }

    /// A block with its trailer, verified, as stored (for copying).
    pub(crate) fn read_verified_raw(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
    ) -> Result<Vec<u8>> {
        let mut block = self.file.read_verified_bulk(handle, kind)?;
        block.extend_from_slice(&crate::format::block_trailer(kind, &block));
        Ok(block)
    }

    /// The newest version of `user_key` visible at `snapshot_seq` (entries
    /// with a larger sequence number are invisible). `hash` must be
    /// `KeyHash::of(user_key)`. A key outside the table's range or ruled
    /// out by the filter costs no I/O and no allocation.
    pub fn get(&self, user_key: &[u8], hash: KeyHash, snapshot_seq: u64) -> Result<Lookup> {
        if user_key < self.properties.smallest_key.as_slice()
            || user_key > self.properties.largest_key.as_slice()
        {
            return Ok(Lookup {
                outcome: Outcome::OutOfRange,
                filter_consulted: false,
                block: None,
            });
        }
        self.get_in_range(user_key, hash, snapshot_seq)
    }

    /// [`Table::get`] for a caller that has already found `user_key` within
    /// the table's range (an engine's level search does): the range is not
    /// compared again. Outside the range the answer is still right (the
    /// filter or the index rules the key out), only never `OutOfRange`.
    pub fn get_in_range(
        &self,
        user_key: &[u8],
        hash: KeyHash,
        snapshot_seq: u64,
    ) -> Result<Lookup> {
        let filter_consulted = match self.filter.for_lookup(&self.file) {
            Some(filter) => {
                if !filter.contains_hash(hash) {
                    return Ok(Lookup {
                        outcome: Outcome::FilterNegative,
                        filter_consulted: true,
                        block: None,
                    });
                }
                true
            }
            None => false,
        };
        let i = self.index.first_block_not_before(user_key, snapshot_seq);
        if i >= self.index.len() {
            // Past the last entry: only newer versions of the largest key.
            let in_table = i > 0 && self.index.ends_with_version_of(i - 1, user_key);
            return Ok(Lookup {
                outcome: Outcome::NotFound {
                    key_in_table: in_table,
                },
                filter_consulted,
                block: None,
            });
        }
        let handle = self.index.handle(i);
        let (block, source) = self.data_block(handle, true)?;
        let mut it = BlockIter::new(&*block);
        let corrupt =
            |reason: BlockError| self.file.corruption(BlockKind::Data, handle.offset, reason);
        let newer_seen = it.seek(user_key, snapshot_seq).map_err(corrupt)?;
        let newer_before_block = i > 0 && self.index.ends_with_version_of(i - 1, user_key);
        let outcome = match it.valid().then(|| split_internal_key(it.key())).flatten() {
            Some((u, seq, tag)) if u == user_key => match EntryKind::from_tag(tag) {
                Some(EntryKind::Put) => Outcome::Found {
                    seq,
                    value: Some(it.value().to_vec()),
                },
                Some(EntryKind::Delete) => Outcome::Found { seq, value: None },
                None => {
                    return Err(corrupt(BlockError::UnknownEntryKind {
                        offset: it.entry_offset(),
                        tag,
                    }));
                }
            },
            Some(_) | None => Outcome::NotFound {
                key_in_table: newer_seen || newer_before_block,
            },
        };
        Ok(Lookup {
            outcome,
            filter_consulted,
            block: Some(source),
        })
    }

    /// The data block at `handle`, from the cache or the file (verified and
    /// then cached when `fill_cache`). `fill_cache == false` is a pass over
    /// the whole table (compaction, filter rebuild): its reads are bulk reads
    /// ([`crate::RandomAccessFile::read_exact_at_bulk`]).
    pub(crate) fn data_block(
        &self,
        handle: BlockHandle,
        fill_cache: bool,
    ) -> Result<(Arc<Block>, BlockSource)> {
        if let Some(cache) = &self.cache
            && let Some(block) = cache.get(self.id, handle.offset)
        {
            return Ok((block, BlockSource::Cache));
        }
        let bytes = if fill_cache {
            self.file.read_verified(handle, BlockKind::Data)?
        } else {
            self.file.read_verified_bulk(handle, BlockKind::Data)?
        };
        let block = Arc::new(
            Block::new(bytes)
                .map_err(|r| self.file.corruption(BlockKind::Data, handle.offset, r))?,
        );
        if fill_cache && let Some(cache) = &self.cache {
            cache.insert(self.id, handle.offset, Arc::clone(&block));
        }
        Ok((block, BlockSource::File))
    }

    /// The corruption error for the `kind` block at file offset `offset`.
    pub(crate) fn corruption(
        &self,
        kind: BlockKind,
        offset: u64,
        reason: impl Into<CorruptionReason>,
    ) -> Error {
        self.file.corruption(kind, offset, reason)
    }

    /// The table's id (unique among tables sharing a cache).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The table file.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Table size in bytes: where its footer ends (the file may be longer).
    pub fn file_size(&self) -> u64 {
        self.file.size
    }

    /// Bytes of the table its footer still names: the data region and the
    /// filter, index and properties blocks with their trailers, and the
    /// footer. The rest of [`Table::file_size`] is what in-place filter
    /// rebuilds left behind (each an old filter, properties and footer).
    pub fn live_bytes(&self) -> u64 {
        let block = |h: BlockHandle| {
            if h.is_null() {
                0
            } else {
                h.size + TRAILER_LEN as u64
            }
        };
        self.index.data_end()
            + block(self.footer.filter)
            + block(self.footer.index)
            + block(self.footer.properties)
            + FOOTER_LEN as u64
    }

    /// Bytes [`crate::append_filter`] would leave unused in the file: all
    /// but the data region and the index block (which the new footer
    /// names again), so the replaced filter, properties and footer and
    /// whatever earlier appends left.
    pub fn bytes_dead_after_append(&self) -> u64 {
        let kept = self.index.data_end() + self.footer.index.size + TRAILER_LEN as u64;
        self.file.size.saturating_sub(kept)
    }

    /// The footer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The properties block.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// The filter in use, if any: loaded at the open, or later by a lookup
    /// that retried a failed read of it.
    pub fn filter(&self) -> Option<&AnyFilter> {
        self.filter.get()
    }

    /// Whether the filter is loaded, absent, or unusable (and why). A
    /// filter whose read failed at the open (`FilterLoadError::Read`, that
    /// failure) is unusable until a lookup's retry loads it: then
    /// `Loaded`. Damage a retry finds is final, as at the open.
    pub fn filter_status(&self) -> &FilterStatus {
        self.filter.status()
    }

    /// Whether the filter's read failed and later lookups retry it (not
    /// loaded yet, not found damaged).
    pub fn filter_awaits_retry(&self) -> bool {
        self.filter.awaits_retry()
    }

    /// Whether the filter awaits a retry and its latest failed read (the
    /// open's, or a retry's since) was the allocator's refusal
    /// (`OutOfMemory`) rather than the device's error.
    pub fn filter_read_refused_memory(&self) -> bool {
        self.filter.read_refused_memory()
    }

    /// Retries of a failed filter read run so far (lookups run them,
    /// ever more rarely while the read keeps failing: at most
    /// floor(log2 L) + 1 in L lookups that found the filter missing,
    /// the lookups between two at most [`MAX_FILTER_RETRY_INTERVAL`]).
    pub fn filter_retries(&self) -> u64 {
        self.filter.retries()
    }

    /// The filter's kind: of the loaded filter, or, while a failed read
    /// awaits its retry, as the properties record it. `None` without a
    /// filter or with a damaged one.
    pub fn filter_kind(&self) -> Option<FilterKind> {
        self.filter.kind()
    }

    /// Bytes of memory the filter takes: the loaded filter's
    /// (`Filter::memory_bytes`), or, while a failed read awaits its retry,
    /// what it will take once loaded (from the block's size; exact), so a
    /// budget that counts it is not exceeded when a retry loads it. 0
    /// without a filter or with a damaged one.
    pub fn filter_memory_bytes(&self) -> u64 {
        self.filter.memory_bytes()
    }

    /// Number of data blocks.
    pub fn data_block_count(&self) -> usize {
        self.index.len()
    }

    /// Smallest user key.
    pub fn smallest_key(&self) -> &[u8] {
        &self.properties.smallest_key
    }

    /// Largest user key.
    pub fn largest_key(&self) -> &[u8] {
        &self.properties.largest_key
    }

    /// Bytes of memory the filter and index keep.
    pub fn memory_bytes(&self) -> usize {
        self.filter.get().map_or(0, |f| f.memory_bytes()) + self.index.memory_bytes()
    }
}

/// The file under a table: reads blocks and names itself in errors.
#[derive(Debug)]
pub(crate) struct TableFile {
    path: PathBuf,
    file: Arc<dyn RandomAccessFile>,
    size: u64,
}

impl TableFile {
    /// The corruption error for the `kind` block at file offset `offset`.
    pub(crate) fn corruption(
        &self,
        kind: BlockKind,
        offset: u64,
        reason: impl Into<CorruptionReason>,
    ) -> Error {
        Error::Corruption {
            path: self.path.clone(),
            kind,
            offset,
            reason: reason.into(),
        }
    }

    /// The I/O error `source` of this table's file.
    fn io(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Reads a block and its trailer, checks type and checksum, returns the block.
    pub(crate) fn read_verified(&self, handle: BlockHandle, kind: BlockKind) -> Result<Vec<u8>> {
        self.read_verified_as(handle, kind, false)
    }

    /// [`Self::read_verified`] through the file's bulk reads, for a pass
    /// over the whole table.
    pub(crate) fn read_verified_bulk(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
    ) -> Result<Vec<u8>> {
        self.read_verified_as(handle, kind, true)
    }

    fn read_verified_as(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        bulk: bool,
    ) -> Result<Vec<u8>> {
        self.read_block(handle, kind, bulk)
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source: BlockReadError::wrap(kind, handle.offset, source),
            })?
            .map_err(|reason| self.corruption(kind, handle.offset, reason))
    }

    /// [`Self::read_verified`] with its two failures apart: the outer error
    /// is the read's, the inner one says what is wrong with the bytes.
    fn read_block(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        bulk: bool,
    ) -> std::io::Result<std::result::Result<Vec<u8>, BlockError>> {
        let limit = self.blocks_end();
        if !handle.fits_before(limit) {
            return Ok(Err(BlockError::PastEnd { handle, limit }));
        }
        let mut bytes = crate::room::zeroed_buffer(handle.size as usize + TRAILER_LEN)?;
        if bulk {
            self.file.read_exact_at_bulk(&mut bytes, handle.offset)?;
        } else {
            self.file.read_exact_at(&mut bytes, handle.offset)?;
        }
        let len = match verify_block(kind, &bytes) {
            Ok(block) => block.len(),
            Err(reason) => return Ok(Err(reason)),
        };
        bytes.truncate(len);
        Ok(Ok(bytes))
    }

    /// File offset where the blocks end and the footer begins.
    fn blocks_end(&self) -> u64 {
        // Table::open checked that the file holds a footer.
        self.size - FOOTER_LEN as u64
    }

    /// Decodes the index block at file offset `at` of a table of format
    /// `version`. Its handles must tile the data region from offset 0 in
    /// key order. Memory the allocator refuses is an `OutOfMemory` I/O
    /// error naming the index block, as a block read's is.
    fn decode_index(&self, version: u32, bytes: Vec<u8>, at: u64) -> Result<TableIndex> {
        index_block::decode(version, bytes, self.blocks_end())
            .map_err(|e| self.io(BlockReadError::wrap(BlockKind::Index, at, e)))?
            .map_err(|reason| self.corruption(BlockKind::Index, at, reason))
    }

    /// Reads and decodes the filter; why not, if it cannot (a failed
    /// read, which a lookup retries, or damage), never an error.
    fn load_filter(&self, handle: BlockHandle) -> std::result::Result<AnyFilter, FilterLoadError> {
        let offset = handle.offset;
        match self.read_block(handle, BlockKind::Filter, false) {
            Ok(Ok(bytes)) => AnyFilter::from_bytes(&bytes).map_err(|source| match source {
                // Memory refused, not damage: a failed read, retried.
                FilterError::OutOfMemory { .. } => FilterLoadError::Read {
                    offset,
                    source: std::io::Error::new(
                        std::io::ErrorKind::OutOfMemory,
                        source.to_string(),
                    ),
                },
                source => FilterLoadError::Decode { offset, source },
            }),
            Ok(Err(source)) => Err(FilterLoadError::Block { offset, source }),
            Err(source) => Err(FilterLoadError::Read { offset, source }),
        }
    }
}
