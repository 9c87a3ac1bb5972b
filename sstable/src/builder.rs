//! Writes a table: data blocks as entries stream in, then filter, index,
//! properties and footer (FORMAT.md).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use bloomlsm_filter::{Filter, FilterBuilder, FilterKind, HASH_ID_XXH3_64, KeyHash};

use crate::block_builder::BlockBuilder;
use crate::entry::{EntryKind, MAX_SEQUENCE, compare_keys, encode_internal_key};
use crate::error::{Error, Result};
use crate::file::WritableFile;
use crate::format::{
    BlockHandle, BlockKind, FORMAT_VERSION, Footer, OLDEST_FORMAT_VERSION, PROPERTIES_VERSION,
    RESTART_INTERVAL, block_trailer,
};
use crate::index::shortest_separator;
use crate::index_block::IndexBlockWriter;
use crate::properties::TableProperties;

/// Default largest user key: 64 KiB.
pub const DEFAULT_MAX_KEY_BYTES: usize = 64 * 1024;
/// Default largest value: 64 MiB.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 64 * 1024 * 1024;

/// How a table is written.
#[derive(Clone, Debug, PartialEq)]
pub struct TableOptions {
    /// Target data block size in bytes (default 4096).
    pub block_size: usize,
    /// Filter layout (default blocked).
    pub filter_kind: FilterKind,
    /// Bits per key of the filter; 0 writes no filter block (default 10).
    pub bits_per_key: f64,
    /// Largest user key accepted (default [`DEFAULT_MAX_KEY_BYTES`]).
    pub max_key_bytes: usize,
    /// Largest value accepted (default [`DEFAULT_MAX_VALUE_BYTES`]).
    pub max_value_bytes: usize,
    /// Table format version to write (default [`FORMAT_VERSION`], 2; 1 for
    /// tables that builds before version 2 can read: the same table with a
    /// larger index block). Any other value makes the first `add` fail
    /// with [`Error::UnsupportedVersion`], before anything is written.
    pub format_version: u32,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            block_size: 4096,
            filter_kind: FilterKind::Blocked,
            bits_per_key: 10.0,
            max_key_bytes: DEFAULT_MAX_KEY_BYTES,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            format_version: FORMAT_VERSION,
        }
    }
}

impl TableOptions {
    /// True when tables get a filter block.
    pub fn has_filter(&self) -> bool {
        self.bits_per_key.is_finite() && self.bits_per_key > 0.0
    }
}

/// What `finish` wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSummary {
    /// The table file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub file_size: u64,
    /// Its properties (key range, sequence range, counts, filter).
    pub properties: TableProperties,
}

/// Streams sorted entries into a table file. Keys must arrive in table
/// order (user key ascending, sequence descending); anything else is an
/// error and nothing is written for that entry.
#[derive(Debug)]
pub struct TableBuilder<W: WritableFile> {
    file: W,
    path: PathBuf,
    options: TableOptions,
    data: BlockBuilder,
    index: IndexBlockWriter,
    /// The last finished data block, whose index entry waits for the next
    /// entry's user key (its separator lies between): that block's last
    /// user key and sequence number, and its handle.
    pending_index: Option<(Vec<u8>, u64, BlockHandle)>,
    filter: Option<FilterBuilder>,
    offset: u64,
    last: Option<(Vec<u8>, u64)>,
    scratch: Vec<u8>,
    props: TableProperties,
}

impl<W: WritableFile> TableBuilder<W> {
    /// A builder writing to `file`, which lives at `path` (used in errors
    /// and the summary).
    pub fn new(file: W, path: impl AsRef<Path>, options: TableOptions) -> Self {
        let filter = options
            .has_filter()
            .then(|| FilterBuilder::new(options.filter_kind, options.bits_per_key));
        Self {
            file,
            path: path.as_ref().to_path_buf(),
            data: BlockBuilder::new(RESTART_INTERVAL),
            index: IndexBlockWriter::new(options.format_version),
            pending_index: None,
            filter,
            offset: 0,
            last: None,
            scratch: Vec::new(),
            props: TableProperties {
                format_version: PROPERTIES_VERSION,
                entries: 0,
                distinct_keys: 0,
                tombstones: 0,
                data_blocks: 0,
                data_bytes: 0,
                smallest_seq: u64::MAX,
                largest_seq: 0,
                filter_kind: None,
                filter_hash_id: 0,
                filter_hashes: 0,
                filter_bits: 0,
                bits_per_key: if options.has_filter() {
                    options.bits_per_key
                } else {
                    0.0
                },
                filter_bytes: 0,
                created_micros: 0,
                smallest_key: Vec::new(),
                largest_key: Vec::new(),
            },
            options,
        }
    }

    /// Checks an entry against the limits without adding it.
    pub fn check_limits(options: &TableOptions, user_key: &[u8], value: &[u8]) -> Result<()> {
        if user_key.is_empty() || user_key.len() > options.max_key_bytes {
            return Err(Error::TooLarge {
                what: "key",
                len: user_key.len(),
                max: options.max_key_bytes,
            });
        }
        if value.len() > options.max_value_bytes {
            return Err(Error::TooLarge {
                what: "value",
                len: value.len(),
                max: options.max_value_bytes,
            });
        }
        Ok(())
    }

