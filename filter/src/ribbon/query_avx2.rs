//! The query of the usual shape (4 head columns) with AVX2: the same
//! answers as `solution::head_matches` and `tail_matches`, in fewer
//! instructions.
//!
//! Out of cache a lookup waits for its two lines, and the processor
//! overlaps as many independent lookups as its reorder window holds: the
//! fewer instructions one takes, the more. Here the head check is a few
//! vector instructions on the two lines (four columns' 128 bits of each
//! block at once) instead of a dozen loads and popcounts, and the tail is
//! done the same way, four columns at a time, all its groups compared at
//! once and without a branch on the column count.

use core::arch::x86_64::*;

use super::RibbonFilter;
use super::hasher::{COEFF_BITS, coefficients, result_bits};
use super::layout::HEAD_COLUMNS;
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
/// with AVX2 has, for the other shapes). REQUIRES: the CPU has both (the
/// caller checks).
#[target_feature(enable = "avx2,popcnt")]
pub(super) fn contains(filter: &RibbonFilter, hash: KeyHash) -> bool {
    if filter.layout.head_columns() != HEAD_COLUMNS {
        // No keys, or fewer than 4 bits per key.
        return filter.contains_popcnt(hash);
    }
    let key = Probe::new(filter, hash);
    debug_assert!(key.line + usize::from(key.straddles) < filter.solution.num_lines());
    // SAFETY: `line <= next < num_blocks <= num_lines`: the start is below
    // `num_starts = 128 num_blocks - 127`, so its block is below
    // `num_blocks` and, when the span straddles, not the last; with 4 head
    // columns every block has at least 4 columns, so the solution has at
    // least `4 num_blocks` segments, `num_blocks` lines (checked when the
    // filter was assembled).
    let (here, there) = unsafe {
        (
            filter.solution.line_unchecked(key.line),
            filter
                .solution
                .line_unchecked(key.line + usize::from(key.straddles)),
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
    if four_parities(here01, here23, next01, next23, key.left, key.right)
        != u32::from(IN_FOLDED_ORDER[(key.result & 0b1111) as usize])
    {
        return false;
    }
    // SAFETY: the filter has 4 head columns, checked above, and `key` is
    // its probe of `hash`.
    unsafe { tail(filter, &key) }
}

/// What a query needs of its key: its start block (`line`, its head's
/// line) and whether its span straddles into the next, its coefficients on
/// either block's segments in both 128-bit lanes, its result bits.
struct Probe {
    line: usize,
    straddles: bool,
    left: __m256i,
    right: __m256i,
    result: u32,
}

impl Probe {
    #[target_feature(enable = "avx2")]
    #[inline]
    fn new(filter: &RibbonFilter, hash: KeyHash) -> Self {
        let x = filter.hasher.seeded(hash);
        let start = filter.hasher.start(x);
        let offset = (start % COEFF_BITS) as u32;
        // The coefficients on this block's segments (`left = coeff <<
        // offset`) and on the next's (`right = coeff >> (128 - offset)`,
        // none at offset 0): the 256 bits `coeff << offset` are three
        // words `k` at word `offset / 64` (`v >> 1 >> (63 - shift)` is
        // `v >> (64 - shift)`, 0 for shift 0).
        let coeff = coefficients(x);
        let (lo, hi) = (coeff as u64, (coeff >> 64) as u64);
        let shift = offset % 64;
        let k = [
            lo << shift,
            (hi << shift) | (lo >> 1 >> (63 - shift)),
            hi >> 1 >> (63 - shift),
        ];
        let [l0, l1, r0, r1] = if offset < 64 {
            [k[0], k[1], k[2], 0]
        } else {
            [0, k[0], k[1], k[2]]
        };
        let both_lanes =
            |w0: u64, w1: u64| _mm256_set_epi64x(w1 as i64, w0 as i64, w1 as i64, w0 as i64);
        Self {
            line: (start / COEFF_BITS) as usize,
            straddles: offset != 0,
            left: both_lanes(l0, l1),
            right: both_lanes(r0, r1),
            result: result_bits(x),
        }
    }
}

/// Masks of `_mm256_maskload_epi64` for the last group of 1 to 3 tail
/// columns (index: columns in the group): the first two segments' four
/// words, then the next two's.
const LAST_GROUP_MASKS: [[i64; 8]; 4] = {
    let mut masks = [[0i64; 8]; 4];
    let mut columns = 0;
    while columns < 4 {
        let mut word = 0;
        while word < 2 * columns {
            masks[columns][word] = -1;
            word += 1;
        }
        columns += 1;
    }
    masks
};

/// `bits` with bits 1 and 2 of every nibble swapped: from column order to
/// the order of [`four_parities`] for each group of four columns, and
/// back.
#[inline(always)]
const fn in_folded_order(bits: u32) -> u32 {
    (bits & 0x9999_9999) | ((bits >> 1) & 0x2222_2222) | ((bits << 1) & 0x4444_4444)
}

/// The tail check of [`contains`] for a key that passed the head: whether
/// every tail column agrees. Four columns at a time, the same way as the
/// head; the tail columns of a block and of the next are each contiguous.
/// The parities of all groups are gathered and compared once, so the only
/// branches are on the number of groups, whole and partial (the same for
/// blocks of `c` and of `c + 1` columns unless either has a multiple of 4
/// tail columns): a present key, whose head check the processor predicts
/// passed, runs on without a misprediction into the next lookups. (The last 1 to 3 columns were read by a branch on
/// their number, which mispredicts whenever blocks of two column counts
/// mix, as they do at 10 bits per key: 9 and 10 columns.) Inline, with
/// the probe of the head check: a present key's hash is no longer derived
/// twice (the tail was out of line and worked its probe out again, so
/// that the head check kept only the hash; now the path of an absent key
/// saves and restores four more registers).
/// SAFETY: the caller proves that the filter has [`HEAD_COLUMNS`] head
/// columns and that `key` is its probe of some hash.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn tail(filter: &RibbonFilter, key: &Probe) -> bool {
    let (here, columns) = filter.layout.tail_of_block(key.line as u64);
    let (here, columns) = (here as usize, columns as usize);
    let next = if key.straddles { here + columns } else { here };
    // Tail segments `here..here + columns` and `next..next + columns`
    // exist: a block's tail is followed by the next block's, which has at
    // least as many columns, and the last block's ends the solution.
    debug_assert!(next + columns <= filter.solution.len());
    // SAFETY: just said.
    let parities = unsafe { tail_parities(filter.solution.as_ptr(), here, next, columns, key) };
    // In column order (the swap is its own inverse); the columns past the
    // tail's are masked off.
    let mask = ((1u64 << columns) - 1) as u32;
    (in_folded_order(parities) ^ (key.result >> HEAD_COLUMNS)) & mask == 0
}

/// The parities of the `columns` tail columns of `key` (its start block's
/// from segment `here`, the next block's from `next`), four at a time in
/// the folded order of [`four_parities`] from bit 0; a last group of 1 to
/// 3 columns is read with masked loads (the other bits zero), so nothing
/// past a tail is read: whole groups there could touch one more line.
/// SAFETY: the caller proves that `segments` points to a solution, and
/// `here <= next` are segments of it with `next + columns` at most its
/// length.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn tail_parities(
    segments: *const u128,
    here: usize,
    next: usize,
    columns: usize,
    key: &Probe,
) -> u32 {
    let (left, right) = (key.left, key.right);
    // SAFETY: the segments `at..at + 2` are below `next + columns` (`at +
    // 4 <= here + columns` or `next + columns` in the whole groups), inside
    // the solution.
    let pair = |at: usize| unsafe { _mm256_loadu_si256(segments.add(at).cast()) };
    let mut parities = 0u32;
    let mut j = 0;
    while j + 4 <= columns {
        let group = four_parities(
            pair(here + j),
            pair(here + j + 2),
            pair(next + j),
            pair(next + j + 2),
            left,
            right,
        );
        parities |= group << j;
        j += 4;
    }
    let last = columns - j;
    if last > 0 {
        // Only the last columns' words are read (a masked-off word is
        // neither read nor faults), the others are zero.
        let masks = &LAST_GROUP_MASKS[last];
        // SAFETY: `masks` is 8 words: two 32-byte reads stay in it.
        let (mask01, mask23) = unsafe {
            (
                _mm256_loadu_si256(masks.as_ptr().cast()),
                _mm256_loadu_si256(masks.as_ptr().add(4).cast()),
            )
        };
        // Segments 2 and 3 of the group only when it has 3 columns; with
        // fewer, `mask23` is zero and they are read from segment 0 (a
        // pointer that stays in the solution; nothing is read).
        let upper = 2 * usize::from(last == 3);
        // SAFETY: `at` is `here + j + (0 or upper)` or `next + j + (0 or
        // upper)`, below `here + columns` or `next + columns` (`j + upper <
        // j + last = columns`), a segment of the solution; the words read
        // are those of the segments below `here + columns` or `next +
        // columns` that the mask selects, inside the solution.
        let masked = |at: usize, mask: __m256i| unsafe {
            _mm256_maskload_epi64(segments.add(at).cast::<i64>(), mask)
        };
        let group = four_parities(
            masked(here + j, mask01),
            masked(here + j + upper, mask23),
            masked(next + j, mask01),
            masked(next + j + upper, mask23),
            left,
            right,
        );
        parities |= group << j;
    }
    parities
}

/// The parities of four columns whose segments in a key's start block are
/// `here01` (columns 0 and 1) and `here23`, and in the next block `next01`
/// and `next23`, with the key's coefficients on either block `left` and
/// `right`: bits 0 to 3 for columns 0, 2, 1, 3.
#[target_feature(enable = "avx2")]
#[inline]
fn four_parities(
    here01: __m256i,
    here23: __m256i,
    next01: __m256i,
    next23: __m256i,
    left: __m256i,
    right: __m256i,
) -> u32 {
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
    _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_slli_epi64::<63>(sums))) as u32
}
