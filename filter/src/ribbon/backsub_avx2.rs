//! Back-substitution eight rows at a time with AVX2: the same solution as
//! `solution::back_substitute_portable`, bit for bit, in fewer
//! instructions.
//!
//! The one-row-at-a-time form (see `solution`) computes each solution bit
//! from the 128 bits after it, so every row waits for the one above it.
//! Here a block's 128 rows are taken in groups of eight, from the top
//! group down. For row `p` of a group (slot `base + p`), its coefficient
//! bits split in two:
//! - those on slots above the group (`base + 8` on), whose solution bits
//!   are known before the group starts: `state[j]` holds them for column
//!   `j` (bit 0 = slot `base + 8`), and the row's coefficients shifted
//!   right by `8 - p` line up with it. Their parity does not depend on
//!   the other rows of the group, so the eight rows are done side by side,
//!   one column at a time (the eight parities of a column in one vector);
//! - those on the `7 - p` slots of the group above the row, whose bits are
//!   only known once those rows are solved: they are added afterwards, row
//!   by row from the top of the group down, on all columns at once (a row's
//!   bits for every column are one word, bit `j` for column `j`).
//!
//! Then each column's eight new bits go into its state (`state << 8 |
//! bits`), and after the block's sixteen groups the state is the block's
//! segments, as in the portable form. Free rows are all zero and get bit 0
//! in every column, without a branch.

use core::arch::x86_64::*;

use super::banding::{Banding, Coeffs, LO};
use super::layout::{Layout, MAX_COLUMNS};
use super::storage::Solution;

/// Rows solved together.
pub(super) const GROUP: usize = 8;

/// Back-substitution of every block, from the last to the first, with
/// `$solve_group` solving one group of rows (`solve_group` here, or
/// `backsub_avx512`'s). Expanded inside a function that enables the CPU
/// features the group solver needs, so that it is inlined there.
macro_rules! solve_blocks {
    ($banding:expr, $layout:expr, $solve_group:path) => {{
        use core::arch::x86_64::{_mm_extract_epi64, _mm_setzero_si128};
        use $crate::ribbon::backsub_avx2::GROUP;
        let (banding, layout) = ($banding, $layout);
        let mut solution =
            $crate::ribbon::storage::Solution::zeroed(layout.num_segments() as usize);
        // Column j's 128 solution bits above the current group.
        let mut state = [_mm_setzero_si128(); $crate::ribbon::layout::MAX_COLUMNS as usize];
        for block in (0..layout.num_blocks()).rev() {
            let columns = layout.columns_of_block(block) as usize;
            if columns == 0 {
                continue;
            }
            let rows = banding.block_rows(block);
            let state = &mut state[..columns];
            let coeffs = rows.coeffs.as_chunks::<GROUP>().0;
            let results = rows.results.as_chunks::<GROUP>().0;
            for (coeffs, results) in coeffs.iter().zip(results).rev() {
                $solve_group(coeffs, results, state);
            }
            for (j, &segment) in state.iter().enumerate() {
                let value = (u128::from(_mm_extract_epi64::<1>(segment) as u64) << 64)
                    | u128::from(_mm_extract_epi64::<0>(segment) as u64);
                solution.set(layout.segment(block, j as u32) as usize, value);
            }
        }
        solution
    }};
}
pub(super) use solve_blocks;

/// [`super::solution::back_substitute`] with AVX2. REQUIRES: the CPU has
/// AVX2 (the caller checks), `banding` has `layout.num_slots()` rows.
#[target_feature(enable = "avx2")]
pub(super) fn back_substitute(banding: &Banding, layout: &Layout) -> Solution {
    solve_blocks!(banding, layout, solve_group)
}

/// Solves the eight rows of `coeffs` and `results` (slots `base..base +
/// 8`) into every column of `state`, which holds the solution of the slots
/// `base + 8..` on entry and of `base..` on return. REQUIRES:
/// `1 <= state.len() <= 32`.
#[target_feature(enable = "avx2")]
fn solve_group(coeffs: &[Coeffs; GROUP], results: &[u32; GROUP], state: &mut [__m128i]) {
    let parities = parities_above(coeffs, state);
    finish_group(coeffs, results, state, parities);
}

