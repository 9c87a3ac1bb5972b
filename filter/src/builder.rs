//! Builds a filter from key hashes streamed in before the item count is known.

use crate::any::AnyFilter;
use crate::error::Result;
use crate::hash::KeyHash;
use crate::kind::FilterKind;

/// Collects one 8-byte hash per key (never the keys) and builds the filter
/// for exactly those keys in [`FilterBuilder::finish`], as a table writer
/// needs: the number of keys is known only at the end, and a Ribbon filter
/// is solved from all of them at once.
#[derive(Clone, Debug)]
pub struct FilterBuilder {
    kind: FilterKind,
    bits_per_key: f64,
    hashes: Vec<KeyHash>,
}

impl FilterBuilder {
    /// A builder for a filter of `kind` at `bits_per_key`. The counting kind
    /// is refused at `finish`.
    pub fn new(kind: FilterKind, bits_per_key: f64) -> Self {
        Self {
            kind,
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Adds one key by its hash. REQUIRES: each distinct key is added once
    /// (a duplicate only wastes space; it never causes a false negative).
    pub fn add_hash(&mut self, hash: KeyHash) {
        self.hashes.push(hash);
    }

    /// Changes the bits per key the filter is built with: a table writer
    /// learns how many keys a table holds only at its end, and may then
    /// have to fit its filter into fewer bytes than the bits first asked.
    pub fn set_bits_per_key(&mut self, bits_per_key: f64) {
        self.bits_per_key = bits_per_key;
    }

    /// Bits per key the filter will be built with.
    pub fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    /// Keys added so far.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// No key added yet.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Builds the filter of the keys added.
    pub fn finish(self) -> Result<AnyFilter> {
        AnyFilter::build(self.kind, &self.hashes, self.bits_per_key)
    }
}
