//! Back-substitution from the band into the interleaved solution, and the
//! query that checks a key's equation against it.

use super::banding::Banding;
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
        let columns = columns as usize;
        let base = (block * COEFF_BITS) as usize;
        for i in (base..base + COEFF_BITS as usize).rev() {
            let (coeff, result) = banding.row(i);
            if coeff == 0 {
                // A free row: its bit is 0 in every column.
                for s in &mut state[..columns] {
                    *s <<= 1;
                }
                continue;
            }
            let mut result = result;
            for s in &mut state[..columns] {
                let shifted = *s << 1;
                let bit = (parity(shifted & coeff) ^ result) & 1;
                result >>= 1;
                *s = shifted | u128::from(bit);
            }
        }
        let first = first as usize;
        segments[first..first + columns].copy_from_slice(&state[..columns]);
    }
    segments
}

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
    let mut result = result;
    if offset == 0 {
        // The span is exactly this block (always so in the last block).
        for seg in here {
            if (parity(seg & left) ^ result) & 1 != 0 {
                return false;
            }
            result >>= 1;
        }
    } else {
        // The span straddles this block and the next, whose first
        // `columns` segments follow this block's.
        let next = &segments[first + columns..first + 2 * columns];
        let right = coeff >> (COEFF_BITS as u32 - offset);
        for (seg, seg_next) in here.iter().zip(next) {
            if (parity((seg & left) ^ (seg_next & right)) ^ result) & 1 != 0 {
                return false;
            }
            result >>= 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::hasher::Equation;
    use super::*;

    #[test]
    fn every_added_equation_holds_after_back_substitution() {
        // A small band with equations of known shape, including ones that
        // straddle blocks and a layout with 2 and 3 columns.
        let layout = Layout::new(4, 10);
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
        assert_eq!(segments.len(), 10);
        for eq in eqs {
            assert!(matches(&segments, &layout, eq.start, eq.coeff, eq.result));
        }
    }
}
