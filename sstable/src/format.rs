//! Frozen constants, block handles, trailers and the footer (see FORMAT.md).

use std::fmt;

use thiserror::Error;

use crate::block_error::BlockError;

/// Table format version this build writes by default: 2, whose index
/// block is delta-encoded (FORMAT.md, "Index block"). Each version's
/// layout is FROZEN.
pub const FORMAT_VERSION: u32 = 2;
/// Oldest table format version this build reads and can write
/// ([`crate::TableOptions::format_version`]): 1, whose index block is laid
/// out as a data block. Versions differ only in the index block.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Layout version of the properties block, the same in every table format
/// version. FROZEN.
pub const PROPERTIES_VERSION: u32 = 1;
/// Magic number at the end of every table ("bloomsst"). FROZEN.
pub const TABLE_MAGIC: u64 = 0x7473_736d_6f6f_6c62;
/// Bytes in a block trailer: type byte + crc32.
pub const TRAILER_LEN: usize = 5;
/// Bytes in an encoded [`BlockHandle`].
pub const HANDLE_LEN: usize = 16;
/// Bytes in the footer.
pub const FOOTER_LEN: usize = 64;
/// Footer offset of the format version.
const FOOTER_VERSION_AT: usize = 3 * HANDLE_LEN;
/// Footer offset of the footer checksum.
const FOOTER_CRC_AT: usize = FOOTER_VERSION_AT + 4;
/// Footer offset of the magic number.
const FOOTER_MAGIC_AT: usize = FOOTER_CRC_AT + 4;
/// Entries between restart points in data blocks.
pub const RESTART_INTERVAL: usize = 16;

/// What a block holds. The type bytes are FROZEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// Sorted entries.
    Data,
    /// The serialized filter.
    Filter,
    /// Last key and handle of each data block.
    Index,
    /// Table properties.
    Properties,
    /// The fixed-size footer (has no trailer; named in errors).
    Footer,
}

impl BlockKind {
    /// The type byte written in the trailer. FROZEN.
    pub const fn type_byte(self) -> u8 {
        match self {
            Self::Data => 1,
            Self::Filter => 2,
            Self::Index => 3,
            Self::Properties => 4,
            Self::Footer => 0,
        }
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Data => "data",
            Self::Filter => "filter",
            Self::Index => "index",
            Self::Properties => "properties",
            Self::Footer => "footer",
        })
    }
}

/// Where a block is: its offset and size (trailer excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Bytes in the block, trailer excluded.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the 16-byte encoding.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }

    /// Decodes a handle from exactly [`HANDLE_LEN`] bytes.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != HANDLE_LEN {
            return None;
        }
        Some(Self {
            offset: read_u64(bytes, 0)?,
            size: read_u64(bytes, 8)?,
        })
    }

    /// True when the block and its trailer end at or before `limit`.
    pub fn fits_before(&self, limit: u64) -> bool {
        self.offset
            .checked_add(self.size)
            .and_then(|end| end.checked_add(TRAILER_LEN as u64))
            .is_some_and(|end| end <= limit)
    }

    /// True for the "no block" handle (0, 0).
    pub fn is_null(&self) -> bool {
        self.offset == 0 && self.size == 0
    }
}

/// Reads a little-endian u64 at `at`, if in bounds.
pub(crate) fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// Reads a little-endian u32 at `at`, if in bounds.
pub(crate) fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    Some(u32::from_le_bytes(a))
}

/// The trailer that follows `block`: type byte, then crc32 of block + type.
pub fn block_trailer(kind: BlockKind, block: &[u8]) -> [u8; TRAILER_LEN] {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(block);
    hasher.update(&[kind.type_byte()]);
    let crc = hasher.finalize().to_le_bytes();
    [kind.type_byte(), crc[0], crc[1], crc[2], crc[3]]
}

/// Checks the trailer at the end of `block_with_trailer`, returning the
/// block's bytes, or why it is wrong.
pub fn verify_block(kind: BlockKind, block_with_trailer: &[u8]) -> Result<&[u8], BlockError> {
    let split = block_with_trailer.len().checked_sub(TRAILER_LEN).ok_or(
        BlockError::ShorterThanTrailer {
            len: block_with_trailer.len(),
        },
    )?;
    let (block, trailer) = block_with_trailer.split_at(split);
    let expected = block_trailer(kind, block);
    if trailer[0] != expected[0] {
        return Err(BlockError::WrongType {
            found: trailer[0],
            expected: kind,
        });
    }
    let crc = |t: &[u8]| read_u32(t, 1).unwrap_or_default();
    let (stored, computed) = (crc(trailer), crc(&expected));
    if stored != computed {
        return Err(BlockError::ChecksumMismatch { stored, computed });
    }
    Ok(block)
}

/// The footer: where the filter, index and properties blocks are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Filter block ((0, 0) when the table has no filter).
    pub filter: BlockHandle,
    /// Index block.
    pub index: BlockHandle,
    /// Properties block.
    pub properties: BlockHandle,
    /// Table format version.
    pub version: u32,
}

/// Why a footer did not decode.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FooterError {
    /// Not [`FOOTER_LEN`] bytes (a file shorter than a footer, or a cut-off slice).
    #[error("{0} bytes where a {FOOTER_LEN}-byte footer was expected")]
    Length(usize),
    /// The magic number is wrong: not a table, or the file's tail is damaged.
    #[error("magic {0:#018x} is not the table magic: not a table, or its tail is damaged")]
    BadMagic(u64),
    /// The footer checksum does not match.
    #[error("footer checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The crc32 stored in the footer.
        stored: u32,
        /// The crc32 of the footer's first bytes.
        computed: u32,
    },
    /// A version this build does not read (checksum already verified).
    #[error(
        "format version {0}; this build reads versions {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}"
    )]
    Version(u32),
}

