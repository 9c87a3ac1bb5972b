//! How a Ribbon filter turns a key's hash into one equation over GF(2).
//!
//! A key's [`KeyHash`] and the filter's seed give a 64-bit seeded hash `x`;
//! from `x` come the key's start slot (multiply-shift of `x`, so it depends
//! mostly on the high bits), 128 coefficient bits (a mix of `x` spread by
//! a 128-bit product, the lowest bit forced to 1 so the equation's first unknown is the
//! start slot) and 32 result bits (a separate multiply-shift of `x`). The filter stores a
//! solution `S` with `coefficients . S[start..start + 128] = result` for
//! every key it holds; an absent key's left side is an unrelated parity, so
//! it matches each result bit with probability 1/2.
//!
//! FROZEN: every constant and derivation below decides what filters on disk
//! answer. `tests/golden.rs` pins them.

use crate::hash::{KeyHash, mix64, reduce};

/// Slots one equation spans: the band width `w` (one `u128`).
pub(crate) const COEFF_BITS: u64 = 128;

/// Seeds a filter may be solved with (`0..NUM_SEEDS`).
pub(crate) const NUM_SEEDS: u32 = 256;

/// Mixes a seed number into the value xored into every key's hash. FROZEN.
const SEED_MIX: u64 = 0x614f_d729_fd4c_5389;
/// Odd, so `(hash ^ seed) * SEEDED_MULTIPLIER` is a bijection: distinct key
/// hashes stay distinct under every seed. FROZEN.
const SEEDED_MULTIPLIER: u64 = 0x833c_792a_e7bd_c8eb;
/// Xored into the seeded hash before the coefficients are mixed. FROZEN.
const COEFF_XOR: u64 = 0x1c93_d0e2_1e86_3ed1;
/// Odd multipliers that spread a mixed value over 128 coefficient bits and
/// over the result bits. FROZEN.
const COEFF_MUL: u64 = 0xd545_3ea6_c191_d439;
const RESULT_MUL: u64 = 0x99ba_7935_1750_b503;

/// One key's equation: `coeff` covers slots `start..start + 128`, bit `t`
/// for slot `start + t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Equation {
    pub(crate) start: u64,
    pub(crate) coeff: u128,
    pub(crate) result: u32,
}

/// The per-filter part of the derivation: the seed and the number of start
/// slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RibbonHasher {
    raw_seed: u64,
    num_starts: u64,
}

impl RibbonHasher {
    /// REQUIRES: `num_starts > 0`.
    pub(crate) const fn new(seed: u32, num_starts: u64) -> Self {
        Self {
            raw_seed: mix64(seed as u64 ^ SEED_MIX),
            num_starts,
        }
    }

    /// The seeded hash `x`; the start slot grows with it.
    #[inline]
    pub(crate) const fn seeded(&self, hash: KeyHash) -> u64 {
        (hash.raw() ^ self.raw_seed).wrapping_mul(SEEDED_MULTIPLIER)
    }

    /// The start slot of seeded hash `x`, in `0..num_starts`; non-decreasing
    /// in `x`.
    #[inline]
    pub(crate) const fn start(&self, x: u64) -> u64 {
        reduce(x, self.num_starts)
    }

    /// The equation of seeded hash `x`.
    #[inline]
    pub(crate) const fn equation(&self, x: u64) -> Equation {
        Equation {
            start: self.start(x),
            coeff: coefficients(x),
            result: result_bits(x),
        }
    }
}

/// 128 coefficient bits with the lowest set: a full mix `y` of `x`, then the
/// 128-bit product `y * COEFF_MUL` with `y` folded into its high half (every
/// 64-bit run of the result has the full entropy of `y`).
#[inline]
pub(crate) const fn coefficients(x: u64) -> u128 {
    let y = mix64(x ^ COEFF_XOR);
    let product = (y as u128) * (COEFF_MUL as u128);
    (product ^ ((y as u128) << 64)) | 1
}

