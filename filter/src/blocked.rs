//! A cache-local Bloom filter: every probe of a key lands in one 64-byte
//! block, so a lookup touches one cache line (RocksDB's format_version 5
//! "FastLocalBloom" idea, with our own frozen probe scheme).

use crate::codec;
use crate::error::{FilterError, Result};
use crate::filter_trait::{Filter, InsertFilter};
use crate::hash::{BLOCK_PROBE_MULTIPLIER, KeyHash, block_and_seed};
use crate::kind::FilterKind;
use crate::math::{self, MAX_HASHES, MIN_HASHES};
use crate::standard::{bits_for, clamp_fpr};

/// Bits in one block: one 64-byte cache line.
pub const BLOCK_BITS: u32 = 512;
const WORDS_PER_BLOCK: usize = 8;

/// One cache line of bits. The alignment makes each block start a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C, align(64))]
struct Block([u64; WORDS_PER_BLOCK]);

/// m bits in 512-bit blocks; a key's hash picks a block (multiply-shift of
/// the hash), then k bit positions inside it (the top 9 bits of a remixed
/// hash, stepped by multiplying with the golden ratio).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedBloomFilter {
    blocks: Vec<Block>,
    num_hashes: u32,
    items: u64,
}

/// The in-block bit positions (0..512) of a key, from its probe seed.
#[inline]
fn in_block_positions(seed: u64, num_hashes: u32) -> impl Iterator<Item = u32> {
    let mut x = seed;
    (0..num_hashes).map(move |_| {
        let bit = (x >> 55) as u32;
        x = x.wrapping_mul(BLOCK_PROBE_MULTIPLIER);
        bit
    })
}

impl BlockedBloomFilter {
    /// An empty filter of `num_bits` rounded up to whole 512-bit blocks (at
    /// least one) and `num_hashes` probes (clamped to 1..=30).
    pub fn new(num_bits: u64, num_hashes: u32) -> Self {
        let num_blocks = num_bits.div_ceil(u64::from(BLOCK_BITS)).max(1);
        Self {
            blocks: vec![Block::default(); num_blocks as usize],
            num_hashes: num_hashes.clamp(MIN_HASHES, MAX_HASHES),
            items: 0,
        }
    }

    /// A filter sized for `expected_items` at `bits_per_key` bits each, with
    /// the k of least expected false positive rate for a blocked filter
    /// ([`math::blocked_num_hashes`]; 6 at 10 bits per key, 11 at 20). The
    /// k is stored in the filter, so filters built with another k (7 at 10
    /// bits per key before this choice) read back unchanged.
    pub fn with_bits_per_key(expected_items: u64, bits_per_key: f64) -> Self {
        Self::new(
            bits_for(expected_items, bits_per_key),
            math::blocked_num_hashes(bits_per_key),
        )
    }

    /// A filter sized for `expected_items` at a target false positive rate.
    pub fn with_fpr(expected_items: u64, fpr: f64) -> Self {
        Self::with_bits_per_key(expected_items, math::bits_per_key_for_fpr(clamp_fpr(fpr)))
    }

    /// Hashes `key` once; the result can probe any number of filters.
    pub fn key_hash(key: &[u8]) -> KeyHash {
        KeyHash::of(key)
    }

    /// The k absolute bit positions `hash` maps to.
    pub fn bit_positions(&self, hash: KeyHash) -> Vec<u64> {
        let (block, seed) = block_and_seed(hash, self.blocks.len() as u64);
        in_block_positions(seed, self.num_hashes)
            .map(|bit| block * u64::from(BLOCK_BITS) + u64::from(bit))
            .collect()
    }

