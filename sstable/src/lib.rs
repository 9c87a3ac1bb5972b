//! bloomlsm's table format: sorted, immutable files of data blocks, one
//! Bloom filter block, an index and properties, each block checksummed.
//! `FORMAT.md` beside this crate is the authority for the bytes.
//!
//! - [`TableBuilder`] streams sorted entries into a file and builds the
//!   filter from key hashes as they arrive.
//! - [`Table`] opens a file, keeps footer, index, properties and filter in
//!   memory, and answers [`Table::get`] with the filter first: a key the
//!   filter rules out costs no I/O.
//! - [`TableIter`] streams entries for scans and compaction.
//!
//! A damaged filter block never causes a false negative: the table opens
//! without it ([`FilterStatus::Unusable`]) and every key is read from disk.
//! Every other damaged block is an [`Error::Corruption`] naming the file,
//! the block kind and its offset, with the typed [`CorruptionReason`] (a
//! [`BlockError`], [`PropertiesError`] or [`FooterError`]) as its source.

mod block;
mod block_builder;
mod block_error;
mod builder;
mod cache;
mod entry;
mod error;
mod file;
mod filter_status;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod index;
mod index_block;
mod iter;
mod lookup;
mod properties;
mod rebuild;
mod room;
mod table;
mod varint;

pub use block::{Block, BlockIter};
pub use block_error::BlockError;
pub use builder::{
    DEFAULT_MAX_KEY_BYTES, DEFAULT_MAX_VALUE_BYTES, TableBuilder, TableOptions, TableSummary,
};
pub use cache::BlockCache;
pub use entry::{Entry, EntryKind, MAX_SEQUENCE, TAG_LEN, compare_keys};
pub use error::{BlockReadError, CorruptionReason, Error, ReopenError, Result};
pub use file::{RandomAccessFile, WritableFile};
pub use filter_status::{FilterLoadError, FilterStatus};
pub use format::{BlockHandle, BlockKind, Footer, FooterError};
pub use iter::{TableIter, entry_precedes};
pub use lookup::{BlockSource, FilterVerdict, Lookup, Outcome};
pub use properties::{PropertiesError, TableProperties};
pub use rebuild::{append_filter, rebuild_filter};
pub use table::{MAX_FILTER_RETRY_INTERVAL, Table};

/// A block's entries: (internal key, value) pairs.
pub type BlockEntries = Vec<(Vec<u8>, Vec<u8>)>;

/// Decodes the index block of a table of format `version` (1 or 2; any
/// other reads as 2) from its bytes (trailer removed) into the data
/// blocks' handles, checked as the reader checks them: they tile the file
/// from offset 0 and end at or before `limit`, the separators ascend.
/// The outer error is the allocator's refusal of the decoded index's
/// memory (kind `OutOfMemory`), the inner one what is wrong with the
/// bytes. Exposed for fuzzing.
pub fn decode_index_block(
    version: u32,
    bytes: &[u8],
    limit: u64,
) -> std::io::Result<std::result::Result<Vec<BlockHandle>, BlockError>> {
    Ok(index_block::decode(version, bytes.to_vec(), limit)?.map(|index| index.handles().collect()))
}

/// Decodes a data block, or a version 1 index block, from its bytes
/// (trailer removed), as the reader does after verifying the checksum;
/// exposed for fuzzing.
pub fn decode_block(bytes: &[u8]) -> std::result::Result<BlockEntries, BlockError> {
    let block = Block::new(bytes.to_vec())?;
    let mut it = block.iter();
    let mut out = Vec::new();
    while it.advance()? {
        out.push((it.key().to_vec(), it.value().to_vec()));
    }
    Ok(out)
}
