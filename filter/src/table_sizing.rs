//! How a table's filter is sized from the bits per key it is given: for
//! the rate a large filter of its kind reaches at those bits, so a small
//! table (a flush of a few hundred keys) is not penalized by rounding.
//!
//! RocksDB does the same: it turns bits per key into a target false
//! positive rate and sizes every filter for that rate at its key count.
//! Here the rule is a floor, never a cut: a table's filter takes the
//! larger of
//! - the bytes `bits_per_key` gives it, and
//! - the bytes that reach the rate a filter of [`RATE_REFERENCE_ITEMS`]
//!   keys reaches at `bits_per_key` (only for tables with fewer keys).
//!
//! So a table of the reference size or more is built exactly as the bits
//! say, and no table's rate is worse than the reference's.
//!
//! Which kinds need it (measured at 4, 6, 10 and 16 bits per key, 50 to
//! 100,000 keys, 4 million absent probes each; the test
//! `small_tables_reach_the_rate_of_large_ones` checks it):
//! - Ribbon: a filter is whole 128-slot blocks (at least two) with about
//!   1.02 slots per key, and its columns are rounded to whole segments; at
//!   10 bits per key 334 keys get 3 blocks (1.15 slots per key) and run at
//!   0.29% against 0.13% for 100,000 keys. Sized for the rate it takes
//!   11.5 bits per key and runs at 0.10% (RocksDB spent 11.9 bits per key
//!   on a 327-key table for 0.105%); 700 keys take 10.8 for 0.12%.
//! - Standard: the size rounds up to 64-bit words (and a 512-bit
//!   minimum), so a small filter is never below its bits per key and its
//!   rate matches a large one's (0.81-0.86% at 10 bits per key for every
//!   size): left as it is.
//! - Blocked: the size rounds up to whole 512-bit blocks, and the rate of
//!   a block depends only on its expected load, so small filters do as
//!   well or better (0.42-0.89% against 0.95% at 10 bits per key): left
//!   as it is.

use crate::ribbon::{RibbonTarget, ribbon_sizing};

/// Keys of the reference filter whose rate a smaller table's Ribbon
/// filter is sized to reach: large enough that whole blocks and segments
/// cost nothing measurable, and about the size of a full table.
pub const RATE_REFERENCE_ITEMS: u64 = 1 << 16;

/// What a table's Ribbon filter of `items` keys at `bits_per_key` is
/// built for: `BitsPerKey(bits_per_key)`, or for a table under
/// [`RATE_REFERENCE_ITEMS`] keys whose bits would miss the reference's
/// rate, the fewest bytes (`MemoryBytes`) whose expected rate is at most
/// the reference's. (Not `Fpr` of that rate: over a few blocks the mix of
/// column counts is coarse and rounds to a rate up to a third worse.)
pub fn ribbon_table_target(items: u64, bits_per_key: f64) -> RibbonTarget {
    let by_bits = RibbonTarget::BitsPerKey(bits_per_key);
    if items == 0 || items >= RATE_REFERENCE_ITEMS || !bits_per_key.is_finite() {
        return by_bits;
    }
    let reference = ribbon_sizing(RATE_REFERENCE_ITEMS, by_bits).expected_fpr;
    let at_bits = ribbon_sizing(items, by_bits);
    if !(reference > 0.0 && reference < 1.0) || at_bits.expected_fpr <= reference {
        return by_bits;
    }
    // The rate falls as bytes grow; the most bytes (every column) reach
    // 2^-32, under any reference. Invariant: `hi` reaches the reference,
    // `lo` does not.
    let (mut lo, mut hi) = (
        at_bits.serialized_bytes,
        ribbon_sizing(items, RibbonTarget::Fpr(0.0)).serialized_bytes,
    );
    let reaches = |bytes: u64| {
        ribbon_sizing(items, RibbonTarget::MemoryBytes(bytes)).expected_fpr <= reference
    };
    if !reaches(hi) {
        return by_bits;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reaches(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    RibbonTarget::MemoryBytes(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ribbon_tables_take_more_bytes_for_the_reference_rate() {
        for items in [1u64, 100, 334, 700, 5000, 30_000, 65_535] {
            for bits in [2.0, 5.5, 10.0, 17.25] {
                let reference = ribbon_sizing(RATE_REFERENCE_ITEMS, RibbonTarget::BitsPerKey(bits));
                let by_bits = ribbon_sizing(items, RibbonTarget::BitsPerKey(bits));
                let sized = ribbon_sizing(items, ribbon_table_target(items, bits));
                assert!(
                    sized.expected_fpr <= reference.expected_fpr,
                    "{items} keys at {bits}: {} over {}",
                    sized.expected_fpr,
                    reference.expected_fpr
                );
                assert!(sized.solution_bytes >= by_bits.solution_bytes);
                // The fewest bytes that reach it: 16 fewer (one segment)
                // would not.
                if sized.solution_bytes > by_bits.solution_bytes {
                    let less = ribbon_sizing(
                        items,
                        RibbonTarget::MemoryBytes(sized.serialized_bytes - 16),
                    );
                    assert!(less.expected_fpr > reference.expected_fpr);
                }
            }
        }
        let small = ribbon_sizing(334, ribbon_table_target(334, 10.0));
        assert!(small.bits_per_key > 10.0 && small.bits_per_key < 12.0);
        // At or over the reference, and where the bits already reach the
        // rate, the bits decide.
        for items in [RATE_REFERENCE_ITEMS, 1 << 20, 20_000] {
            assert_eq!(
                ribbon_table_target(items, 10.0),
                RibbonTarget::BitsPerKey(10.0)
            );
        }
        assert_eq!(ribbon_table_target(0, 10.0), RibbonTarget::BitsPerKey(10.0));
        assert_eq!(ribbon_table_target(5, 0.0), RibbonTarget::BitsPerKey(0.0));
        assert!(matches!(
            ribbon_table_target(5, f64::NAN),
            RibbonTarget::BitsPerKey(b) if b.is_nan()
        ));
    }
}
