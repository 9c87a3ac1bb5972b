//! Back-substitution eight rows at a time with AVX-512: `backsub_avx2`'s
//! groups, bit for bit the same solution, with the parities of the rows'
//! coefficients above the group taken by `vpopcntq` on eight rows at once.
//!
//! In `backsub_avx2` each column's eight parities cost about 20
//! instructions (the rows in four vectors of two, anded, folded to 32 and
//! then 16 bits, shifted down to one). Here the eight rows' low words are
//! one vector and their high words another (each row shifted onto the
//! slots above the group once per group); a column is then one `and`, one
//! ternary logic op (`^ high & column`), one population count and one
//! shift-and-insert of each count's bit 0: five instructions for the
//! column's eight parities. The rest of the group (results, the slots of
//! the group, the state) is `backsub_avx2::finish_group`.

use core::arch::x86_64::*;

use super::backsub_avx2::{GROUP, finish_group, solve_blocks};
use super::banding::{Banding, Coeffs};
use super::layout::{Layout, MAX_COLUMNS};
use super::storage::Solution;

/// [`super::solution::back_substitute`] with AVX-512. REQUIRES: the CPU has
/// AVX2, AVX-512 F and VL and `vpopcntq` (AVX-512 VPOPCNTDQ) (the caller
/// checks); `banding` has `layout.num_slots()` rows.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vpopcntdq")]
pub(super) fn back_substitute(banding: &Banding, layout: &Layout) -> Solution {
    solve_blocks!(banding, layout, solve_group)
}

/// `backsub_avx2::solve_group` with the parities above the group taken
/// eight rows at a time. REQUIRES: `1 <= state.len() <= 32`.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vpopcntdq")]
fn solve_group(coeffs: &[Coeffs; GROUP], results: &[u32; GROUP], state: &mut [__m128i]) {
    let parities = parities_above(coeffs, state);
    finish_group(coeffs, results, state, parities);
}

/// Bit j of word p: the parity of row p's coefficients on the slots above
/// the group (`base + 8..`, so row p's shifted right by `8 - p`) anded
/// with column j of `state`; the bits past the columns 0. REQUIRES:
/// `1 <= state.len() <= 32`.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vpopcntdq")]
#[inline]
fn parities_above(coeffs: &[Coeffs; GROUP], state: &[__m128i]) -> __m256i {
    debug_assert!((1..=MAX_COLUMNS as usize).contains(&state.len()));
    // SAFETY: `coeffs` is 8 rows of two u64s, 128 bytes: the two loads
    // read its first and second 64 bytes (unaligned loads).
    let (first, second) = unsafe {
        let p = coeffs.as_ptr().cast::<__m512i>();
        (_mm512_loadu_si512(p), _mm512_loadu_si512(p.add(1)))
    };
    // Word p: row p's low word, and its high word.
    let low =
        _mm512_permutex2var_epi64(first, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), second);
    let high =
        _mm512_permutex2var_epi64(first, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), second);
    // Row p shifted right by 8 - p (1 to 8; the high word's bits shifted
    // into the low word by 64 minus that, 56 to 63).
    let right = _mm512_setr_epi64(8, 7, 6, 5, 4, 3, 2, 1);
    let carry = _mm512_setr_epi64(56, 57, 58, 59, 60, 61, 62, 63);
    let low = _mm512_or_si512(
        _mm512_srlv_epi64(low, right),
        _mm512_sllv_epi64(high, carry),
    );
    let high = _mm512_srlv_epi64(high, right);
    // Column j's parity, in bit 0 of each word.
    let parity = |s: &__m128i| {
        let (s_low, s_high) = (_mm_cvtsi128_si64(*s), _mm_extract_epi64::<1>(*s));
        // low & s_low ^ high & s_high: 0x78 is a ^ (b & c).
        let anded = _mm512_and_si512(low, _mm512_set1_epi64(s_low));
        _mm512_popcnt_epi64(_mm512_ternarylogic_epi64::<0x78>(
            anded,
            high,
            _mm512_set1_epi64(s_high),
        ))
    };
    // `acc << 2 | count & 1`: 0xF8 is a | (b & c).
    let one = _mm512_set1_epi64(1);
    let insert = |acc: __m512i, count: __m512i| {
        _mm512_ternarylogic_epi64::<0xF8>(_mm512_slli_epi64::<2>(acc), count, one)
    };
    // From the last column to the first, the even columns into `even`
    // and the odd ones into `odd` (two chains of dependent steps rather
    // than one), each shifted in by two: column 2i ends at bit 2i of
    // `even`, column 2i + 1 at bit 2i of `odd`.
    let (mut even, mut odd) = (_mm512_setzero_si512(), _mm512_setzero_si512());
    let (mut rest, last) = state.split_at(state.len() & !1);
    if let [last] = last {
        even = _mm512_and_si512(parity(last), one);
    }
    while let [front @ .., low, high] = rest {
        (even, odd) = (insert(even, parity(low)), insert(odd, parity(high)));
        rest = front;
    }
    let bits = _mm512_or_si512(even, _mm512_slli_epi64::<1>(odd));
    // At most 32 columns: each word's bits fit in 32.
    _mm512_cvtepi64_epi32(bits)
}
