//! Whether a table's filter is in use, and why not when it is damaged.
//! A damaged filter is never an error: the table is read without it.

use bloomlsm_filter::FilterError;
use thiserror::Error;

use crate::block_error::BlockError;

/// Whether a table's filter is in use.
#[derive(Debug)]
pub enum FilterStatus {
    /// The filter decoded and answers every lookup.
    Loaded,
    /// The table was written without a filter (bits per key 0).
    Absent,
    /// The filter block could not be used; every key is "maybe". After a
    /// failed read (`FilterLoadError::Read`) only until a lookup's retry
    /// of the read succeeds; after damage, for good.
    Unusable(FilterLoadError),
}

/// Why a table's filter block is not used, and where it is (`offset` is
/// the filter block's offset in the table file). The message states the
/// cause too; `source()` gives it typed.
#[derive(Debug, Error)]
pub enum FilterLoadError {
    /// Reading the block failed.
    #[error("filter block at offset {offset} could not be read: {source}")]
    Read {
        /// Offset of the filter block.
        offset: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The block's handle or trailer is wrong (past the end, wrong type
    /// byte, checksum mismatch).
    #[error("filter block at offset {offset}: {source}")]
    Block {
        /// Offset of the filter block.
        offset: u64,
        /// What is wrong.
        #[source]
        source: BlockError,
    },
    /// The block is intact but its bytes are not a filter this build reads.
    #[error("filter block at offset {offset} does not decode: {source}")]
    Decode {
        /// Offset of the filter block.
        offset: u64,
        /// The filter crate's reason.
        #[source]
        source: FilterError,
    },
}

/// A copy keeps the read error's OS error number, or else its kind and
/// message (an I/O error is not `Clone`), so the engine can carry the
/// reason in its own error.
impl Clone for FilterLoadError {
    fn clone(&self) -> Self {
        match self {
            Self::Read { offset, source } => Self::Read {
                offset: *offset,
                source: match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Self::Block { offset, source } => Self::Block {
                offset: *offset,
                source: source.clone(),
            },
            Self::Decode { offset, source } => Self::Decode {
                offset: *offset,
                source: source.clone(),
            },
        }
    }
}

impl FilterLoadError {
    /// Offset of the filter block in the table file.
    pub fn offset(&self) -> u64 {
        match self {
            Self::Read { offset, .. }
            | Self::Block { offset, .. }
            | Self::Decode { offset, .. } => *offset,
        }
    }
}
