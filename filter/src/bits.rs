//! A fixed-length array of bits stored in little-endian u64 words.

use crate::error::{FilterError, Result};

/// m bits in `ceil(m / 64)` words. Invariant: bits at positions >= m are zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BitArray {
    words: Vec<u64>,
    num_bits: u64,
}

impl BitArray {
    /// REQUIRES: `num_bits > 0` and small enough to allocate.
    pub(crate) fn new(num_bits: u64) -> Self {
        Self {
            words: vec![0; num_bits.div_ceil(64) as usize],
            num_bits,
        }
    }

    #[inline]
    pub(crate) fn num_bits(&self) -> u64 {
        self.num_bits
    }

    /// REQUIRES: `bit < num_bits`.
    #[inline]
    pub(crate) fn set(&mut self, bit: u64) {
        self.words[(bit >> 6) as usize] |= 1u64 << (bit & 63);
    }

    /// REQUIRES: `bit < num_bits`.
    #[inline]
    pub(crate) fn get(&self, bit: u64) -> bool {
        self.words[(bit >> 6) as usize] & (1u64 << (bit & 63)) != 0
    }

    #[cfg(test)]
    pub(crate) fn clear(&mut self, bit: u64) {
        self.words[(bit >> 6) as usize] &= !(1u64 << (bit & 63));
    }

    pub(crate) fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    pub(crate) fn to_le_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// REQUIRES: `bytes.len() == ceil(num_bits / 64) * 8` (checked by the codec).
    pub(crate) fn from_le_bytes(num_bits: u64, bytes: &[u8]) -> Result<Self> {
        let mut words: Vec<u64> = crate::error::try_vec(bytes.len() / 8)?;
        words.extend(bytes.chunks_exact(8).map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        }));
        let tail = num_bits % 64;
        if tail != 0
            && let Some(last) = words.last()
            && last >> tail != 0
        {
            return Err(FilterError::InvalidParameters(
                "bits set past the end of the filter",
            ));
        }
        Ok(Self { words, num_bits })
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }
}
