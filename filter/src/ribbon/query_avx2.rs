//! The query of the usual shape (4 head columns) with AVX2: the same
//! answers as `solution::head_matches` and `tail_matches`, in fewer
//! instructions.
//!
//! Out of cache a lookup waits for its two lines, and the processor
//! overlaps as many independent lookups as its reorder window holds: the
//! fewer instructions one takes, the more. Here the head check is a few
//! vector instructions on the two lines (four columns' 128 bits of each
//! block at once) instead of a dozen loads and popcounts, and the path of
//! an absent key needs no stack frame.

use core::arch::x86_64::*;

use super::hasher::{COEFF_BITS, coefficients, result_bits};
use super::layout::HEAD_COLUMNS;
use super::{RibbonFilter, tail_popcnt};
use crate::hash::KeyHash;

/// Four result bits with bits 1 and 2 swapped: columns 0, 2, 1, 3, the
/// order of the folded words.
const IN_FOLDED_ORDER: [u8; 16] = {
    let mut table = [0u8; 16];
    let mut r = 0;
    while r < 16 {
        table[r] = ((r & 0b1001) | ((r >> 1) & 0b0010) | ((r << 1) & 0b0100)) as u8;
        r += 1;
    }
    table
};

/// [`RibbonFilter::contains_hash`] with AVX2 (and popcnt, which every CPU
/// with AVX2 has, for the tail). REQUIRES: the CPU has both (the caller
/// checks).
#[target_feature(enable = "avx2,popcnt")]
pub(super) fn contains(filter: &RibbonFilter, hash: KeyHash) -> bool {
    if filter.layout.head_columns() != HEAD_COLUMNS {
        // No keys, or fewer than 4 bits per key.
        return filter.contains_popcnt(hash);
    }
    let x = filter.hasher.seeded(hash);
    let start = filter.hasher.start(x);
    let line = (start / COEFF_BITS) as usize;
    let offset = (start % COEFF_BITS) as u32;
    let next = line + usize::from(offset != 0);
    debug_assert!(next < filter.solution.num_lines());
    // SAFETY: `line <= next < num_blocks <= num_lines`: the start is below
    // `num_starts = 128 num_blocks - 127`, so its block is below
    // `num_blocks` and, when the span straddles, not the last; with 4 head
    // columns every block has at least 4 columns, so the solution has at
    // least `4 num_blocks` segments, `num_blocks` lines (checked when the
    // filter was assembled).
    let (here, there) = unsafe {
        (
            filter.solution.line_unchecked(line),
            filter.solution.line_unchecked(next),
        )
    };
    // SAFETY: a line is 4 segments (64 bytes): 32-byte reads from its
    // first segment and its third stay in it.
    let [here01, here23, next01, next23] = unsafe {
        [
            _mm256_loadu_si256(here.as_ptr().cast()),
            _mm256_loadu_si256(here.as_ptr().add(2).cast()),
            _mm256_loadu_si256(there.as_ptr().cast()),
            _mm256_loadu_si256(there.as_ptr().add(2).cast()),
        ]
    };
    // The coefficients on this block's segments (`coeff << offset`) and on
    // the next's (`coeff >> (128 - offset)`, none at offset 0), in both
    // 128-bit lanes, by 64-bit shifts (counts of 64 or more, negative ones
    // included, give 0).
    let coeff = coefficients(x);
    let (lo, hi) = (coeff as u64 as i64, (coeff >> 64) as u64 as i64);
    let coeff = _mm256_set_epi64x(hi, lo, hi, lo);
    let up = _mm256_slli_si256::<8>(coeff); // 0, lo
    let down = _mm256_srli_si256::<8>(coeff); // hi, 0
    let offset = _mm256_set1_epi64x(i64::from(offset));
    let to_64 = _mm256_sub_epi64(_mm256_set1_epi64x(64), offset);
    let past_64 = _mm256_sub_epi64(offset, _mm256_set1_epi64x(64));
    let left = _mm256_or_si256(
        _mm256_sllv_epi64(coeff, offset),
        _mm256_or_si256(_mm256_srlv_epi64(up, to_64), _mm256_sllv_epi64(up, past_64)),
    );
    let to_128 = _mm256_sub_epi64(_mm256_set1_epi64x(128), offset);
    let right = _mm256_or_si256(
        _mm256_srlv_epi64(coeff, to_128),
        _mm256_or_si256(
            _mm256_sllv_epi64(down, past_64),
            _mm256_srlv_epi64(down, to_64),
        ),
    );
    // Columns 0 and 1, 2 and 3: each column's 128 covered bits.
    let covered01 = _mm256_xor_si256(
        _mm256_and_si256(here01, left),
        _mm256_and_si256(next01, right),
    );
    let covered23 = _mm256_xor_si256(
        _mm256_and_si256(here23, left),
        _mm256_and_si256(next23, right),
    );
    // Folded to 64 bits: columns 0, 2, 1, 3.
    let folded = _mm256_xor_si256(
        _mm256_unpacklo_epi64(covered01, covered23),
        _mm256_unpackhi_epi64(covered01, covered23),
    );
    // The parity of each 64-bit word: of each byte by a table of the 16
    // nibbles' parities, then summed over the word's 8 bytes.
    let table = _mm256_setr_epi8(
        0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, //
        0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0,
    );
    let nibbles = _mm256_set1_epi8(0x0f);
    let low = _mm256_and_si256(folded, nibbles);
    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(folded), nibbles);
    let byte_parities = _mm256_xor_si256(
        _mm256_shuffle_epi8(table, low),
        _mm256_shuffle_epi8(table, high),
    );
    let sums = _mm256_sad_epu8(byte_parities, _mm256_setzero_si256());
    let parities = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_slli_epi64::<63>(sums))) as u32;
    // The result bits in the same order.
    if parities != u32::from(IN_FOLDED_ORDER[(result_bits(x) & 0b1111) as usize]) {
        return false;
    }
    tail_popcnt(filter, hash)
}
