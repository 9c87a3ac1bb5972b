//! Back-substitution four columns at a time in 512-bit vectors (AVX-512),
//! chosen at run time when the CPU has it; `solution` holds the portable
//! form it must equal (tested on every column count).
//!
//! A vector holds the state of four columns, each a 128-bit lane of two
//! 64-bit halves (low half first). Per row, for every vector: the state
//! and the row's later coefficients (`coeff >> 1`, the same for every
//! column), the popcount of each half, the two halves' counts and the
//! column's result bit xored (bit 0 is the new solution bit), then the lane
//! shifted left by one with that bit coming in at the bottom (one
//! double-shift: the low half takes the bit from below, the high half the
//! low half's top bit). Eight vector instructions for four columns, where
//! the portable form spends about ten scalar ones per column.

use std::arch::x86_64::{
    __m512i, _MM_PERM_BADC, _mm512_and_si512, _mm512_loadu_si512, _mm512_mask_shuffle_epi32,
    _mm512_popcnt_epi64, _mm512_set_epi64, _mm512_set1_epi64, _mm512_set4_epi64,
    _mm512_shldi_epi64, _mm512_shuffle_epi32, _mm512_slli_epi64, _mm512_srlv_epi64,
    _mm512_ternarylogic_epi64, _mm512_test_epi64_mask, _mm512_xor_si512, _pext_u32,
};

use super::banding::{Banding, HI, LO, RESULT, Row};
use super::hasher::COEFF_BITS;
use super::layout::{Layout, MAX_COLUMNS};
use super::solution::back_substitute_with;
use super::storage::Solution;

/// Columns per vector.
const LANES: usize = 4;
/// Vectors for the most columns.
const MAX_VECTORS: usize = MAX_COLUMNS as usize / LANES;

/// Whether this CPU runs [`back_substitute_wide`].
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
}

/// Whether this CPU runs [`head_parities`].
#[inline(always)]
pub(crate) fn query_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi2")
}

/// [`super::solution::head_parities`] in one vector: the two lines' four
/// columns masked by `left` and `right` and xored, each lane's halves
/// folded, counted, and bit 0 of each count gathered into a mask.
#[inline]
#[target_feature(enable = "avx512f,avx512vpopcntdq,bmi2")]
pub(crate) fn head_parities(here: &[u128; 4], next: &[u128; 4], left: u128, right: u128) -> u32 {
    // SAFETY: each is a reference to 64 readable bytes; unaligned loads.
    let (h, n) = unsafe {
        (
            _mm512_loadu_si512(here.as_ptr().cast()),
            _mm512_loadu_si512(next.as_ptr().cast()),
        )
    };
    let l = _mm512_set4_epi64(
        (left >> 64) as i64,
        left as i64,
        (left >> 64) as i64,
        left as i64,
    );
    let r = _mm512_set4_epi64(
        (right >> 64) as i64,
        right as i64,
        (right >> 64) as i64,
        right as i64,
    );
    // (n & r) ^ (h & l): the ternary function a ^ (b & c) of (n & r, h, l).
    let masked = _mm512_ternarylogic_epi64::<0x78>(_mm512_and_si512(n, r), h, l);
    let folded = _mm512_xor_si512(masked, _mm512_shuffle_epi32::<_MM_PERM_BADC>(masked));
    let odd = _mm512_test_epi64_mask(_mm512_popcnt_epi64(folded), _mm512_set1_epi64(1));
    // Bits 0, 2, 4, 6 (the low halves of lanes 0..4) to bits 0..4.
    _pext_u32(u32::from(odd), 0x55)
}

/// [`super::solution::back_substitute`] with vectors.
/// REQUIRES (of the caller, for `unsafe`): [`available`] is true.
#[target_feature(enable = "avx512f,avx512vpopcntdq,avx512vbmi2")]
pub(crate) fn back_substitute_wide(banding: &Banding, layout: &Layout) -> Solution {
    // The closure inherits this function's target features, so it may
    // call `solve_block` safely.
    back_substitute_with(banding, layout, |columns, rows, state| {
        solve_block(columns, rows, state);
    })
}

