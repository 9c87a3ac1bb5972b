//! Serialized filter layout. All bincode use of this crate lives here.
//!
//! ```text
//! offset size  field
//! 0      4     magic 0x464d_4c42 ("BLMF" little-endian)       FROZEN
//! 4      2     format version: 1, or 2 for ribbon (below)      FROZEN
//! 6      1     filter kind tag (1 standard, 2 blocked, 3 counting, 4 ribbon)
//! 7      1     hash id (1 = XXH3-64)
//! 8      8     hash seed
//! 16     4     k: number of hash functions (1..=30);
//!              ribbon: result bits of its upper blocks (0..=32)
//! 20     8     m: number of bits (counters for the counting kind;
//!              ribbon: solution bits, a multiple of 128)
//! 28     8     items inserted
//! 36     P     payload: the bit array as little-endian u64 words
//!              (counting: two 4-bit counters per byte, low nibble first;
//!              ribbon: the Ribbon parameters below, then m / 128
//!              solution segments as little-endian u128)
//! 36+P   4     crc32 (crc32fast) of bytes 0..36+P
//! ```
//! Ribbon parameters (8 bytes at offset 36): u32 number of 128-slot blocks
//! (0 for a filter of no keys, else at least 2), u32 seed (0..=255).
//! All integers little-endian, fixed width (bincode 2 with fixed-int encoding).
//!
//! Versions: 2 differs from 1 only in the order of a Ribbon filter's
//! segments (`ribbon/layout.rs`: version 2 puts every block's first
//! columns together so a query reads one short span first). This build
//! writes 2 for Ribbon filters and 1 for the other kinds (their bytes did
//! not change, so older readers still read them), and reads both for every
//! kind; a newer version is refused with [`FilterError::UnsupportedVersion`]
//! (a table then reads without its filter, every key "maybe").

use bincode::{Decode, Encode};

use crate::error::{FilterError, Result};
use crate::hash::{HASH_ID_XXH3_64, HASH_SEED};
use crate::kind::FilterKind;
use crate::math::{MAX_HASHES, MIN_HASHES};

/// Magic number at the start of every serialized filter. FROZEN.
pub const FILTER_MAGIC: u32 = 0x464d_4c42;
/// The serialized filter format version this build writes for the Bloom
/// kinds (and the oldest it reads). FROZEN.
pub const FILTER_FORMAT_VERSION: u16 = 1;
/// The version this build writes for Ribbon filters, the newest it reads.
/// FROZEN.
pub const RIBBON_FORMAT_VERSION: u16 = 2;
/// Bytes in the fixed header.
pub const HEADER_LEN: usize = 36;
/// Bytes in the trailing checksum.
pub const CHECKSUM_LEN: usize = 4;
/// Bytes of the Ribbon parameters at the start of a Ribbon payload.
pub const RIBBON_PARAMS_LEN: usize = 8;

/// The fixed header of a serialized filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct FilterHeader {
    /// [`FILTER_MAGIC`].
    pub magic: u32,
    /// [`FILTER_FORMAT_VERSION`] or [`RIBBON_FORMAT_VERSION`].
    pub version: u16,
    /// [`FilterKind::tag`].
    pub kind: u8,
    /// [`HASH_ID_XXH3_64`].
    pub hash_id: u8,
    /// [`HASH_SEED`].
    pub seed: u64,
    /// k.
    pub num_hashes: u32,
    /// m.
    pub num_bits: u64,
    /// Items inserted.
    pub items: u64,
}

/// The Ribbon-specific fields, at the start of a Ribbon filter's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct RibbonParams {
    /// Blocks of 128 slots (0 for a filter of no keys, else at least 2).
    pub num_blocks: u32,
    /// The seed the equations were solved with (0..=255).
    pub seed: u32,
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_fixed_int_encoding()
}

/// Payload bytes a filter of `kind` with `num_bits` bits (counters) has.
pub(crate) fn payload_len(kind: FilterKind, num_bits: u64) -> u64 {
    match kind {
        FilterKind::Standard | FilterKind::Blocked => num_bits.div_ceil(64) * 8,
        FilterKind::Counting => num_bits.div_ceil(2),
        FilterKind::Ribbon => RIBBON_PARAMS_LEN as u64 + num_bits / 8,
    }
}

/// The Ribbon parameters' bytes.
pub(crate) fn encode_ribbon_params(params: RibbonParams) -> [u8; RIBBON_PARAMS_LEN] {
    let mut out = [0u8; RIBBON_PARAMS_LEN];
    // A fixed-width struct into a buffer of exactly its size cannot fail.
    let written = bincode::encode_into_slice(params, &mut out, config()).unwrap_or(0);
    debug_assert_eq!(written, RIBBON_PARAMS_LEN);
    out
}