/// 32 result bits, from a separate multiply-shift of `x`; a filter with c
/// columns checks the lowest c.
#[inline]
pub(crate) const fn result_bits(x: u64) -> u32 {
    ((x ^ (x >> 29)).wrapping_mul(RESULT_MUL) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes whose seeded hashes under `hasher` are `xs`.
    fn seeded_to(hasher: &RibbonHasher, xs: impl Iterator<Item = u64>) -> Vec<KeyHash> {
        // The inverse of the odd multiplier mod 2^64 (Newton's iteration).
        let mut inv = SEEDED_MULTIPLIER;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(SEEDED_MULTIPLIER.wrapping_mul(inv)));
        }
        xs.map(|x| KeyHash::from_raw(x.wrapping_mul(inv) ^ hasher.raw_seed))
            .collect()
    }

    /// Distinct keys crowded into one region (as an adversary who knows
    /// the seed can): `split_by_region` takes exactly a room's capacity
    /// (the mean plus eight standard deviations and 64) in the fullest
    /// room of the region (the first: a quarter of the keys and the
    /// remainder) and gives `None` one key past it, and the region holds
    /// the keys room by room.
    #[test]
    fn split_by_region_fills_a_room_exactly_to_its_capacity() {
        use super::super::order::{LANES, room_order, split_by_region};
        let hasher = RibbonHasher::new(9, 1 << 16);
        let mut crossed = 0;
        for bits in [1u32, 3, 7] {
            let regions = 1usize << bits;
            let last = (regions as u64 - 1) << (64 - bits);
            for n in 1..1500usize {
                let mean = n / (LANES * regions) + 1;
                let capacity = mean + 8 * (mean as f64).sqrt() as usize + 64;
                let fullest = n / LANES + n % LANES;
                // Under Miri (slow) only next to the capacity.
                if cfg!(miri) && fullest.abs_diff(capacity) > 1 {
                    continue;
                }
                let xs: Vec<u64> = (0..n as u64).map(|i| last | i).collect();
                let keys = seeded_to(&hasher, xs.iter().copied());
                assert!(keys.iter().zip(&xs).all(|(&h, &x)| hasher.seeded(h) == x));
                let mut order = vec![1; 3];
                let split = split_by_region(&keys, &hasher, bits, &mut order);
                match split {
                    Some(r) => {
                        assert!(fullest <= capacity, "{n} keys, {bits} bits");
                        let got: Vec<&[u64]> = r.iter().collect();
                        assert_eq!(got.len(), regions);
                        assert!(got[..regions - 1].iter().all(|g| g.is_empty()));
                        assert_eq!(got[regions - 1], &room_order(&xs)[..]);
                    }
                    None => {
                        assert!(fullest > capacity, "{n} keys, {bits} bits");
                        crossed += 1;
                    }
                }
            }
        }
        assert!(crossed > 0, "no room overflowed");
    }

    #[test]
    fn starts_stay_in_range_and_follow_the_seeded_hash() {
        let h = RibbonHasher::new(7, 1000);
        let mut last = 0;
        for x in (0..64u32).map(|i| u64::MAX / 64 * u64::from(i)) {
            let s = h.start(x);
            assert!(s < 1000 && s >= last);
            last = s;
        }
        assert_eq!(h.start(u64::MAX), 999);
    }

    #[test]
    fn seeds_change_every_part_of_the_equation() {
        let key = KeyHash::of(b"key");
        let a = RibbonHasher::new(0, 1 << 20);
        let b = RibbonHasher::new(1, 1 << 20);
        let (ea, eb) = (a.equation(a.seeded(key)), b.equation(b.seeded(key)));
        assert_ne!(ea.start, eb.start);
        assert_ne!(ea.coeff, eb.coeff);
        assert_ne!(ea.result, eb.result);
        assert_eq!(ea.coeff & 1, 1);
    }
}
