//! The lecture's deletable variant: 4-bit counters instead of bits.

use crate::codec;
use crate::error::{FilterError, Result};
use crate::filter_trait::{Filter, InsertFilter};
use crate::hash::{DoubleHashProbes, KeyHash};
use crate::kind::FilterKind;
use crate::math::{self, MAX_HASHES, MIN_HASHES};
use crate::standard::{bits_for, clamp_fpr};

/// Largest value a 4-bit counter holds.
pub const COUNTER_MAX: u8 = 15;

/// m 4-bit counters (two per byte), k probes by the same double hashing as
/// [`crate::BloomFilter`]: four times the memory of a plain filter with the
/// same m and k, and the same false positive rate.
///
/// A counter that reached [`COUNTER_MAX`] is saturated: it no longer knows
/// how many keys lean on it, so it is never decremented again. Decrementing
/// it could bring it to zero while keys that set it remain, which would be a
/// false negative; leaving it set costs only a slightly higher false
/// positive rate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountingBloomFilter {
    counters: Vec<u8>,
    num_counters: u64,
    num_hashes: u32,
    items: u64,
}

impl CountingBloomFilter {
    /// An empty filter of `num_counters` counters (at least 1) and
    /// `num_hashes` probes (clamped to 1..=30).
    pub fn new(num_counters: u64, num_hashes: u32) -> Self {
        let num_counters = num_counters.max(1);
        Self {
            counters: vec![0; num_counters.div_ceil(2) as usize],
            num_counters,
            num_hashes: num_hashes.clamp(MIN_HASHES, MAX_HASHES),
            items: 0,
        }
    }

    /// Sized like [`crate::BloomFilter::with_bits_per_key`], one counter per bit.
    pub fn with_bits_per_key(expected_items: u64, bits_per_key: f64) -> Self {
        Self::new(
            bits_for(expected_items, bits_per_key),
            math::optimal_num_hashes(bits_per_key),
        )
    }

    /// Sized like [`crate::BloomFilter::with_fpr`].
    pub fn with_fpr(expected_items: u64, fpr: f64) -> Self {
        Self::with_bits_per_key(expected_items, math::bits_per_key_for_fpr(clamp_fpr(fpr)))
    }

    #[inline]
    fn counter(&self, i: u64) -> u8 {
        let byte = self.counters[(i / 2) as usize];
        if i.is_multiple_of(2) {
            byte & 0x0f
        } else {
            byte >> 4
        }
    }

    #[inline]
    fn set_counter(&mut self, i: u64, value: u8) {
        let byte = &mut self.counters[(i / 2) as usize];
        *byte = if i.is_multiple_of(2) {
            (*byte & 0xf0) | value
        } else {
            (*byte & 0x0f) | (value << 4)
        };
    }

    fn probes(&self, hash: KeyHash) -> DoubleHashProbes {
        DoubleHashProbes::new(hash, self.num_hashes, self.num_counters)
    }

    /// Removes one earlier insert of `key`. Returns `false`, changing
    /// nothing, when the key is definitely not present. REQUIRES: the key
    /// was inserted (removing a key that was never inserted but collides
    /// with present keys can cause false negatives, as with any counting
    /// filter).
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.remove_hash(KeyHash::of(key))
    }

    /// [`Self::remove`] by hash.
    pub fn remove_hash(&mut self, hash: KeyHash) -> bool {
        if !self.contains_hash(hash) {
            return false;
        }
        for i in self.probes(hash) {
            let c = self.counter(i);
            if c < COUNTER_MAX {
                self.set_counter(i, c - 1);
            }
        }
        self.items = self.items.saturating_sub(1);
        true
    }

    /// Serializes the filter (see the `codec` module for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        codec::encode(
            FilterKind::Counting,
            self.num_hashes,
            self.num_counters,
            self.items,
            &self.counters,
        )
    }

    /// Decodes a filter written by [`Self::to_bytes`]. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, kind, payload) = codec::decode(bytes)?;
        if kind != FilterKind::Counting {
            return Err(FilterError::WrongKind {
                expected: FilterKind::Counting.name(),
                found: kind.name(),
            });
        }
        if header.num_bits % 2 == 1 && payload.last().is_some_and(|b| b >> 4 != 0) {
            return Err(FilterError::InvalidParameters(
                "counter set past the end of the filter",
            ));
        }
        Ok(Self {
            counters: payload.to_vec(),
            num_counters: header.num_bits,
            num_hashes: header.num_hashes,
            items: header.items,
        })
    }
}

impl InsertFilter for CountingBloomFilter {
    fn insert_hash(&mut self, hash: KeyHash) {
        for i in self.probes(hash) {
            let c = self.counter(i);
            if c < COUNTER_MAX {
                self.set_counter(i, c + 1);
            }
        }
        self.items += 1;
    }
}

impl Filter for CountingBloomFilter {
    fn contains_hash(&self, hash: KeyHash) -> bool {
        self.probes(hash).all(|i| self.counter(i) != 0)
    }

    fn num_bits(&self) -> u64 {
        self.num_counters
    }

    fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    fn len(&self) -> u64 {
        self.items
    }

    fn fill_ratio(&self) -> f64 {
        let nonzero = (0..self.num_counters)
            .filter(|&i| self.counter(i) != 0)
            .count();
        nonzero as f64 / self.num_counters as f64
    }

    fn theoretical_fpr(&self) -> f64 {
        math::false_positive_rate(self.items, self.num_counters, self.num_hashes)
    }

    fn memory_bytes(&self) -> usize {
        self.counters.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BloomFilter;

    #[test]
    fn removes_without_false_negatives_and_is_four_times_the_size() {
        let mut counting = CountingBloomFilter::new(256, 3);
        let mut plain = BloomFilter::new(256, 3);
        let keys: Vec<[u8; 4]> = (0..40u32).map(|i| i.to_le_bytes()).collect();
        for k in &keys {
            counting.insert(k);
            plain.insert(k);
        }
        assert!(counting.remove(&keys[0]));
        assert!(keys[1..].iter().all(|k| counting.contains(k)));
        assert_eq!(counting.len(), 39);
        assert_eq!(counting.memory_bytes(), 4 * plain.memory_bytes());
    }

    #[test]
    fn saturated_counters_stay_set() {
        let mut f = CountingBloomFilter::new(1, 1);
        for _ in 0..20 {
            f.insert(b"a");
        }
        for _ in 0..20 {
            f.remove(b"a");
        }
        // Saturated: it cannot know all twenty were removed, so it stays "maybe".
        assert!(f.contains(b"a"));
    }

    #[test]
    fn round_trip() {
        let mut f = CountingBloomFilter::new(101, 4);
        f.insert(b"x");
        let back = CountingBloomFilter::from_bytes(&f.to_bytes()).unwrap();
        assert_eq!(back, f);
    }
}
