//! The textbook Bloom filter of the lecture.

use crate::bits::BitArray;
use crate::codec;
use crate::error::{FilterError, Result};
use crate::filter_trait::{Filter, InsertFilter};
use crate::hash::{DoubleHashProbes, KeyHash};
use crate::kind::FilterKind;
use crate::math::{self, MAX_HASHES, MIN_HASHES};

/// Fewest bits (counters) a filter sized from a bits-per-key budget gets:
/// 512, one 64-byte cache line, so tiny tables still get a useful filter.
///
/// LevelDB's minimum is 64 bits, but at 64 our standard filter fails
/// LevelDB's "VaryingLengths" check (worst 3.05% at 6 keys). Two effects add
/// up at small m: a few keys in few bits set a widely varying share of them,
/// and the probe scheme (an arithmetic sequence reduced by multiply-shift)
/// costs about 0.4/m of extra false positives, because a key whose step is
/// within 1/m of a fraction with a small denominator lands its probes on few
/// distinct bits. Measured over 40 key sets (4-byte keys, 10 bits per key,
/// LevelDB's lengths): 9 fail at a 64-bit minimum, none at 128 or more;
/// the worst rate is 1.66% at 128 and 1.27% at 512.
/// `tests/varying_lengths.rs` runs the check for every kind.
/// An explicit size ([`BloomFilter::new`]) is used as given.
pub const MIN_FILTER_BITS: u64 = 512;

/// m bits, k probe positions anywhere in them, derived from one XXH3-64 hash
/// by enhanced double hashing. Insert and query only: clearing a bit could
/// create a false negative for another key that shares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloomFilter {
    bits: BitArray,
    num_hashes: u32,
    items: u64,
}

impl BloomFilter {
    /// An empty filter of `num_bits` bits (at least 1) and `num_hashes`
    /// probes (clamped to 1..=30).
    pub fn new(num_bits: u64, num_hashes: u32) -> Self {
        Self {
            bits: BitArray::new(num_bits.max(1)),
            num_hashes: num_hashes.clamp(MIN_HASHES, MAX_HASHES),
            items: 0,
        }
    }

    /// A filter sized for `expected_items` at `bits_per_key` bits each
    /// (at least [`MIN_FILTER_BITS`]), with k = round(bits_per_key * ln 2)
    /// in 1..=30.
    pub fn with_bits_per_key(expected_items: u64, bits_per_key: f64) -> Self {
        Self::new(
            bits_for(expected_items, bits_per_key),
            math::optimal_num_hashes(bits_per_key),
        )
    }

    /// A filter sized for `expected_items` at a target false positive rate
    /// (REQUIRES: 0 < fpr < 1; other values are clamped into range).
    pub fn with_fpr(expected_items: u64, fpr: f64) -> Self {
        Self::with_bits_per_key(expected_items, math::bits_per_key_for_fpr(clamp_fpr(fpr)))
    }

    /// Hashes `key` once; the result can probe any number of filters.
    pub fn key_hash(key: &[u8]) -> KeyHash {
        KeyHash::of(key)
    }

    /// The k bit positions `hash` maps to in this filter.
    pub fn bit_positions(&self, hash: KeyHash) -> Vec<u64> {
        DoubleHashProbes::new(hash, self.num_hashes, self.bits.num_bits()).collect()
    }

    /// Serializes the filter (see the `codec` module for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        codec::encode(
            FilterKind::Standard,
            self.num_hashes,
            self.bits.num_bits(),
            self.items,
            &self.bits.to_le_bytes(),
        )
    }

    /// Decodes a filter written by [`Self::to_bytes`]. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, kind, payload) = codec::decode(bytes)?;
        if kind != FilterKind::Standard {
            return Err(FilterError::WrongKind {
                expected: FilterKind::Standard.name(),
                found: kind.name(),
            });
        }
        Ok(Self {
            bits: BitArray::from_le_bytes(header.num_bits, payload)?,
            num_hashes: header.num_hashes,
            items: header.items,
        })
    }

    /// The lecture's delete mistake, for the demonstration test only: clears
    /// every bit of `key`, which also clears bits other keys rely on.
    #[cfg(test)]
    pub(crate) fn clear_bits_of(&mut self, key: &[u8]) {
        for bit in self.bit_positions(KeyHash::of(key)) {
            self.bits.clear(bit);
        }
    }
}

