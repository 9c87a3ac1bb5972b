//! Where a Ribbon filter's solution bits live: interleaved column-major
//! blocks with a mix of two column counts, for any fractional bits per key,
//! split so that a query touches one short span first.
//!
//! The slots are cut into blocks of 128 (one `u128` segment per column).
//! Blocks `0..upper_start_block` have `upper_columns - 1` columns, the rest
//! `upper_columns`: so a filter of `s` segments over `n` blocks checks
//! `s / n` result bits per key on average, whatever fraction that is. A key
//! starting in block `b` needs its columns' segments of blocks `b` and
//! `b + 1` (its 128 slots straddle the two).
//!
//! Format version 2 order (what this build writes and holds in memory):
//! first the *head*, the first `h` columns of every block, block after
//! block (`h = min(HEAD_COLUMNS, fewest columns of any block)`, so the head
//! of block `b` is segments `b h .. b h + h`); then the *tail*, every
//! block's other columns, block after block. A query reads the heads of
//! blocks `b` and `b + 1`, `2 h` segments side by side (for `h = 4`, 128 bytes
//! at a multiple of 64: each block's head is one 64-byte line in memory, so
//! two adjacent cache lines), and an absent
//! key fails one of those `h` columns with probability `1 - 2^-h`; only
//! the rest (and present keys) read the two blocks' tails, again side by
//! side.
//!
//! Format version 1 order (still read): each block's columns in order,
//! blocks one after another (the head and tail of a block together).

use super::hasher::COEFF_BITS;

/// Most result bits a key checks (32 result bits per equation).
pub const MAX_COLUMNS: u32 = 32;

/// Columns of a block in the head (fewer when a block has fewer). FROZEN
/// for format version 2.
pub(crate) const HEAD_COLUMNS: u32 = 4;

/// The shape of a solution. Invariants: `num_segments <= MAX_COLUMNS *
/// num_blocks`; `num_blocks` is 0 (empty filter) or at least 2;
/// `upper_columns` and `upper_start_block` are derived from the other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    num_blocks: u64,
    num_segments: u64,
    upper_columns: u32,
    upper_start_block: u64,
    /// What [`Layout::head_columns`] returns, kept (a query reads it).
    head_columns: u32,
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
                head_columns: 0,
            };
        }
        let upper = num_segments.div_ceil(num_blocks);
        // At most MAX_COLUMNS by the precondition.
        let upper_columns = upper as u32;
        let upper_start_block = upper * num_blocks - num_segments;
        let fewest = upper_columns - (upper_start_block > 0) as u32;
        Self {
            num_blocks,
            num_segments,
            upper_columns,
            upper_start_block,
            head_columns: if fewest < HEAD_COLUMNS {
                fewest
            } else {
                HEAD_COLUMNS
            },
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

    /// The first block of `upper_columns` columns (the blocks before it
    /// have one fewer).
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

    /// Columns of block `block`.
    #[inline]
    pub(crate) const fn columns_of_block(&self, block: u64) -> u32 {
        self.upper_columns - (block < self.upper_start_block) as u32
    }

    /// The first block with any columns (`num_blocks` when no block has
    /// one). Every block from it on has at least one column, so there are
    /// at most `num_segments` of them.
    pub(crate) const fn first_block_with_columns(&self) -> u64 {
        if self.num_segments == 0 {
            self.num_blocks
        } else if self.upper_columns == 1 {
            // Lower blocks have no columns.
            self.upper_start_block
        } else {
            0
        }
    }

    /// Columns every block keeps in the head (see the module notes).
    #[inline]
    pub(crate) const fn head_columns(&self) -> u32 {
        self.head_columns
    }

    /// The first head segment of block `block` (version 2 order).
    #[inline]
    pub(crate) const fn head_of_block(&self, block: u64) -> u64 {
        block * self.head_columns() as u64
    }

    /// The first tail segment of block `block` (version 2 order) and its
    /// number of tail columns. Branch-free: whether a random block is a
    /// lower one is unpredictable.
    #[inline]
    pub(crate) const fn tail_of_block(&self, block: u64) -> (u64, u32) {
        let head = self.head_columns();
        let upper = (self.upper_columns - head) as u64;
        let lower_before = if block < self.upper_start_block {
            block
        } else {
            self.upper_start_block
        };
        (
            self.num_blocks * head as u64 + block * upper - lower_before,
            self.columns_of_block(block) - head,
        )
    }

    /// Where column `column` of block `block` sits in version 2 order.
    /// REQUIRES: `column < self.columns_of_block(block)`.
    #[inline]
    pub(crate) const fn segment(&self, block: u64, column: u32) -> u64 {
        let head = self.head_columns();
        if column < head {
            self.head_of_block(block) + column as u64
        } else {
            self.tail_of_block(block).0 + (column - head) as u64
        }
    }

    /// The first segment of block `block` in version 1 order (its columns
    /// follow it).
    #[cfg(test)]
    pub(crate) const fn v1_first_segment(&self, block: u64) -> u64 {
        let lower_before = if block < self.upper_start_block {
            block
        } else {
            self.upper_start_block
        };
        block * self.upper_columns as u64 - lower_before
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
        // Seven blocks of 7 columns, then three of 8: heads of 4 columns
        // (segments 0..40), then tails of 3 and 4.
        assert_eq!(l.head_columns(), 4);
        assert_eq!((l.columns_of_block(6), l.columns_of_block(7)), (7, 8));
        assert_eq!(l.head_of_block(9), 36);
        assert_eq!(l.tail_of_block(0), (40, 3));
        assert_eq!(l.tail_of_block(6), (58, 3));
        assert_eq!(l.tail_of_block(7), (61, 4));
        assert_eq!(l.tail_of_block(9), (69, 4));
        assert_eq!(l.segment(9, 7), l.num_segments() - 1);
        // Version 1: each block's columns together.
        assert_eq!(l.v1_first_segment(6), 42);
        assert_eq!(l.v1_first_segment(9), 65);
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
        assert_eq!(l.head_columns(), 0);
        assert_eq!(l.tail_of_block(2), (0, 0));
        assert_eq!(l.tail_of_block(3), (0, 1));
        assert_eq!(l.v1_first_segment(3), 0);
        assert_eq!(l.first_block_with_columns(), 3);
        assert_eq!(Layout::new(4, 0).first_block_with_columns(), 4);
        assert_eq!(Layout::new(4, 5).first_block_with_columns(), 0);
        assert!(l.expected_fpr() > 0.9);
        assert_eq!(Layout::new(3, 96).upper_columns(), 32);
        // Two columns everywhere: all head, no tail.
        let l = Layout::new(5, 10);
        assert_eq!((l.head_columns(), l.head_of_block(4)), (2, 8));
        assert_eq!(l.tail_of_block(4), (10, 0));
    }

    /// Version 2 order is a permutation of the segments, for every shape.
    #[test]
    fn every_segment_has_one_place() {
        for blocks in [2u64, 3, 7] {
            for segments in 0..=u64::from(MAX_COLUMNS) * blocks {
                let l = Layout::new(blocks, segments);
                let mut seen = vec![false; segments as usize];
                for b in 0..blocks {
                    for j in 0..l.columns_of_block(b) {
                        let s = l.segment(b, j) as usize;
                        assert!(!seen[s], "{l:?} block {b} column {j}");
                        seen[s] = true;
                    }
                }
                assert!(seen.iter().all(|&s| s), "{l:?}");
            }
        }
    }
}
