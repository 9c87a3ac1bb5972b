//! The one hashing scheme every persisted filter uses.
//!
//! A key is hashed exactly once, with XXH3-64 and a fixed seed, into a
//! [`KeyHash`]. Every probe position of every filter kind is derived from that
//! single value, so the engine hashes a key once per `get` and probes the
//! filters of all candidate tables with the same `KeyHash`.
//!
//! FROZEN: the hash function, its seed and the probe derivations below decide
//! where bits sit in filters already written to disk. Changing any of them
//! makes every stored filter answer "absent" for keys it holds. The golden
//! vectors in `tests/golden.rs` pin them; a new scheme needs a new
//! [`HASH_ID_XXH3_64`]-style id, never an edit.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Hash id recorded in every serialized filter header: XXH3-64 with
/// [`HASH_SEED`]. FROZEN.
pub const HASH_ID_XXH3_64: u8 = 1;

/// The seed given to XXH3-64 (the ASCII bytes of "bloomlsm"). FROZEN.
pub const HASH_SEED: u64 = 0x626c_6f6f_6d6c_736d;

/// The 64-bit hash of one key, computed once and reused for every probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyHash(u64);

impl KeyHash {
    /// Hashes `key` with the frozen scheme.
    #[inline]
    pub fn of(key: &[u8]) -> Self {
        Self(xxh3_64_with_seed(key, HASH_SEED))
    }

    /// Wraps a raw hash value (for example one read back from a trace).
    #[inline]
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw 64-bit value.
    #[inline]
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// A second, well-mixed 64-bit value derived from the hash (the
    /// finalizer of MurmurHash3). Used where a probe sequence must be
    /// independent of the bits that already chose something else.
    #[inline]
    pub(crate) const fn remixed(self) -> u64 {
        mix64(self.0)
    }
}

/// The finalizer of MurmurHash3 (fmix64): a bijection on u64 in which every
/// output bit depends on every input bit. FROZEN (the blocked and Ribbon
/// filters derive persisted positions from it).
#[inline]
pub(crate) const fn mix64(v: u64) -> u64 {
    let mut x = v ^ (v >> 33);
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Hashes `key` with the frozen scheme (same as [`KeyHash::of`]).
#[inline]
pub fn key_hash(key: &[u8]) -> KeyHash {
    KeyHash::of(key)
}

/// Maps a uniform 64-bit value onto `0..range` without a division
/// (Lemire's multiply-shift). REQUIRES: `range > 0`.
#[inline]
pub(crate) const fn reduce(x: u64, range: u64) -> u64 {
    ((x as u128 * range as u128) >> 64) as u64
}

/// The k probe positions of the standard filter over `num_bits` bits:
/// enhanced double hashing (Dillinger and Manolios), x_i = a + i*b + (i^3-i)/6,
/// each reduced into range by multiply-shift. REQUIRES: `num_bits > 0`.
#[derive(Clone, Debug)]
pub(crate) struct DoubleHashProbes {
    a: u64,
    b: u64,
    i: u64,
    remaining: u32,
    num_bits: u64,
}

impl DoubleHashProbes {
    #[inline]
    pub(crate) fn new(hash: KeyHash, num_hashes: u32, num_bits: u64) -> Self {
        Self {
            a: hash.raw(),
            b: hash.remixed() | 1,
            i: 0,
            remaining: num_hashes,
            num_bits,
        }
    }
}

impl Iterator for DoubleHashProbes {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let position = reduce(self.a, self.num_bits);
        self.a = self.a.wrapping_add(self.b);
        self.i = self.i.wrapping_add(1);
        self.b = self.b.wrapping_add(self.i);
        Some(position)
    }
}

/// Golden-ratio multiplier used to step through a blocked filter's in-block
/// positions (as RocksDB's FastLocalBloom does in 32 bits). FROZEN.
pub(crate) const BLOCK_PROBE_MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// The block a key of a blocked filter lives in, and the seed of its
/// in-block probe sequence. REQUIRES: `num_blocks > 0`.
#[inline]
pub(crate) const fn block_and_seed(hash: KeyHash, num_blocks: u64) -> (u64, u64) {
    (reduce(hash.raw(), num_blocks), hash.remixed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_stays_in_range() {
        for range in [1u64, 2, 7, 512, 1 << 40, u64::MAX] {
            for x in [0u64, 1, u64::MAX / 3, u64::MAX] {
                assert!(reduce(x, range) < range);
            }
        }
    }

    #[test]
    fn probes_count_and_range() {
        let p: Vec<u64> = DoubleHashProbes::new(KeyHash::of(b"x"), 7, 1000).collect();
        assert_eq!(p.len(), 7);
        assert!(p.iter().all(|&b| b < 1000));
    }
}