impl InsertFilter for BloomFilter {
    #[inline]
    fn insert_hash(&mut self, hash: KeyHash) {
        for bit in DoubleHashProbes::new(hash, self.num_hashes, self.bits.num_bits()) {
            self.bits.set(bit);
        }
        self.items += 1;
    }
}

impl Filter for BloomFilter {
    #[inline]
    fn contains_hash(&self, hash: KeyHash) -> bool {
        DoubleHashProbes::new(hash, self.num_hashes, self.bits.num_bits())
            .all(|bit| self.bits.get(bit))
    }

    fn num_bits(&self) -> u64 {
        self.bits.num_bits()
    }

    fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    fn len(&self) -> u64 {
        self.items
    }

    fn fill_ratio(&self) -> f64 {
        self.bits.count_ones() as f64 / self.bits.num_bits() as f64
    }

    fn theoretical_fpr(&self) -> f64 {
        math::false_positive_rate(self.items, self.bits.num_bits(), self.num_hashes)
    }

    fn memory_bytes(&self) -> usize {
        self.bits.heap_bytes()
    }
}

/// m for n items at a bits-per-key budget; non-finite or negative budgets
/// count as zero.
pub(crate) fn bits_for(expected_items: u64, bits_per_key: f64) -> u64 {
    let bpk = if bits_per_key.is_finite() && bits_per_key > 0.0 {
        bits_per_key
    } else {
        0.0
    };
    ((expected_items as f64 * bpk).ceil() as u64).max(MIN_FILTER_BITS)
}

pub(crate) fn clamp_fpr(fpr: f64) -> f64 {
    if fpr.is_nan() {
        0.01
    } else {
        fpr.clamp(1e-12, 0.999_999)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors() {
        let f = BloomFilter::with_bits_per_key(1000, 10.0);
        assert_eq!(f.num_bits(), 10_000);
        assert_eq!(f.num_hashes(), 7);
        let f = BloomFilter::with_bits_per_key(1000, 9.9);
        assert_eq!(f.num_bits(), 9_900);
        let f = BloomFilter::with_fpr(1000, 0.01);
        assert_eq!(f.num_hashes(), 7);
        assert!((f.num_bits() as f64 / 1000.0 - 9.585).abs() < 0.01);
        let f = BloomFilter::new(0, 0);
        assert_eq!((f.num_bits(), f.num_hashes()), (1, 1));
        assert_eq!(BloomFilter::new(100, 99).num_hashes(), 30);
    }

    #[test]
    fn lecture_delete_creates_false_negative() {
        // As in the lecture: two present keys that lean on one shared bit.
        let mut f = BloomFilter::new(256, 3);
        let keys: Vec<[u8; 4]> = (0..40u32).map(|i| i.to_le_bytes()).collect();
        for k in &keys {
            f.insert(k);
        }
        let bits = |k: &[u8]| f.bit_positions(KeyHash::of(k));
        let (removed, kept) = keys
            .iter()
            .enumerate()
            .flat_map(|(i, a)| keys[i + 1..].iter().map(move |b| (a, b)))
            .find(|(a, b)| bits(&a[..]).iter().any(|p| bits(&b[..]).contains(p)))
            .expect("40 keys in 256 bits share a bit");
        assert!(f.contains(kept));
        f.clear_bits_of(removed);
        assert!(
            !f.contains(kept),
            "clearing a removed key's bits must hide a present key"
        );
    }
}