#[target_feature(enable = "avx512f,avx512vpopcntdq,avx512vbmi2")]
fn solve_block(
    columns: u32,
    rows: &[Row; COEFF_BITS as usize],
    state: &mut [u128; MAX_COLUMNS as usize],
) {
    macro_rules! by_vectors {
        ($($v:literal)*) => {
            match (columns as usize).div_ceil(LANES) {
                $($v => solve_block_with::<$v>(rows, state),)*
                _ => {}
            }
        };
    }
    by_vectors!(1 2 3 4 5 6 7 8);
}

/// One block's rows, last to first, for `V` vectors (`4 V` columns; the
/// state of columns past those the block has is computed and ignored).
#[target_feature(enable = "avx512f,avx512vpopcntdq,avx512vbmi2")]
fn solve_block_with<const V: usize>(
    rows: &[Row; COEFF_BITS as usize],
    state: &mut [u128; MAX_COLUMNS as usize],
) {
    const { assert!(V <= MAX_VECTORS) };
    let mut s = [_mm512_set1_epi64(0); V];
    let mut shifts = [_mm512_set1_epi64(0); V];
    for (k, (v, shift)) in s.iter_mut().zip(shifts.iter_mut()).enumerate() {
        let c = &state[k * LANES..k * LANES + LANES];
        let half = |j: usize, high: bool| (c[j] >> (if high { 64 } else { 0 })) as u64 as i64;
        *v = _mm512_set_epi64(
            half(3, true),
            half(3, false),
            half(2, true),
            half(2, false),
            half(1, true),
            half(1, false),
            half(0, true),
            half(0, false),
        );
        // Result bit of column 4k + l for the low half of lane l.
        let l = (k * LANES) as i64;
        *shift = _mm512_set_epi64(0, l + 3, 0, l + 2, 0, l + 1, 0, l);
    }
    // Dword mask of the high halves, for the shuffle that feeds the shift.
    const HIGH_HALVES: u16 = 0xcccc;
    for row in rows.iter().rev() {
        let (lo, hi) = (row[LO], row[HI]);
        let later = _mm512_set4_epi64(
            (hi >> 1) as i64,
            ((lo >> 1) | (hi << 63)) as i64,
            (hi >> 1) as i64,
            ((lo >> 1) | (hi << 63)) as i64,
        );
        let result = _mm512_set1_epi64(row[RESULT] as i64);
        for (v, &shift) in s.iter_mut().zip(shifts.iter()) {
            let counts = _mm512_popcnt_epi64(_mm512_and_si512(*v, later));
            let swapped = _mm512_shuffle_epi32::<_MM_PERM_BADC>(counts);
            // Bit 0: parity of the lane's count, xor its result bit.
            let bit = _mm512_ternarylogic_epi64::<0x96>(
                counts,
                swapped,
                _mm512_srlv_epi64(result, shift),
            );
            // Low halves take the new bit from below, high halves the low
            // half's top bit.
            let below = _mm512_mask_shuffle_epi32::<_MM_PERM_BADC>(
                _mm512_slli_epi64::<63>(bit),
                HIGH_HALVES,
                *v,
            );
            *v = _mm512_shldi_epi64::<1>(*v, below);
        }
    }
    for (k, v) in s.iter().enumerate() {
        // SAFETY: a vector is 64 bytes of integers, like [u64; 8], and
        // every bit pattern of either is valid.
        let halves: [u64; 8] = unsafe { std::mem::transmute::<__m512i, [u64; 8]>(*v) };
        for l in 0..LANES {
            state[k * LANES + l] =
                (u128::from(halves[2 * l + 1]) << 64) | u128::from(halves[2 * l]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_agree_with_the_portable_forms() {
        if !query_available() {
            println!("note: no AVX-512 on this CPU; the AVX-512 head check is not compared");
            return;
        }
        let mut x = 0x0123_4567_89ab_cdefu64;
        let mut next = || {
            x = x
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(0x632b_e59b_d9b4_e019);
            (u128::from(x) << 64) | u128::from(x.rotate_left(29) ^ 0x5555)
        };
        for _ in 0..10_000 {
            let here = [next(), next(), next(), next()];
            let there = [next(), next(), next(), next()];
            let (left, right) = (next(), next());
            let portable = super::super::solution::head_parities(&here, &there, left, right);
            // SAFETY: `query_available` checked the features.
            let wide = unsafe { head_parities(&here, &there, left, right) };
            assert_eq!(wide, portable);
        }
    }
}
