//! What can be wrong inside one block: its trailer, its restart array, its
//! entries, and (for index blocks) the handles it holds. Offsets named
//! "block offset" count from the block's first byte; where the block is in
//! the file is said by the [`crate::Error::Corruption`] that carries this.

use thiserror::Error;

use crate::entry::TAG_LEN;
use crate::format::{BlockHandle, BlockKind, HANDLE_LEN, TRAILER_LEN};

/// Why a block's bytes were refused. Every check of the block decoders and
/// of [`crate::format::verify_block`] has its own variant.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BlockError {
    /// Fewer bytes than a trailer (the caller passed a cut-off block).
    #[error("only {len} bytes, shorter than the {TRAILER_LEN}-byte trailer")]
    ShorterThanTrailer {
        /// Bytes given, trailer included.
        len: usize,
    },
    /// The trailer's type byte names another kind of block.
    #[error("type byte {found} where {} ({expected}) was expected", expected.type_byte())]
    WrongType {
        /// The type byte stored in the trailer.
        found: u8,
        /// The kind the reader asked for.
        expected: BlockKind,
    },
    /// The trailer's crc32 does not match the block and its type byte.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// The crc32 stored in the trailer.
        stored: u32,
        /// The crc32 of the bytes read.
        computed: u32,
    },
    /// A handle (from the footer or the index) reaches past the last block.
    #[error(
        "handle (offset {}, size {}) runs past the end of the blocks at {limit}",
        handle.offset,
        handle.size
    )]
    PastEnd {
        /// The handle.
        handle: BlockHandle,
        /// File offset where the blocks end (the footer begins).
        limit: u64,
    },
    /// Fewer than the 4 bytes of the restart count.
    #[error("only {len} bytes, too short for the restart count")]
    TooShort {
        /// Bytes in the block, trailer excluded.
        len: usize,
    },
    /// The restart count is 0 (every block has at least one restart).
    #[error("no restart points")]
    NoRestarts,
    /// The restart array is larger than the block.
    #[error("{restarts} restart points do not fit in {len} bytes")]
    RestartArrayTooLarge {
        /// The restart count.
        restarts: u32,
        /// Bytes in the block, trailer excluded.
        len: usize,
    },
    /// The restart array starts at byte 0: the block holds no entry.
    #[error("no entries before the restart array")]
    NoEntries,
    /// Restart point 0 is not the first entry.
    #[error("restart point 0 is at block offset {offset}, not 0")]
    FirstRestartNotZero {
        /// Where it points.
        offset: usize,
    },
    /// A restart point is not after the one before it.
    #[error("restart point {index} at block offset {offset} does not follow {previous}")]
    RestartOutOfOrder {
        /// Its position in the restart array.
        index: usize,
        /// Where it points.
        offset: usize,
        /// Where the previous restart point points.
        previous: usize,
    },
    /// A restart point is at or past the restart array.
    #[error(
        "restart point {index} at block offset {offset} is past the {entries_len} bytes of entries"
    )]
    RestartPastEntries {
        /// Its position in the restart array.
        index: usize,
        /// Where it points.
        offset: usize,
        /// Bytes of entries (where the restart array begins).
        entries_len: usize,
    },
    /// An entry's lengths are not varints, or its key or value runs past
    /// the entries.
    #[error("entry at block offset {offset} is malformed")]
    MalformedEntry {
        /// Where the entry begins.
        offset: usize,
    },
    /// A restart entry claims a prefix shared with the entry before it.
    #[error("restart entry at block offset {offset} shares {shared} bytes with a previous key")]
    RestartSharesPrefix {
        /// Where the entry begins.
        offset: usize,
        /// The shared length it claims.
        shared: usize,
    },
    /// An entry is `interval` or more entries past the last restart
    /// (restarts are at most `RESTART_INTERVAL` entries apart: FORMAT.md,
    /// "Data block").
    #[error("entry at block offset {offset} is {interval} or more entries past the last restart")]
    TooFarFromRestart {
        /// Where the entry begins.
        offset: usize,
        /// Entries a restart may cover (`RESTART_INTERVAL`).
        interval: usize,
    },
    /// An entry shares more bytes than the previous key has.
    #[error(
        "entry at block offset {offset} shares {shared} bytes of a {previous_len}-byte previous key"
    )]
    SharesTooMuch {
        /// Where the entry begins.
        offset: usize,
        /// The shared length it claims.
        shared: usize,
        /// Length of the previous internal key.
        previous_len: usize,
    },
    /// An internal key is shorter than its tag.
    #[error(
        "internal key at block offset {offset} is {len} bytes, shorter than its {TAG_LEN}-byte tag"
    )]
    KeyShorterThanTag {
        /// Where the entry begins.
        offset: usize,
        /// Length of the internal key.
        len: usize,
    },
    /// A data entry's tag names no entry kind.
    #[error("entry at block offset {offset} has unknown kind {tag}")]
    UnknownEntryKind {
        /// Where the entry begins.
        offset: usize,
        /// The kind byte of the tag.
        tag: u8,
    },
    /// An index entry's value is not a block handle.
    #[error(
        "index entry at block offset {offset} holds {len} bytes, not a {HANDLE_LEN}-byte handle"
    )]
    HandleLength {
        /// Where the entry begins.
        offset: usize,
        /// Length of its value.
        len: usize,
    },
    /// An index entry's data block does not start where the previous ends.
    #[error(
        "index entry at block offset {offset} places a data block at {}, where the previous ends at {expected}",
        handle.offset
    )]
    HandleMisplaced {
        /// Where the entry begins.
        offset: usize,
        /// The handle it holds.
        handle: BlockHandle,
        /// File offset where the data block should begin.
        expected: u64,
    },
    /// An index entry's key is not after the previous entry's.
    #[error("index entry at block offset {offset} does not follow the previous entry's key")]
    IndexOutOfOrder {
        /// Where the entry begins.
        offset: usize,
    },
    /// The index's separators hold more bytes than the data region they
    /// index (each is at most its block's last user key).
    #[error(
        "index entry at block offset {offset} brings its separators to {key_bytes} bytes, past the {limit} bytes before the index"
    )]
    IndexKeysPastData {
        /// Where the entry begins.
        offset: usize,
        /// Bytes of the separators up to and including this entry's.
        key_bytes: u64,
        /// File offset where the blocks end: the data region is within it.
        limit: u64,
    },
    /// The index names other data blocks than the properties block counts
    /// (an index cut short at an entry boundary, which version 2's layout,
    /// with no count, cannot tell on its own).
    #[error(
        "index names {blocks} data blocks ending at {data_end}; the properties count {recorded_blocks} ending at {recorded_bytes}"
    )]
    IndexDisagreesWithProperties {
        /// Data blocks the index names.
        blocks: u64,
        /// File offset where the index's last data block ends.
        data_end: u64,
        /// The properties block's data block count.
        recorded_blocks: u64,
        /// The properties block's data bytes (trailers included), where
        /// the data blocks end.
        recorded_bytes: u64,
    },
}