    /// Adds one entry. REQUIRES: `(user_key, seq)` follows the previous entry
    /// in table order (checked: an error otherwise, and nothing is written).
    pub fn add(&mut self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) -> Result<()> {
        Self::check_limits(&self.options, user_key, value)?;
        let version = self.options.format_version;
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                path: self.path.clone(),
                version,
                supported: FORMAT_VERSION,
            });
        }
        if seq > MAX_SEQUENCE {
            return Err(Error::SequenceTooLarge(seq));
        }
        let new_user_key = match &self.last {
            Some((prev, prev_seq)) => {
                if compare_keys(prev, *prev_seq, user_key, seq) != std::cmp::Ordering::Less {
                    return Err(Error::OutOfOrder {
                        previous_key: prev.clone(),
                        previous_seq: *prev_seq,
                        key: user_key.to_vec(),
                        seq,
                    });
                }
                prev.as_slice() != user_key
            }
            None => true,
        };
        if new_user_key {
            if let Some(filter) = &mut self.filter {
                filter.add_hash(KeyHash::of(user_key));
            }
            self.props.distinct_keys += 1;
            if self.props.entries == 0 {
                self.props.smallest_key = user_key.to_vec();
            }
        }
        self.add_pending_index_entry(Some(user_key));
        match &mut self.last {
            Some((prev, prev_seq)) => {
                prev.clear();
                prev.extend_from_slice(user_key);
                *prev_seq = seq;
            }
            None => self.last = Some((user_key.to_vec(), seq)),
        }
        self.scratch.clear();
        encode_internal_key(&mut self.scratch, user_key, seq, kind);
        self.data.add(&self.scratch, value);
        self.props.entries += 1;
        if kind == EntryKind::Delete {
            self.props.tombstones += 1;
        }
        self.props.smallest_seq = self.props.smallest_seq.min(seq);
        self.props.largest_seq = self.props.largest_seq.max(seq);
        if self.data.estimated_size() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Distinct user keys added so far: the keys the filter is built from.
    pub fn distinct_keys(&self) -> u64 {
        self.props.distinct_keys
    }

    /// Changes the filter's bits per key before `finish` (a writer that
    /// spreads a filter budget over several tables learns each table's keys
    /// only at its end); 0 or less writes no filter block. A table begun
    /// without a filter stays without one.
    pub fn set_filter_bits_per_key(&mut self, bits_per_key: f64) {
        if !(bits_per_key.is_finite() && bits_per_key > 0.0) {
            self.filter = None;
            self.props.bits_per_key = 0.0;
        } else if let Some(filter) = &mut self.filter {
            filter.set_bits_per_key(bits_per_key);
            self.props.bits_per_key = bits_per_key;
        }
    }

    /// Bytes written so far plus the open data block: the file size if it
    /// were finished now, less filter, index and properties.
    pub fn estimated_file_size(&self) -> u64 {
        self.offset + self.data.estimated_size() as u64
    }

    fn write_block(&mut self, kind: BlockKind, block: &[u8]) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: block.len() as u64,
        };
        let trailer = block_trailer(kind, block);
        self.write_all(block)?;
        self.write_all(&trailer)?;
        Ok(handle)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_all(bytes).map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        // The block's last entry is the last one added.
        let Some((last_user, last_seq)) = self.last.clone() else {
            return Ok(());
        };
        let block = self.data.finish();
        let start = self.offset;
        let handle = self.write_block(BlockKind::Data, &block)?;
        self.data.recycle(block);
        self.props.data_blocks += 1;
        self.props.data_bytes += self.offset - start;
        self.pending_index = Some((last_user, last_seq, handle));
        Ok(())
    }

    /// Writes the index entry of the block waiting for its separator, if
    /// any, now that the next user key is known (`None`: the table ends).
    /// The separator (FORMAT.md, "Index block"): where the next block
    /// starts with more versions of the same user key, the block's last
    /// internal key; else the shortest user key `S` with
    /// `last <= S < next` (the last user key itself at the table's end),
    /// with sequence number 0, which sorts after every version of `S`.
    fn add_pending_index_entry(&mut self, next_user_key: Option<&[u8]>) {
        let Some((last_user, last_seq, handle)) = self.pending_index.take() else {
            return;
        };
        let (separator, seq) = match next_user_key {
            Some(next) if next == last_user.as_slice() => (last_user.as_slice(), last_seq),
            Some(next) => (shortest_separator(&last_user, next), 0),
            None => (last_user.as_slice(), 0),
        };
        self.index.add(separator, seq, handle);
    }

    /// Writes filter, index, properties and footer, fsyncs the file and
    /// returns what was written. An empty table is an error.
    pub fn finish(mut self) -> Result<TableSummary> {
        if self.props.entries == 0 {
            return Err(Error::EmptyTable);
        }
        self.flush_data_block()?;
        self.add_pending_index_entry(None);
        let filter_handle = match self.filter.take() {
            Some(builder) => {
                let filter = builder.finish()?;
                let bytes = filter.to_bytes();
                self.props.filter_kind = Some(filter.kind());
                self.props.filter_hash_id = HASH_ID_XXH3_64;
                self.props.filter_hashes = filter.num_hashes();
                self.props.filter_bits = filter.num_bits();
                self.props.filter_bytes = bytes.len() as u64;
                self.write_block(BlockKind::Filter, &bytes)?
            }
            None => BlockHandle::default(),
        };
        let index = self.index.finish();
        let index_handle = self.write_block(BlockKind::Index, &index)?;
        self.props.largest_key = self
            .last
            .as_ref()
            .map(|(k, _)| k.clone())
            .unwrap_or_default();
        self.props.created_micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let props = self.props.encode();
        let properties_handle = self.write_block(BlockKind::Properties, &props)?;
        let footer = Footer {
            filter: filter_handle,
            index: index_handle,
            properties: properties_handle,
            version: self.options.format_version,
        };
        self.write_all(&footer.encode())?;
        self.file.sync().map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(TableSummary {
            path: self.path,
            file_size: self.offset,
            properties: self.props,
        })
    }
}
