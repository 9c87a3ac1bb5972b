//! A table filter of any persisted kind, decoded from bytes by its header.

use crate::blocked::BlockedBloomFilter;
use crate::codec;
use crate::error::{FilterError, Result};
use crate::filter_trait::{Filter, InsertFilter};
use crate::hash::KeyHash;
use crate::kind::FilterKind;
use crate::ribbon::RibbonFilter;
use crate::standard::BloomFilter;
use crate::table_sizing;

/// A standard, blocked or Ribbon filter, as stored in a table's filter block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyFilter {
    /// A [`BloomFilter`].
    Standard(BloomFilter),
    /// A [`BlockedBloomFilter`].
    Blocked(BlockedBloomFilter),
    /// A [`RibbonFilter`].
    Ribbon(RibbonFilter),
}

const TABLE_KINDS: &str = "standard, blocked or ribbon";

impl AnyFilter {
    /// A table filter of `kind` holding exactly `hashes`, at `bits_per_key`
    /// as [`crate::table_sizing`] sizes it (a small Ribbon filter gets the
    /// bytes that reach a large one's rate). The counting kind is not a
    /// table filter and is refused.
    pub fn build(kind: FilterKind, hashes: &[KeyHash], bits_per_key: f64) -> Result<Self> {
        let n = hashes.len() as u64;
        match kind {
            FilterKind::Standard => {
                let mut f = BloomFilter::with_bits_per_key(n, bits_per_key);
                hashes.iter().for_each(|&h| f.insert_hash(h));
                Ok(Self::Standard(f))
            }
            FilterKind::Blocked => {
                let mut f = BlockedBloomFilter::with_bits_per_key(n, bits_per_key);
                hashes.iter().for_each(|&h| f.insert_hash(h));
                Ok(Self::Blocked(f))
            }
            FilterKind::Ribbon => Ok(Self::Ribbon(RibbonFilter::build(
                hashes,
                table_sizing::ribbon_table_target(n, bits_per_key),
            ))),
            FilterKind::Counting => Err(FilterError::WrongKind {
                expected: TABLE_KINDS,
                found: "counting",
            }),
        }
    }

    /// Decodes any table kind, as named by the header. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (_, kind, _) = codec::decode(bytes)?;
        match kind {
            FilterKind::Standard => BloomFilter::from_bytes(bytes).map(Self::Standard),
            FilterKind::Blocked => BlockedBloomFilter::from_bytes(bytes).map(Self::Blocked),
            FilterKind::Ribbon => RibbonFilter::from_bytes(bytes).map(Self::Ribbon),
            FilterKind::Counting => Err(FilterError::WrongKind {
                expected: TABLE_KINDS,
                found: "counting",
            }),
        }
    }

    /// Serializes the filter.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Standard(f) => f.to_bytes(),
            Self::Blocked(f) => f.to_bytes(),
            Self::Ribbon(f) => f.to_bytes(),
        }
    }

    /// Which kind this is.
    pub fn kind(&self) -> FilterKind {
        match self {
            Self::Standard(_) => FilterKind::Standard,
            Self::Blocked(_) => FilterKind::Blocked,
            Self::Ribbon(_) => FilterKind::Ribbon,
        }
    }

    fn inner(&self) -> &dyn Filter {
        match self {
            Self::Standard(f) => f,
            Self::Blocked(f) => f,
            Self::Ribbon(f) => f,
        }
    }
}

impl Filter for AnyFilter {
    #[inline]
    fn contains_hash(&self, hash: KeyHash) -> bool {
        match self {
            Self::Standard(f) => f.contains_hash(hash),
            Self::Blocked(f) => f.contains_hash(hash),
            Self::Ribbon(f) => f.contains_hash(hash),
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

    fn estimated_fpr(&self) -> f64 {
        self.inner().estimated_fpr()
    }

    fn estimated_items(&self) -> f64 {
        self.inner().estimated_items()
    }
}