/// Bit j of word p: the parity of row p's coefficients on the slots above
/// the group (`base + 8..`) anded with column j of `state`, for every
/// column of `state`; the bits past them 0. REQUIRES: `1 <= state.len()
/// <= 32`.
#[target_feature(enable = "avx2")]
#[inline]
fn parities_above(coeffs: &[Coeffs; GROUP], state: &[__m128i]) -> __m256i {
    let columns = state.len();
    debug_assert!((1..=MAX_COLUMNS as usize).contains(&columns));
    // SAFETY: a row's coefficients are two u64s, the 16 bytes read (low
    // word first, as in a `u128`).
    let coefficients = |p: usize| unsafe { _mm_loadu_si128(coeffs[p].as_ptr().cast()) };
    // Rows k and k + 4 (lanes 0 and 1), each shifted right by 8 - p: the
    // coefficients of the slots above the group, bit 0 = slot base + 8.
    let above = |k: usize| {
        let both = _mm256_set_m128i(coefficients(k + 4), coefficients(k));
        let (low, high) = ((8 - k) as i64, (4 - k) as i64);
        let right = _mm256_srlv_epi64(both, _mm256_set_epi64x(high, high, low, low));
        // Each lane's high word moved to its low word, shifted into place.
        let carry = _mm256_sllv_epi64(
            _mm256_srli_si256::<8>(both),
            _mm256_set_epi64x(64 - high, 64 - high, 64 - low, 64 - low),
        );
        _mm256_or_si256(right, carry)
    };
    let (a0, a1, a2, a3) = (above(0), above(1), above(2), above(3));
    // Word p of `covered(s)`: row p's coefficients above the group and
    // the column `s`, anded and folded to 32 bits (their parity is the
    // word's).
    let covered = |s: &__m128i| {
        let s = _mm256_broadcastsi128_si256(*s);
        let (x0, x1) = (_mm256_and_si256(s, a0), _mm256_and_si256(s, a1));
        let (x2, x3) = (_mm256_and_si256(s, a2), _mm256_and_si256(s, a3));
        // Halves folded: 64-bit words of rows 0, 1 | 4, 5 and 2, 3 | 6, 7.
        let u = _mm256_xor_si256(_mm256_unpacklo_epi64(x0, x1), _mm256_unpackhi_epi64(x0, x1));
        let v = _mm256_xor_si256(_mm256_unpacklo_epi64(x2, x3), _mm256_unpackhi_epi64(x2, x3));
        // Folded again: 32-bit words of rows 0..4 | 4..8.
        let (u, v) = (_mm256_castsi256_ps(u), _mm256_castsi256_ps(v));
        _mm256_xor_si256(
            _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(u, v)),
            _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(u, v)),
        )
    };
    // The parity of each 16-bit half into its bit 0.
    let fold16 = |mut w: __m256i| {
        w = _mm256_xor_si256(w, _mm256_srli_epi16::<8>(w));
        w = _mm256_xor_si256(w, _mm256_srli_epi16::<4>(w));
        w = _mm256_xor_si256(w, _mm256_srli_epi16::<2>(w));
        _mm256_xor_si256(w, _mm256_srli_epi16::<1>(w))
    };
    // Bit j of word p: the parity of row p's coefficients above the group
    // with column j, computed from the last column to the first, two
    // columns at a time (their folds share a vector from 16 bits down).
    let (mut rest, odd) = state.split_at(columns & !1);
    let mut parities = _mm256_setzero_si256();
    if let [last] = odd {
        let w = covered(last);
        let w = fold16(_mm256_xor_si256(w, _mm256_srli_epi32::<16>(w)));
        parities = _mm256_and_si256(w, _mm256_set1_epi32(1));
    }
    while let [front @ .., low, high] = rest {
        let (low, high) = (covered(low), covered(high));
        // Column j's fold in the low half of each word, column j + 1's in
        // the high half.
        let both = fold16(_mm256_blend_epi16::<0b1010_1010>(
            _mm256_xor_si256(low, _mm256_srli_epi32::<16>(low)),
            _mm256_xor_si256(high, _mm256_slli_epi32::<16>(high)),
        ));
        // Bit 0 of each half, as bits 0 and 1 (half 0 times 1 plus half 1
        // times 2).
        let two = _mm256_madd_epi16(
            _mm256_and_si256(both, _mm256_set1_epi32(0x0001_0001)),
            _mm256_set1_epi32(0x0002_0001),
        );
        parities = _mm256_or_si256(_mm256_slli_epi32::<2>(parities), two);
        rest = front;
    }
    parities
}