impl Footer {
    /// The 64-byte encoding.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.filter.encode_to(&mut out);
        self.index.encode_to(&mut out);
        self.properties.encode_to(&mut out);
        out.extend_from_slice(&self.version.to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        let mut footer = [0u8; FOOTER_LEN];
        footer.copy_from_slice(&out);
        footer
    }

    /// Decodes and checks magic, checksum and version, in that order.
    pub fn decode(bytes: &[u8]) -> Result<Self, FooterError> {
        if bytes.len() != FOOTER_LEN {
            return Err(FooterError::Length(bytes.len()));
        }
        let magic = read_u64(bytes, FOOTER_MAGIC_AT).ok_or(FooterError::Length(bytes.len()))?;
        if magic != TABLE_MAGIC {
            return Err(FooterError::BadMagic(magic));
        }
        // In bounds: the length is FOOTER_LEN.
        let stored = read_u32(bytes, FOOTER_CRC_AT).unwrap_or_default();
        let computed = crc32fast::hash(&bytes[..FOOTER_CRC_AT]);
        if computed != stored {
            return Err(FooterError::Checksum { stored, computed });
        }
        let version = read_u32(bytes, FOOTER_VERSION_AT).unwrap_or_default();
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(FooterError::Version(version));
        }
        let handle = |i: usize| {
            BlockHandle::decode(&bytes[i * HANDLE_LEN..(i + 1) * HANDLE_LEN]).unwrap_or_default()
        };
        Ok(Self {
            filter: handle(0),
            index: handle(1),
            properties: handle(2),
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_layout_and_round_trip() {
        let footer = Footer {
            filter: BlockHandle { offset: 1, size: 2 },
            index: BlockHandle { offset: 3, size: 4 },
            properties: BlockHandle { offset: 5, size: 6 },
            version: FORMAT_VERSION,
        };
        let bytes = footer.encode();
        assert_eq!(bytes.len(), FOOTER_LEN);
        assert_eq!(FOOTER_MAGIC_AT + 8, FOOTER_LEN);
        assert_eq!(&bytes[56..], b"bloomsst");
        assert_eq!(Footer::decode(&bytes), Ok(footer));
    }

    #[test]
    fn hand_built_footers_give_each_error() {
        let footer = Footer {
            filter: BlockHandle::default(),
            index: BlockHandle { offset: 3, size: 4 },
            properties: BlockHandle { offset: 5, size: 6 },
            version: FORMAT_VERSION,
        };
        let bytes = footer.encode();
        assert_eq!(Footer::decode(&bytes[1..]), Err(FooterError::Length(63)));
        assert_eq!(Footer::decode(&[]), Err(FooterError::Length(0)));
        let mut bad = bytes;
        bad[FOOTER_MAGIC_AT] ^= 1;
        assert_eq!(
            Footer::decode(&bad),
            Err(FooterError::BadMagic(TABLE_MAGIC ^ 1))
        );
        let mut bad = bytes;
        bad[0] ^= 1;
        let stored = read_u32(&bytes, FOOTER_CRC_AT).unwrap();
        let computed = crc32fast::hash(&bad[..FOOTER_CRC_AT]);
        assert_eq!(
            Footer::decode(&bad),
            Err(FooterError::Checksum { stored, computed })
        );
        let newer = Footer {
            version: FORMAT_VERSION + 1,
            ..footer
        };
        assert_eq!(
            Footer::decode(&newer.encode()),
            Err(FooterError::Version(FORMAT_VERSION + 1))
        );
        assert_eq!(
            FooterError::Version(3).to_string(),
            "format version 3; this build reads versions 1 to 2"
        );
        for version in [0, 3, u32::MAX] {
            let other = Footer { version, ..footer };
            assert_eq!(
                Footer::decode(&other.encode()),
                Err(FooterError::Version(version))
            );
        }
        let older = Footer {
            version: OLDEST_FORMAT_VERSION,
            ..footer
        };
        assert_eq!(Footer::decode(&older.encode()), Ok(older));
    }

    #[test]
    fn trailer_detects_flips_and_wrong_type() {
        let block = b"hello block".to_vec();
        let mut with = block.clone();
        with.extend_from_slice(&block_trailer(BlockKind::Data, &block));
        assert_eq!(verify_block(BlockKind::Data, &with), Ok(&block[..]));
        assert_eq!(
            verify_block(BlockKind::Index, &with),
            Err(BlockError::WrongType {
                found: 1,
                expected: BlockKind::Index
            })
        );
        for i in 0..with.len() {
            let mut bad = with.clone();
            bad[i] ^= 0x10;
            let expected = if i == block.len() {
                BlockError::WrongType {
                    found: 1 ^ 0x10,
                    expected: BlockKind::Data,
                }
            } else {
                BlockError::ChecksumMismatch {
                    stored: read_u32(&bad, block.len() + 1).unwrap(),
                    computed: crc32fast::hash(&bad[..=block.len()]),
                }
            };
            assert_eq!(
                verify_block(BlockKind::Data, &bad),
                Err(expected),
                "flip at {i}"
            );
        }
        for len in 0..TRAILER_LEN {
            assert_eq!(
                verify_block(BlockKind::Data, &with[..len]),
                Err(BlockError::ShorterThanTrailer { len })
            );
        }
    }

    #[test]
    fn handle_bounds() {
        assert!(
            BlockHandle {
                offset: 10,
                size: 5
            }
            .fits_before(20)
        );
        assert!(
            !BlockHandle {
                offset: 10,
                size: 6
            }
            .fits_before(20)
        );
        assert!(
            !BlockHandle {
                offset: u64::MAX,
                size: 6
            }
            .fits_before(20)
        );
    }
}
