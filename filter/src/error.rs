//! Errors of the filter crate.

use thiserror::Error;

/// Why a serialized filter could not be decoded, or a filter could not be
/// built. Every decoding failure is one of these; decoding never panics.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FilterError {
    /// Fewer bytes than the fixed header and checksum need, or than the
    /// header's sizes promise.
    #[error("filter truncated: need {needed} bytes, have {actual}")]
    Truncated {
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        actual: u64,
    },
    /// The trailing crc32 does not match the bytes before it.
    #[error("filter checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// The crc32 stored in the last four bytes.
        stored: u32,
        /// The crc32 of the bytes before it.
        computed: u32,
    },
    /// The header does not start with the filter magic.
    #[error("not a bloomlsm filter: magic {0:#010x}")]
    BadMagic(u32),
    /// A format version this build does not know.
    #[error("unsupported filter format version {0}")]
    UnsupportedVersion(u16),
    /// A filter kind tag this build does not know.
    #[error("unknown filter kind tag {0}")]
    UnknownKind(u8),
    /// A hash id this build does not know.
    #[error("unknown filter hash id {0}")]
    UnknownHash(u8),
    /// The header names a seed other than the frozen one.
    #[error("unexpected filter hash seed {0:#x}")]
    UnexpectedSeed(u64),
    /// The header's parameters are out of range (k outside 1..=30, zero
    /// bits, a blocked filter whose bits are not whole blocks, ...).
    #[error("invalid filter parameters: {0}")]
    InvalidParameters(&'static str),
    /// The bit array's length disagrees with the header.
    #[error("filter size mismatch: header says {expected} payload bytes, found {actual}")]
    SizeMismatch {
        /// Payload bytes the header implies.
        expected: u64,
        /// Payload bytes present.
        actual: u64,
    },
    /// The header bytes did not decode.
    #[error("filter header does not decode: {0}")]
    Header(String),
    /// The allocator refused the memory a decoded filter takes (its size
    /// is the serialized one's, a recorded field).
    #[error("a filter of {bytes} bytes does not fit in memory")]
    OutOfMemory {
        /// Bytes asked for.
        bytes: u64,
    },
    /// The filter was decoded as one kind but holds another.
    #[error("expected a {expected} filter, found a {found} filter")]
    WrongKind {
        /// The kind asked for.
        expected: &'static str,
        /// The kind found in the header.
        found: &'static str,
    },
}

/// An empty vector with room for `len` items, or `OutOfMemory` when the
/// allocator refuses: a decoder's buffer is as large as a serialized
/// filter, whose size is a recorded field, and a refusal must fail the
/// decode, not abort the process.
pub(crate) fn try_vec<T>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| FilterError::OutOfMemory {
            bytes: (len as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        })?;
    Ok(v)
}

/// Result alias of this crate.
pub type Result<T, E = FilterError> = std::result::Result<T, E>;