/// The rest of [`solve_group`], given the rows' `parities` above the group
/// ([`parities_above`]): the results added, the slots of the group solved
/// and each column's eight new bits shifted into `state`. REQUIRES:
/// `1 <= state.len() <= 32`.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn finish_group(
    coeffs: &[Coeffs; GROUP],
    results: &[u32; GROUP],
    state: &mut [__m128i],
    parities: __m256i,
) {
    let columns = state.len();
    debug_assert!((1..=MAX_COLUMNS as usize).contains(&columns));
    // The results, the columns only (a row's result has no bits past its
    // block's columns, but the one-row form ignores any there).
    let column_mask = if columns >= 32 {
        u32::MAX
    } else {
        (1u32 << columns) - 1
    };
    let results = _mm256_setr_epi32(
        results[0] as i32,
        results[1] as i32,
        results[2] as i32,
        results[3] as i32,
        results[4] as i32,
        results[5] as i32,
        results[6] as i32,
        results[7] as i32,
    );
    let known = _mm256_xor_si256(
        parities,
        _mm256_and_si256(results, _mm256_set1_epi32(column_mask as i32)),
    );
    // Then the slots of the group above each row. Row q's bits are final
    // once every row above it in the group has added itself to them; then
    // row q adds itself to each row p below it whose coefficient of slot
    // base + q (bit q - p of its low word) is set. Word p of `solved`
    // ends as row p's solution bits, bit j for column j.
    let low_words = _mm256_setr_epi32(
        coeffs[0][LO] as i32,
        coeffs[1][LO] as i32,
        coeffs[2][LO] as i32,
        coeffs[3][LO] as i32,
        coeffs[4][LO] as i32,
        coeffs[5][LO] as i32,
        coeffs[6][LO] as i32,
        coeffs[7][LO] as i32,
    );
    let mut solved = known;
    for q in (1..GROUP as i32).rev() {
        let row_q = _mm256_permutevar8x32_epi32(solved, _mm256_set1_epi32(q));
        // The shift that brings bit q - p of row p's low word to the sign
        // bit, for the rows p below q; 32 (everything out) for the others.
        let to_sign = |p: i32| if p < q { 31 - (q - p) } else { 32 };
        let to_sign = _mm256_setr_epi32(
            to_sign(0),
            to_sign(1),
            to_sign(2),
            to_sign(3),
            to_sign(4),
            to_sign(5),
            to_sign(6),
            to_sign(7),
        );
        // All ones in the rows below q whose coefficient of slot q is set.
        let adds = _mm256_srai_epi32::<31>(_mm256_sllv_epi32(low_words, to_sign));
        solved = _mm256_xor_si256(solved, _mm256_and_si256(row_q, adds));
    }
    // Each column's eight bits (bit p of word p's bit j, gathered by the
    // sign bits) shifted into its state, last column first.
    let mut at_sign = _mm256_sll_epi32(solved, _mm_cvtsi32_si128(32 - columns as i32));
    for s in state.iter_mut().rev() {
        let column = _mm256_movemask_ps(_mm256_castsi256_ps(at_sign));
        *s = _mm_or_si128(_mm_slli_si128::<1>(*s), _mm_cvtsi32_si128(column));
        at_sign = _mm256_slli_epi32::<1>(at_sign);
    }
}
