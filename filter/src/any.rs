//! A filter of either persisted kind, decoded from bytes by its header.

use crate::blocked::BlockedBloomFilter;
use crate::codec;
use crate::error::{FilterError, Result};
use crate::filter_trait::Filter;
use crate::hash::KeyHash;
use crate::kind::FilterKind;
use crate::standard::BloomFilter;

/// A standard or blocked filter, as stored in a table's filter block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyFilter {
    /// A [`BloomFilter`].
    Standard(BloomFilter),
    /// A [`BlockedBloomFilter`].
    Blocked(BlockedBloomFilter),
}

impl AnyFilter {
    /// An empty filter of `kind` for `expected_items` at `bits_per_key`.
    /// The counting kind is not a table filter and is refused.
    pub fn with_bits_per_key(
        kind: FilterKind,
        expected_items: u64,
        bits_per_key: f64,
    ) -> Result<Self> {
        match kind {
            FilterKind::Standard => Ok(Self::Standard(BloomFilter::with_bits_per_key(
                expected_items,
                bits_per_key,
            ))),
            FilterKind::Blocked => Ok(Self::Blocked(BlockedBloomFilter::with_bits_per_key(
                expected_items,
                bits_per_key,
            ))),
            FilterKind::Counting => Err(FilterError::WrongKind {
                expected: "standard or blocked",
                found: "counting",
            }),
        }
    }

    /// Decodes either kind, as named by the header. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (_, kind, _) = codec::decode(bytes)?;
        match kind {
            FilterKind::Standard => BloomFilter::from_bytes(bytes).map(Self::Standard),
            FilterKind::Blocked => BlockedBloomFilter::from_bytes(bytes).map(Self::Blocked),
            FilterKind::Counting => Err(FilterError::WrongKind {
                expected: "standard or blocked",
                found: "counting",
            }),
        }
    }

    /// Serializes the filter.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Standard(f) => f.to_bytes(),
            Self::Blocked(f) => f.to_bytes(),
        }
    }

    /// Which kind this is.
    pub fn kind(&self) -> FilterKind {
        match self {
            Self::Standard(_) => FilterKind::Standard,
            Self::Blocked(_) => FilterKind::Blocked,
        }
    }

    fn inner(&self) -> &dyn Filter {
        match self {
            Self::Standard(f) => f,
            Self::Blocked(f) => f,
        }
    }
}

impl Filter for AnyFilter {
    fn insert_hash(&mut self, hash: KeyHash) {
        match self {
            Self::Standard(f) => f.insert_hash(hash),
            Self::Blocked(f) => f.insert_hash(hash),
        }
    }

    #[inline]
    fn contains_hash(&self, hash: KeyHash) -> bool {
        match self {
            Self::Standard(f) => f.contains_hash(hash),
            Self::Blocked(f) => f.contains_hash(hash),
        }
    }

    fn num_bits(&self) -> u64 {
        self.inner().num_bits()
    }

    fn num_hashes(&self) -> u32 {
        self.inner().num_hashes()
    }

    fn len(&self) -> u64 {
        self.inner().len()
    }

    fn fill_ratio(&self) -> f64 {
        self.inner().fill_ratio()
    }

    fn theoretical_fpr(&self) -> f64 {
        self.inner().theoretical_fpr()
    }

    fn memory_bytes(&self) -> usize {
        self.inner().memory_bytes()
    }
}