    /// Serializes the filter (see the `codec` module for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let payload: Vec<u8> = self
            .blocks
            .iter()
            .flat_map(|b| b.0.iter().flat_map(|w| w.to_le_bytes()))
            .collect();
        codec::encode(
            FilterKind::Blocked,
            self.num_hashes,
            self.num_bits(),
            self.items,
            &payload,
        )
    }

    /// Decodes a filter written by [`Self::to_bytes`]. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, kind, payload) = codec::decode(bytes)?;
        if kind != FilterKind::Blocked {
            return Err(FilterError::WrongKind {
                expected: FilterKind::Blocked.name(),
                found: kind.name(),
            });
        }
        if header.num_bits % u64::from(BLOCK_BITS) != 0 {
            return Err(FilterError::InvalidParameters(
                "blocked filter bits are not whole 512-bit blocks",
            ));
        }
        let mut blocks = crate::error::try_vec(payload.len() / (WORDS_PER_BLOCK * 8))?;
        blocks.extend(payload.chunks_exact(WORDS_PER_BLOCK * 8).map(|chunk| {
            let mut block = Block::default();
            for (word, bytes) in block.0.iter_mut().zip(chunk.chunks_exact(8)) {
                let mut w = [0u8; 8];
                w.copy_from_slice(bytes);
                *word = u64::from_le_bytes(w);
            }
            block
        }));
        Ok(Self {
            blocks,
            num_hashes: header.num_hashes,
            items: header.items,
        })
    }
}

impl InsertFilter for BlockedBloomFilter {
    #[inline]
    fn insert_hash(&mut self, hash: KeyHash) {
        let (block, seed) = block_and_seed(hash, self.blocks.len() as u64);
        let words = &mut self.blocks[block as usize].0;
        for bit in in_block_positions(seed, self.num_hashes) {
            words[(bit >> 6) as usize] |= 1u64 << (bit & 63);
        }
        self.items += 1;
    }
}

impl Filter for BlockedBloomFilter {
    #[inline]
    fn contains_hash(&self, hash: KeyHash) -> bool {
        let (block, seed) = block_and_seed(hash, self.blocks.len() as u64);
        let words = &self.blocks[block as usize].0;
        in_block_positions(seed, self.num_hashes)
            .all(|bit| words[(bit >> 6) as usize] & (1u64 << (bit & 63)) != 0)
    }

    fn num_bits(&self) -> u64 {
        self.blocks.len() as u64 * u64::from(BLOCK_BITS)
    }

    fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    fn len(&self) -> u64 {
        self.items
    }

    fn fill_ratio(&self) -> f64 {
        let ones: u64 = self
            .blocks
            .iter()
            .flat_map(|b| b.0.iter())
            .map(|w| u64::from(w.count_ones()))
            .sum();
        ones as f64 / self.num_bits() as f64
    }

    /// The mean over blocks of (the block's fill)^k: an absent key's k
    /// probes all land in one block, chosen uniformly, so this is its rate.
    /// The whole filter's fill^k would be lower (keys crowd some blocks
    /// more than others, and x^k is convex): about 14% low at 10 bits per
    /// key.
    fn estimated_fpr(&self) -> f64 {
        if self.blocks.is_empty() {
            return 0.0;
        }
        let k = self.num_hashes as i32;
        let sum: f64 = self
            .blocks
            .iter()
            .map(|b| {
                let ones: u32 = b.0.iter().map(|w| w.count_ones()).sum();
                (f64::from(ones) / f64::from(BLOCK_BITS)).powi(k)
            })
            .sum();
        sum / self.blocks.len() as f64
    }

    /// The rate of this filter's blocks for its keys: the mixture over the
    /// keys in an absent key's block, Binomial(n, 1/blocks)
    /// ([`math::blocked_false_positive_rate_in_blocks`]; not the Poisson
    /// mixture at n/blocks, which runs high for filters of few blocks).
    fn theoretical_fpr(&self) -> f64 {
        math::blocked_false_positive_rate_in_blocks(
            self.items,
            self.blocks.len() as u64,
            self.num_hashes,
            BLOCK_BITS,
        )
    }

    fn memory_bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<Block>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_blocks_and_probes_one_block() {
        let f = BlockedBloomFilter::new(1000, 6);
        assert_eq!(f.num_bits(), 1024);
        let positions = f.bit_positions(KeyHash::of(b"key"));
        let block = positions[0] / 512;
        assert!(positions.iter().all(|p| p / 512 == block));
        assert_eq!(std::mem::align_of::<Block>(), 64);
    }
}
