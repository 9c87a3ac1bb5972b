//! How many slots and solution bits a Ribbon filter gets.
//!
//! Slots are the unknowns of the linear system: a little more than one per
//! key, or the elimination fails (`slot_overhead`). Solution bits are
//! `columns x slots`; the columns set the false positive rate (2^-columns)
//! and may be fractional (see `layout`), so any bits per key can be spent.

use super::hasher::COEFF_BITS;
use super::layout::{Layout, MAX_COLUMNS};
use crate::codec;

/// Fewest blocks a non-empty filter has: with one block every key would
/// start at slot 0.
pub(crate) const MIN_BLOCKS: u64 = 2;

/// Bytes a serialized Ribbon filter has besides its solution: the common
/// header, the Ribbon parameters and the checksum.
pub const RIBBON_FIXED_BYTES: u64 =
    (codec::HEADER_LEN + codec::RIBBON_PARAMS_LEN + codec::CHECKSUM_LEN) as u64;

/// Slots per key for `items` keys: 1.02 up to about 16,000 keys, then
/// 0.0035 more per doubling (1.037 at 100,000 keys, 1.051 at a million,
/// 1.063 at ten million). Measured on this implementation: at these sizes
/// one seed fails to solve about 1 time in 20 or less (0 of 40 builds at a
/// million keys, 0 of 8 at ten million; 5.2% at 10,000 keys with 1.02), so
/// the retries with other seeds are rare. Fewer slots save space but cost
/// retries: 1.03 fails 72% of the time at a million keys.
pub(crate) fn slot_overhead(items: u64) -> f64 {
    let log2 = (items.max(1) as f64).log2();
    1.0 + (0.0035 * log2 - 0.019).max(0.02)
}

/// Blocks for `items` keys (0 for none).
pub(crate) fn blocks_for(items: u64) -> u64 {
    if items == 0 {
        return 0;
    }
    let slots = (items as f64 * slot_overhead(items)).ceil() as u64;
    slots.div_ceil(COEFF_BITS).max(MIN_BLOCKS)
}

/// What a filter is sized for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RibbonTarget {
    /// Spend this many bits per key (any fraction). Tiny filters get at
    /// least the columns a large one would have over two blocks.
    BitsPerKey(f64),
    /// Reach this false positive rate (clamped to 2^-32..=1).
    Fpr(f64),
    /// Fit in this many serialized bytes, header included.
    MemoryBytes(u64),
}

/// The layout for `target` with `num_blocks` blocks for `items` keys.
pub(crate) fn layout_for(target: RibbonTarget, items: u64, num_blocks: u64) -> Layout {
    let max_segments = u64::from(MAX_COLUMNS) * num_blocks;
    if num_blocks == 0 {
        return Layout::new(0, 0);
    }
    let segments = match target {
        RibbonTarget::BitsPerKey(bpk) if bpk.is_finite() && bpk > 0.0 => {
            let budget = items as f64 * bpk;
            let minimum = (MIN_BLOCKS * COEFF_BITS) as f64 * bpk / slot_overhead(items);
            (budget.max(minimum) / COEFF_BITS as f64).round() as u64
        }
        RibbonTarget::BitsPerKey(_) => 0,
        RibbonTarget::Fpr(fpr) => return layout_for_fpr(fpr, num_blocks),
        RibbonTarget::MemoryBytes(bytes) => {
            bytes.saturating_sub(RIBBON_FIXED_BYTES) / (COEFF_BITS / 8)
        }
    };
    Layout::new(num_blocks, segments.min(max_segments))
}

/// The mix of `c` and `c + 1` columns whose expected rate is `fpr`: a share
/// p of the keys (those in the lower blocks) checks c bits, so
/// p 2^-c + (1 - p) 2^-(c+1) = fpr, p = fpr 2^(c+1) - 1.
fn layout_for_fpr(fpr: f64, num_blocks: u64) -> Layout {
    if fpr.is_nan() || fpr >= 1.0 {
        return Layout::new(num_blocks, 0);
    }
    let bits = -fpr.max(f64::MIN_POSITIVE).log2();
    if bits >= f64::from(MAX_COLUMNS) {
        return Layout::new(num_blocks, u64::from(MAX_COLUMNS) * num_blocks);
    }
    let lower = bits.floor();
    let upper = lower + 1.0;
    let share = (fpr * upper.exp2() - 1.0).clamp(0.0, 1.0);
    let num_starts = num_blocks * COEFF_BITS - COEFF_BITS + 1;
    let lower_blocks = ((share * num_starts as f64) / COEFF_BITS as f64)
        .round()
        .min(num_blocks as f64) as u64;
    let segments = num_blocks * upper as u64 - lower_blocks;
    Layout::new(
        num_blocks,
        segments.min(u64::from(MAX_COLUMNS) * num_blocks),
    )
}

