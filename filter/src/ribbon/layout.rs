//! Where a Ribbon filter's solution bits live: interleaved column-major
//! blocks with a mix of two column counts, for any fractional bits per key.
//!
//! The slots are cut into blocks of 128 (one `u128` per column). Block `b`
//! stores its columns one after another as 128-bit segments, and blocks
//! follow each other in order. Blocks `0..upper_start_block` have
//! `upper_columns - 1` columns, the rest `upper_columns`. A key starting in
//! block `b` reads its block's segments and the next block's (its 128 slots
//! straddle the two), and checks as many result bits as its start block has
//! columns: so a filter of `s` segments over `n` blocks checks `s / n`
//! result bits per key on average, whatever fraction that is.

use super::hasher::COEFF_BITS;

/// Most result bits a key checks (32 result bits per equation).
pub const MAX_COLUMNS: u32 = 32;

/// The shape of a solution. Invariants: `num_segments <= MAX_COLUMNS *
/// num_blocks`; `num_blocks` is 0 (empty filter) or at least 2;
/// `upper_columns` and `upper_start_block` are derived from the other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    num_blocks: u64,
    num_segments: u64,
    upper_columns: u32,
    upper_start_block: u64,
}

impl Layout {
    /// The layout of `num_segments` segments over `num_blocks` blocks.
    /// REQUIRES: `num_segments <= MAX_COLUMNS * num_blocks`, `num_blocks`
    /// is 0 or at least 2.
    pub(crate) fn new(num_blocks: u64, num_segments: u64) -> Self {
        debug_assert!(num_segments <= u64::from(MAX_COLUMNS) * num_blocks);
        if num_blocks == 0 || num_segments == 0 {
            return Self {
                num_blocks,
                num_segments: 0,
                upper_columns: 0,
                upper_start_block: 0,
            };
        }
        let upper = num_segments.div_ceil(num_blocks);
        Self {
            num_blocks,
            num_segments,
            // At most MAX_COLUMNS by the precondition.
            upper_columns: upper as u32,
            upper_start_block: upper * num_blocks - num_segments,
        }
    }

    pub(crate) const fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    pub(crate) const fn num_segments(&self) -> u64 {
        self.num_segments
    }

    pub(crate) const fn upper_columns(&self) -> u32 {
        self.upper_columns
    }

    #[cfg(test)]
    pub(crate) const fn upper_start_block(&self) -> u64 {
        self.upper_start_block
    }

    pub(crate) const fn num_slots(&self) -> u64 {
        self.num_blocks * COEFF_BITS
    }

    /// Slots an equation may start at: every slot whose 128-slot span fits.
    /// REQUIRES: `num_blocks > 0`.
    pub(crate) const fn num_starts(&self) -> u64 {
        self.num_slots() - COEFF_BITS + 1
    }

    /// The first segment of block `block` and its number of columns.
    /// Branch-free: whether a random block is a lower one is unpredictable.
    #[inline]
    pub(crate) const fn segments_of_block(&self, block: u64) -> (u64, u32) {
        let upper = self.upper_columns as u64;
        let lower_before = if block < self.upper_start_block {
            block
        } else {
            self.upper_start_block
        };
        let is_lower = (block < self.upper_start_block) as u32;
        (block * upper - lower_before, self.upper_columns - is_lower)
    }

    /// The expected false positive rate for keys spread evenly over the
    /// starts: those starting in the lower blocks match with probability
    /// 2^-(upper - 1), the others 2^-upper. 1 when no bits are stored.
    pub(crate) fn expected_fpr(&self) -> f64 {
        if self.num_blocks == 0 {
            return 0.0;
        }
        if self.upper_columns == 0 {
            return 1.0;
        }
        let lower_starts = (self.upper_start_block * COEFF_BITS).min(self.num_starts());
        let lower_share = lower_starts as f64 / self.num_starts() as f64;
        let upper_rate = 0.5f64.powi(self.upper_columns as i32);
        lower_share * 2.0 * upper_rate + (1.0 - lower_share) * upper_rate
    }

    /// Mean result bits a key checks.
    pub(crate) fn mean_columns(&self) -> f64 {
        if self.num_blocks == 0 {
            return 0.0;
        }
        self.num_segments as f64 / self.num_blocks as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_two_column_counts() {
        let l = Layout::new(10, 73);
        assert_eq!(l.upper_columns(), 8);
        assert_eq!(l.upper_start_block(), 7);
        // Seven blocks of 7 columns, then three of 8.
        assert_eq!(l.segments_of_block(0), (0, 7));
        assert_eq!(l.segments_of_block(6), (42, 7));
        assert_eq!(l.segments_of_block(7), (49, 8));
        assert_eq!(l.segments_of_block(9), (65, 8));
        let (last, cols) = l.segments_of_block(9);
        assert_eq!(last + u64::from(cols), l.num_segments());
    }

    #[test]
    fn whole_columns_have_no_lower_blocks() {
        let l = Layout::new(4, 28);
        assert_eq!((l.upper_columns(), l.upper_start_block()), (7, 0));
        assert!((l.expected_fpr() - 1.0 / 128.0).abs() < 1e-15);
    }

    #[test]
    fn degenerate_layouts() {
        assert_eq!(Layout::new(0, 0).expected_fpr(), 0.0);
        assert_eq!(Layout::new(2, 0).expected_fpr(), 1.0);
        // Fewer segments than blocks: the lower blocks have no columns.
        let l = Layout::new(4, 1);
        assert_eq!((l.upper_columns(), l.upper_start_block()), (1, 3));
        assert_eq!(l.segments_of_block(2), (0, 0));
        assert_eq!(l.segments_of_block(3), (0, 1));
        assert!(l.expected_fpr() > 0.9);
        assert_eq!(Layout::new(3, 96).upper_columns(), 32);
    }
}
