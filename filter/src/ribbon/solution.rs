//! Back-substitution from the band into the interleaved solution, and the
//! query that checks a key's equation against it.

use super::banding::{Banding, HI, LO, RESULT, Row};
use super::hasher::COEFF_BITS;
use super::layout::{Layout, MAX_COLUMNS};

/// The parity of `v`'s set bits. On x86-64 the `popcnt` instruction is not
/// part of the baseline target, so back-substitution (about ten parities
/// per slot) is compiled twice and the `popcnt` copy is chosen at run time
/// when the CPU has it. The query keeps the portable form, inlined: it
/// computes about two parities for an absent key, and a call into a
/// `target_feature` function would cost more than it saves (measured).
#[inline(always)]
fn parity(v: u128) -> u32 {
    ((v as u64) ^ ((v >> 64) as u64)).count_ones() & 1
}

/// Solves the band from the last slot to the first and returns the
/// solution's segments in `layout` order. Free rows get solution bit 0.
///
/// Column by column, `state[j]` holds the solution bits of the 128 slots
/// after the current one (bit 0 = the next slot). Row `i`'s equation reads
/// `bit(i) + sum over t >= 1 of coeff_t * bit(i + t) = result_j`, so bit(i)
/// is the parity of `(state << 1) & coeff` plus `result_j`. After the 128
/// slots of a block, `state[j]` is exactly that block's segment of column j.
/// REQUIRES: `banding` has `layout.num_slots()` rows.
pub(crate) fn back_substitute(banding: &Banding, layout: &Layout) -> Vec<u128> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has popcnt, checked just above; that is the only
        // requirement of a `target_feature(enable = "popcnt")` function.
        return unsafe { back_substitute_popcnt(banding, layout) };
    }
    back_substitute_portable(banding, layout)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn back_substitute_popcnt(banding: &Banding, layout: &Layout) -> Vec<u128> {
    back_substitute_portable(banding, layout)
}

#[inline(always)]
fn back_substitute_portable(banding: &Banding, layout: &Layout) -> Vec<u128> {
    let mut segments = vec![0u128; layout.num_segments() as usize];
    let mut state = [0u128; MAX_COLUMNS as usize];
    for block in (0..layout.num_blocks()).rev() {
        let (first, columns) = layout.segments_of_block(block);
        solve_block(columns, banding.block_rows(block), &mut state);
        let (first, columns) = (first as usize, columns as usize);
        segments[first..first + columns].copy_from_slice(&state[..columns]);
    }
    segments
}

/// Solves one block's 128 rows, last to first, into the first `columns`
/// entries of `state`, with the column count a constant of the code (so
/// the columns are unrolled and their state kept in registers where it
/// fits). Columns past `columns` are left as they are.
#[inline(always)]
fn solve_block(
    columns: u32,
    rows: &[Row; COEFF_BITS as usize],
    state: &mut [u128; MAX_COLUMNS as usize],
) {
    macro_rules! by_columns {
        ($($c:literal)*) => {
            match columns {
                $($c => solve_block_with::<$c>(rows, state),)*
                _ => {}
            }
        };
    }
    by_columns!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
}

/// [`solve_block`] for `C` columns. A free row is all zero, so it gets
/// bit 0 in every column without a branch (parity of nothing, result 0).
#[inline(always)]
fn solve_block_with<const C: usize>(
    rows: &[Row; COEFF_BITS as usize],
    state: &mut [u128; MAX_COLUMNS as usize],
) {
    let mut s = [0u128; C];
    s.copy_from_slice(&state[..C]);
    for row in rows.iter().rev() {
        let coeff = (u128::from(row[HI]) << 64) | u128::from(row[LO]);
        let result = row[RESULT];
        for (j, column) in s.iter_mut().enumerate() {
            let shifted = *column << 1;
            let bit = (parity(shifted & coeff) ^ (result >> j) as u32) & 1;
            *column = shifted | u128::from(bit);
        }
    }
    state[..C].copy_from_slice(&s);
}

/// Columns a query checks before its first branch on the solution: an
/// absent key fails one of them with probability 3/4, and no branch that
/// depends on memory not yet loaded stands between one lookup and the
/// next, so lookups out of cache overlap (a branch per column mispredicts
/// half the time and serializes the misses). Column 0 and 1 of a block
/// share a cache line three times in four.
const FIRST_COLUMNS: usize = 2;

/// Whether the equation (`start`, `coeff`, `result`) holds in the solution,
/// for as many result bits as the start block has columns.
/// REQUIRES: `start < layout.num_starts()` and `segments` laid out by
/// `layout` (checked when a filter is built or decoded).
#[inline]
pub(crate) fn matches(
    segments: &[u128],
    layout: &Layout,
    start: u64,
    coeff: u128,
    result: u32,
) -> bool {
    let block = start / COEFF_BITS;
    let offset = (start % COEFF_BITS) as u32;
    let (first, columns) = layout.segments_of_block(block);
    let first = first as usize;
    let columns = columns as usize;
    let here = &segments[first..first + columns];
    let left = coeff << offset;
    // The span straddles this block and the next, whose first `columns`
    // segments follow this block's, unless it is exactly this block
    // (always so in the last block, which has no next).
    let (next, right) = if offset == 0 {
        (here, 0)
    } else {
        (
            &segments[first + columns..first + 2 * columns],
            coeff >> (COEFF_BITS as u32 - offset),
        )
    };
    let column = |j: usize| parity((here[j] & left) ^ (next[j] & right)) ^ (result >> j);
    let early = columns.min(FIRST_COLUMNS);
    let mut mismatch = 0;
    for j in 0..early {
        mismatch |= column(j);
    }
    if mismatch & 1 != 0 {
        return false;
    }
    (early..columns).all(|j| column(j) & 1 == 0)
}

#[cfg(test)]
mod tests {
    use super::super::hasher::Equation;
    use super::*;

    /// A band of 4 blocks with equations of known shape (some straddling
    /// blocks), solved into `layout`: every banded equation must hold, in
    /// every column its start block checks.
    fn check_layout(layout: Layout) {
        let mut band = Banding::new(layout.num_slots());
        let mut eqs = Vec::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..300 {
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(7);
            let start = (x >> 40) % layout.num_starts();
            let coeff = (u128::from(x) << 64 | u128::from(x.rotate_left(17))) | 1;
            let eq = Equation {
                start,
                coeff,
                result: (x >> 13) as u32,
            };
            if band.add(eq) {
                eqs.push(eq);
            } else {
                break;
            }
        }
        assert!(eqs.len() > 200, "{} equations banded", eqs.len());
        let segments = back_substitute(&band, &layout);
        assert_eq!(segments.len() as u64, layout.num_segments());
        for eq in eqs {
            assert!(
                matches(&segments, &layout, eq.start, eq.coeff, eq.result),
                "{layout:?} {eq:?}"
            );
        }
    }

    #[test]
    fn every_added_equation_holds_after_back_substitution() {
        // 2 and 3 columns.
        check_layout(Layout::new(4, 10));
    }

    #[test]
    fn every_column_count_solves() {
        // Each count of columns has its own code: upper blocks of `c`
        // columns after lower ones of `c - 1` (none for 1), then whole.
        for c in 1..=MAX_COLUMNS as u64 {
            check_layout(Layout::new(4, 4 * c - 1));
            check_layout(Layout::new(4, 4 * c));
        }
    }
}