/// What a Ribbon filter for some number of keys costs and answers, before
/// it is built (a build grows past this only if 64 seeds in a row fail,
/// each about 1 time in 20 or less: not expected to happen).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RibbonSizing {
    /// Keys the filter is sized for.
    pub items: u64,
    /// Unknowns of the linear system (a multiple of 128).
    pub slots: u64,
    /// Mean result bits a key checks (solution bits / slots).
    pub mean_columns: f64,
    /// Bytes of the solution.
    pub solution_bytes: u64,
    /// Bytes serialized: the solution and [`RIBBON_FIXED_BYTES`].
    pub serialized_bytes: u64,
    /// Solution bits per key.
    pub bits_per_key: f64,
    /// Expected false positive rate.
    pub expected_fpr: f64,
}

/// Most keys [`ribbon_sizing`] sizes: 2^56. Up to it every figure fits in
/// a `u64` (at most 2^50 blocks of 128 slots, 32 columns of 16 bytes
/// each); no filter near it could be built in memory anyway.
pub const MAX_RIBBON_ITEMS: u64 = 1 << 56;

/// Sizes a Ribbon filter of `items` keys for `target`, as
/// [`crate::RibbonFilter`] would build it.
///
/// # Panics
///
/// If `items` is more than [`MAX_RIBBON_ITEMS`] (past it the slot count
/// would not fit in a `u64`), as `Vec::with_capacity` panics on a capacity
/// past what memory can address.
pub fn ribbon_sizing(items: u64, target: RibbonTarget) -> RibbonSizing {
    assert!(
        items <= MAX_RIBBON_ITEMS,
        "ribbon_sizing: {items} items is more than MAX_RIBBON_ITEMS ({MAX_RIBBON_ITEMS})"
    );
    let layout = layout_for(target, items, blocks_for(items));
    let solution_bytes = layout.num_segments() * (COEFF_BITS / 8);
    RibbonSizing {
        items,
        slots: layout.num_slots(),
        mean_columns: layout.mean_columns(),
        solution_bytes,
        serialized_bytes: solution_bytes + RIBBON_FIXED_BYTES,
        bits_per_key: if items == 0 {
            0.0
        } else {
            (solution_bytes * 8) as f64 / items as f64
        },
        expected_fpr: if items == 0 {
            0.0
        } else {
            layout.expected_fpr()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fpr_target_mixes_columns_to_hit_the_rate() {
        for fpr in [0.05, 0.01, 0.003, 1e-4] {
            let s = ribbon_sizing(1_000_000, RibbonTarget::Fpr(fpr));
            assert!(
                (s.expected_fpr - fpr).abs() < fpr * 0.01,
                "{fpr}: {}",
                s.expected_fpr
            );
            let ideal = -fpr.log2();
            assert!(s.mean_columns >= ideal && s.mean_columns < ideal * 1.03);
        }
        assert_eq!(
            ribbon_sizing(1000, RibbonTarget::Fpr(2.0)).mean_columns,
            0.0
        );
        assert_eq!(
            ribbon_sizing(1000, RibbonTarget::Fpr(1e-30)).mean_columns,
            32.0
        );
    }

    #[test]
    fn bits_per_key_and_memory_targets() {
        let s = ribbon_sizing(100_000, RibbonTarget::BitsPerKey(9.9));
        assert!((s.bits_per_key - 9.9).abs() < 0.01, "{}", s.bits_per_key);
        let m = ribbon_sizing(100_000, RibbonTarget::MemoryBytes(s.serialized_bytes));
        assert_eq!(m, s);
        // Tiny filters get the columns of a large one over two blocks.
        let tiny = ribbon_sizing(1, RibbonTarget::BitsPerKey(10.0));
        assert_eq!(tiny.slots, 256);
        assert!(tiny.mean_columns > 9.0 && tiny.expected_fpr < 0.002);
        assert_eq!(ribbon_sizing(0, RibbonTarget::BitsPerKey(10.0)).slots, 0);
        assert_eq!(
            ribbon_sizing(10, RibbonTarget::BitsPerKey(-1.0)).expected_fpr,
            1.0
        );
    }
}
