//! Errors of the table crate: every corruption names file, block and offset.

use std::path::PathBuf;

use thiserror::Error;

use crate::block_error::BlockError;
use crate::format::{BlockKind, FooterError};
use crate::properties::PropertiesError;

/// What went wrong reading or writing a table.
#[derive(Debug, Error)]
pub enum Error {
    /// An I/O call failed; or the allocator refused a buffer whose size a
    /// table's bytes record (a block read, or at the open the decoded
    /// index or a properties key), kind `OutOfMemory`, naming the block
    /// through [`BlockReadError`]: not damage, as the same table opens
    /// where memory allows.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The table file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk are not what the format says they must be. The
    /// message states the reason too, so printing only this error says it
    /// all; `source()` gives the typed [`CorruptionReason`].
    #[error("corrupt table {path}: {kind} block at offset {offset}: {reason}")]
    Corruption {
        /// The table file.
        path: PathBuf,
        /// Which block (or the footer).
        kind: BlockKind,
        /// Byte offset of that block in the file.
        offset: u64,
        /// What is wrong.
        #[source]
        reason: CorruptionReason,
    },
    /// The footer names a format version this build does not read.
    #[error(
        "table {path} has format version {version}; this build reads versions {} to {supported}",
        crate::format::OLDEST_FORMAT_VERSION
    )]
    UnsupportedVersion {
        /// The table file.
        path: PathBuf,
        /// Version found.
        version: u32,
        /// Newest version this build reads (it reads every version from
        /// [`crate::format::OLDEST_FORMAT_VERSION`] to this one).
        supported: u32,
    },
    /// `add` was called with a key not after the previous one.
    #[error(
        "entries out of order: ({key:?}, seq {seq}) does not follow ({previous_key:?}, seq {previous_seq})"
    )]
    OutOfOrder {
        /// The previous user key.
        previous_key: Vec<u8>,
        /// The previous sequence number.
        previous_seq: u64,
        /// The rejected user key.
        key: Vec<u8>,
        /// The rejected sequence number.
        seq: u64,
    },
    /// A key or value is empty or larger than the configured limit.
    #[error("{what} of {len} bytes is outside the allowed 1..={max} bytes")]
    TooLarge {
        /// "key" or "value".
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A sequence number does not fit in 56 bits.
    #[error("sequence number {0} exceeds 2^56 - 1")]
    SequenceTooLarge(u64),
    /// `finish` was called before any entry was added.
    #[error("a table needs at least one entry")]
    EmptyTable,
    /// The filter could not be built.
    #[error("filter: {0}")]
    Filter(#[from] bloomlsm_filter::FilterError),
}

/// What is wrong with a damaged block: the cause carried by
/// [`Error::Corruption`], one variant per decoder.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CorruptionReason {
    /// The trailer, the handle, or the entries of a block.
    #[error(transparent)]
    Block(#[from] BlockError),
    /// The properties block's fields.
    #[error(transparent)]
    Properties(#[from] PropertiesError),
    /// The footer (or a file too short to hold one).
    #[error(transparent)]
    Footer(#[from] FooterError),
}

/// Which read of a table failed: the payload of the I/O error
/// [`Error::Io`] gives for a block (or the footer) that could not be read,
/// so the message names the block and its offset as a damaged block's
/// does. The I/O error keeps the OS error's kind, and the OS error itself
/// is this one's source (its number found by walking the sources).
///
/// Reach it with [`std::io::Error::get_ref`] and `downcast_ref`: the I/O
/// error's `source()` skips it (std gives the payload's own source, the
/// OS error), so a walk of the sources never meets it.
#[derive(Debug, Error)]
#[error("reading the {kind} block at offset {offset}: {source}")]
#[non_exhaustive]
pub struct BlockReadError {
    /// Which block (or the footer).
    pub kind: BlockKind,
    /// Byte offset of that block in the file.
    pub offset: u64,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

impl BlockReadError {
    /// `source`, the error of the read of the `kind` block at `offset`,
    /// as an I/O error of the same kind that names the block.
    /// A failed reopen of the table's file ([`ReopenError`]) read no
    /// block: it is passed on as it is, naming the reopen.
    pub(crate) fn wrap(kind: BlockKind, offset: u64, source: std::io::Error) -> std::io::Error {
        if ReopenError::is_reopen(&source) {
            return source;
        }
        std::io::Error::new(
            source.kind(),
            Self {
                kind,
                offset,
                source,
            },
        )
    }
}

/// A table's file could not be opened again for a read: the payload of
/// the I/O error a read gives when its file had been closed (by a bound on
/// open files, the engine's `Options::max_open_files`) and reopening it
/// failed (`EMFILE` at the descriptor limit, `EIO`, a removed file). No
/// block was read, so no [`BlockReadError`] names one: the message says
/// the reopen failed. The I/O error keeps the OS error's kind, and the OS
/// error is this one's source (its number found by walking the sources).
///
/// Reach it the same way as [`BlockReadError`]: [`std::io::Error::get_ref`] and
/// `downcast_ref`.
#[derive(Debug, Error)]
#[error("reopening the table file: {source}")]
#[non_exhaustive]
pub struct ReopenError {
    /// The OS error of the open.
    #[source]
    pub source: std::io::Error,
}

impl ReopenError {
    /// `source`, the error of a failed reopen of a table's file, as an I/O
    /// error of the same kind that says so.
    pub fn wrap(source: std::io::Error) -> std::io::Error {
        std::io::Error::new(source.kind(), Self { source })
    }

    /// Whether `e` is an I/O error [`ReopenError::wrap`] made.
    pub fn is_reopen(e: &std::io::Error) -> bool {
        e.get_ref().is_some_and(|r| r.is::<Self>())
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for errors that mean the bytes on disk are damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Self::Corruption { .. })
    }
}
