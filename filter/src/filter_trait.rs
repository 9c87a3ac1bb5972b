//! What every filter kind answers, and the statistics derived from it.
//!
//! [`Filter`] is the query side, shared by every kind; [`InsertFilter`] adds
//! keys one at a time, which only the Bloom kinds can do. A static filter
//! ([`crate::RibbonFilter`]) is built once from all its keys' hashes and is
//! a [`Filter`] only.

use crate::hash::KeyHash;

/// An approximate membership filter: "definitely absent" or "maybe present",
/// never absent for a key it was built with.
pub trait Filter {
    /// `false` means the key was definitely never inserted.
    fn contains_hash(&self, hash: KeyHash) -> bool;
    /// m: bits (for the counting kind, counters; for Ribbon, solution bits).
    fn num_bits(&self) -> u64;
    /// k: probes per key (for Ribbon, the most result bits a key checks).
    fn num_hashes(&self) -> u32;
    /// Items inserted (each insert counts, duplicates included).
    fn len(&self) -> u64;
    /// Fraction of bits (counters) that are non-zero.
    fn fill_ratio(&self) -> f64;
    /// The expected false positive rate for this filter's layout, m, k and
    /// `len()`: the lecture's formula for a standard filter, its mixture
    /// over the keys per block for a blocked one, 2^-r for Ribbon's r
    /// result bits.
    fn theoretical_fpr(&self) -> f64;
    /// Bytes of heap the filter holds: its bit array, blocks, counters or
    /// Ribbon solution (whole 64-byte lines), as allocated. Not the
    /// filter's fixed-size struct, which lives wherever its owner puts it
    /// (`tests/memory_bytes_heap.rs` measures the heap of every kind).
    fn memory_bytes(&self) -> usize;

    /// Hashes `key` and probes for it.
    fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(KeyHash::of(key))
    }
    /// No item inserted yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The false positive rate implied by the observed fill: fill^k. An absent
    /// key is a false positive when all k of its bits happen to be set.
    fn estimated_fpr(&self) -> f64 {
        self.fill_ratio().powi(self.num_hashes() as i32)
    }
    /// Items estimated from the fill ratio (see [`crate::math::estimated_items`]).
    fn estimated_items(&self) -> f64 {
        crate::math::estimated_items(self.num_bits(), self.num_hashes(), self.fill_ratio())
    }
    /// m / n: bits spent per inserted item (infinite when empty).
    fn bits_per_key(&self) -> f64 {
        self.num_bits() as f64 / self.len() as f64
    }
}

/// A filter that keys can be added to after it is made: the Bloom kinds.
pub trait InsertFilter: Filter {
    /// Adds a key given its hash.
    fn insert_hash(&mut self, hash: KeyHash);

    /// Hashes `key` and adds it.
    fn insert(&mut self, key: &[u8]) {
        self.insert_hash(KeyHash::of(key));
    }
}
