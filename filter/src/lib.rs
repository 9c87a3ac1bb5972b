//! Bloom filters and their math, as the lecture
//! (`docs/lecture.md`) builds them. No I/O.
//!
//! - [`BloomFilter`]: m bits, k probes anywhere in them.
//! - [`BlockedBloomFilter`]: all k probes of a key in one 64-byte block, so a
//!   lookup costs one cache miss.
//! - [`CountingBloomFilter`]: 4-bit counters, supports `remove`, 4x the size.
//! - [`RibbonFilter`]: a static filter solved once from all its keys, about
//!   1.04 to 1.09 x log2(1/eps) bits per key where Bloom needs 1.44 x.
//!
//! Every kind derives its probes from one XXH3-64 hash ([`KeyHash`]), so a
//! key is hashed once and the hash probes any number of filters. [`Filter`]
//! is the query side of every kind; [`InsertFilter`] adds keys to the Bloom
//! kinds. Filters serialize to a versioned, checksummed byte layout (module
//! `codec`) whose decoder never panics; [`AnyFilter`] decodes any table
//! kind and [`FilterBuilder`] builds one from streamed hashes.
//!
//! ```
//! use bloomlsm_filter::{BloomFilter, Filter, InsertFilter, KeyHash};
//! let mut filter = BloomFilter::with_bits_per_key(1000, 10.0);
//! filter.insert(b"https://example.com/");
//! assert!(filter.contains(b"https://example.com/"));
//! let h = KeyHash::of(b"https://example.com/");
//! assert!(filter.contains_hash(h));
//! let back = BloomFilter::from_bytes(&filter.to_bytes()).unwrap();
//! assert_eq!(back, filter);
//! ```

mod any;
mod bits;
mod blocked;
mod builder;
pub mod codec;
mod counting;
mod error;
mod filter_trait;
#[doc(hidden)]
pub mod fuzzing;
mod hash;
mod kind;
pub mod lecture;
pub mod math;
pub mod planning;
mod ribbon;
mod standard;
pub mod table_sizing;

pub use any::AnyFilter;
pub use blocked::{BLOCK_BITS, BlockedBloomFilter};
pub use builder::FilterBuilder;
pub use counting::{COUNTER_MAX, CountingBloomFilter};
pub use error::{FilterError, Result};
pub use filter_trait::{Filter, InsertFilter};
pub use hash::{HASH_ID_XXH3_64, HASH_SEED, KeyHash, key_hash};
pub use kind::FilterKind;
pub use ribbon::{
    MAX_COLUMNS, MAX_RIBBON_ITEMS, RIBBON_FIXED_BYTES, RibbonFilter, RibbonSizing, RibbonTarget,
    ribbon_sizing,
};
pub use standard::{BloomFilter, MIN_FILTER_BITS};