/// Splits a Ribbon payload (length already checked by [`decode`]) into its
/// parameters and its solution bytes. Never panics.
pub(crate) fn decode_ribbon_payload(payload: &[u8]) -> Result<(RibbonParams, &[u8])> {
    if payload.len() < RIBBON_PARAMS_LEN {
        return Err(FilterError::Truncated {
            needed: RIBBON_PARAMS_LEN as u64,
            actual: payload.len() as u64,
        });
    }
    let (head, rest) = payload.split_at(RIBBON_PARAMS_LEN);
    let (params, _): (RibbonParams, usize) = bincode::decode_from_slice(head, config())
        .map_err(|e| FilterError::Header(e.to_string()))?;
    Ok((params, rest))
}

/// Serializes header fields and payload, appending the checksum.
pub(crate) fn encode(
    kind: FilterKind,
    num_hashes: u32,
    num_bits: u64,
    items: u64,
    payload: &[u8],
) -> Vec<u8> {
    let header = FilterHeader {
        magic: FILTER_MAGIC,
        version: if kind == FilterKind::Ribbon {
            RIBBON_FORMAT_VERSION
        } else {
            FILTER_FORMAT_VERSION
        },
        kind: kind.tag(),
        hash_id: HASH_ID_XXH3_64,
        seed: HASH_SEED,
        num_hashes,
        num_bits,
        items,
    };
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + CHECKSUM_LEN);
    let mut head = [0u8; HEADER_LEN];
    // Encoding a fixed-width struct into a buffer of exactly its size
    // cannot fail; a failure would mean HEADER_LEN is wrong.
    let written = bincode::encode_into_slice(header, &mut head, config()).unwrap_or(0);
    debug_assert_eq!(written, HEADER_LEN);
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks length, checksum and header of `bytes`, and returns the header
/// with the payload. Never panics.
pub(crate) fn decode(bytes: &[u8]) -> Result<(FilterHeader, FilterKind, &[u8])> {
    let min = (HEADER_LEN + CHECKSUM_LEN) as u64;
    if (bytes.len() as u64) < min {
        return Err(FilterError::Truncated {
            needed: min,
            actual: bytes.len() as u64,
        });
    }
    let (body, crc_bytes) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    let mut stored = [0u8; CHECKSUM_LEN];
    stored.copy_from_slice(crc_bytes);
    let stored = u32::from_le_bytes(stored);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(FilterError::ChecksumMismatch { stored, computed });
    }
    let (head, payload) = body.split_at(HEADER_LEN);
    let (header, _): (FilterHeader, usize) = bincode::decode_from_slice(head, config())
        .map_err(|e| FilterError::Header(e.to_string()))?;
    if header.magic != FILTER_MAGIC {
        return Err(FilterError::BadMagic(header.magic));
    }
    if !(FILTER_FORMAT_VERSION..=RIBBON_FORMAT_VERSION).contains(&header.version) {
        return Err(FilterError::UnsupportedVersion(header.version));
    }
    let kind = FilterKind::from_tag(header.kind)?;
    if header.hash_id != HASH_ID_XXH3_64 {
        return Err(FilterError::UnknownHash(header.hash_id));
    }
    if header.seed != HASH_SEED {
        return Err(FilterError::UnexpectedSeed(header.seed));
    }
    if kind == FilterKind::Ribbon {
        // Zero bits is a legal Ribbon filter (no keys, or no budget); its
        // k is checked against its layout by the Ribbon decoder.
        if !header.num_bits.is_multiple_of(128) {
            return Err(FilterError::InvalidParameters(
                "ribbon solution bits are not whole 128-bit segments",
            ));
        }
    } else {
        if !(MIN_HASHES..=MAX_HASHES).contains(&header.num_hashes) {
            return Err(FilterError::InvalidParameters(
                "number of hashes outside 1..=30",
            ));
        }
        if header.num_bits == 0 {
            return Err(FilterError::InvalidParameters("zero bits"));
        }
    }
    let expected = payload_len(kind, header.num_bits);
    if expected != payload.len() as u64 {
        return Err(FilterError::SizeMismatch {
            expected,
            actual: payload.len() as u64,
        });
    }
    Ok((header, kind, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_len_matches_encoding() {
        let bytes = encode(FilterKind::Standard, 7, 64, 3, &[0u8; 8]);
        assert_eq!(bytes.len(), HEADER_LEN + 8 + CHECKSUM_LEN);
        assert_eq!(&bytes[0..4], &FILTER_MAGIC.to_le_bytes());
        assert_eq!(&bytes[4..6], &FILTER_FORMAT_VERSION.to_le_bytes());
        assert_eq!(bytes[6], 1);
        assert_eq!(bytes[7], HASH_ID_XXH3_64);
        assert_eq!(&bytes[16..20], &7u32.to_le_bytes());
        assert_eq!(&bytes[20..28], &64u64.to_le_bytes());
        assert_eq!(&bytes[28..36], &3u64.to_le_bytes());
    }
}
