//! Back-substitution from the band into the solution, and the query that
//! checks a key's equation against it.

use super::banding::{Banding, BlockRows, HI, LO};
use super::hasher::COEFF_BITS;
use super::layout::{HEAD_COLUMNS, Layout, MAX_COLUMNS};
use super::storage::Solution;

/// The parity of `v`'s set bits. On x86-64 the `popcnt` instruction is not
/// part of the baseline target, so back-substitution is compiled more than
/// once and a copy the CPU can run is chosen at run time; so is the query
/// (`RibbonFilter::contains_hash`), as a whole, so that the parities it
/// computes are inlined into the copy and no call is made per parity.
#[inline(always)]
fn parity(v: u128) -> u32 {
    ((v as u64) ^ ((v >> 64) as u64)).count_ones() & 1
}

/// Solves the band from the last slot to the first into a solution laid
/// out by `layout`. Free rows get solution bit 0.
///
/// Column by column, `state[j]` holds the solution bits of the 128 slots
/// after the current one (bit 0 = the next slot). Row `i`'s equation reads
/// `bit(i) + sum over t >= 1 of coeff_t * bit(i + t) = result_j`, so bit(i)
/// is the parity of `state & (coeff >> 1)` plus `result_j`, and the state
/// moves on as `state << 1 | bit(i)`. After the 128 slots of a block,
/// `state[j]` is exactly that block's segment of column j.
///
/// On x86-64 with AVX2 the same solution is computed eight rows at a time
/// (`backsub_avx2`; with AVX-512 and `vpopcntq`, `backsub_avx512`, whose
/// parities above a group take a quarter of the instructions); else with
/// popcnt when the CPU has it, else portably.
/// REQUIRES: `banding` has `layout.num_slots()` rows.
pub(crate) fn back_substitute(banding: &Banding, layout: &Layout) -> Solution {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has every feature `backsub_avx512` requires,
        // checked just above.
        return unsafe { super::backsub_avx512::back_substitute(banding, layout) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above; that is the only
        // requirement of `backsub_avx2::back_substitute`.
        return unsafe { super::backsub_avx2::back_substitute(banding, layout) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has popcnt, checked just above; that is the
        // only requirement of a `target_feature(enable = "popcnt")`
        // function.
        return unsafe { back_substitute_popcnt(banding, layout) };
    }
    back_substitute_portable(banding, layout)
}

/// Whether the CPU runs `backsub_avx512`: AVX2, AVX-512 F and VL, and
/// `vpopcntq`.
#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn back_substitute_popcnt(banding: &Banding, layout: &Layout) -> Solution {
    // A closure written here inherits popcnt (one written in a function
    // inlined here would not): `solve_block` is inlined into it.
    back_substitute_with(banding, layout, |columns, rows, state| {
        solve_block(columns, rows, state);
    })
}

/// Back-substitution one block at a time with `solve` doing a block's rows
/// (into the first `columns` entries of the state; columns past those are
/// left as they are), storing each block's segments where `layout` says.
#[inline(always)]
fn back_substitute_with(
    banding: &Banding,
    layout: &Layout,
    mut solve: impl FnMut(u32, BlockRows<'_>, &mut [u128; MAX_COLUMNS as usize]),
) -> Solution {
    let mut solution = Solution::zeroed(layout.num_segments() as usize);
    let mut state = [0u128; MAX_COLUMNS as usize];
    for block in (0..layout.num_blocks()).rev() {
        let columns = layout.columns_of_block(block);
        solve(columns, banding.block_rows(block), &mut state);
        for (j, &segment) in state.iter().enumerate().take(columns as usize) {
            solution.set(layout.segment(block, j as u32) as usize, segment);
        }
    }
    solution
}

fn back_substitute_portable(banding: &Banding, layout: &Layout) -> Solution {
    back_substitute_with(banding, layout, |columns, rows, state| {
        solve_block(columns, rows, state);
    })
}

/// Solves one block's 128 rows, last to first, into the first `columns`
/// entries of `state`, with the column count a constant of the code (so
/// the columns are unrolled and their state kept in registers where it
/// fits). Columns past `columns` are left as they are.
#[inline(always)]
fn solve_block(columns: u32, rows: BlockRows<'_>, state: &mut [u128; MAX_COLUMNS as usize]) {
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
fn solve_block_with<const C: usize>(rows: BlockRows<'_>, state: &mut [u128; MAX_COLUMNS as usize]) {
    let mut s = [0u128; C];
    s.copy_from_slice(&state[..C]);
    for (row, &result) in rows.coeffs.iter().zip(rows.results).rev() {
        // Bit t of `later` is the coefficient of slot i + 1 + t, the slot
        // that bit t of the state holds.
        let later = ((u128::from(row[HI]) << 64) | u128::from(row[LO])) >> 1;
        for (j, column) in s.iter_mut().enumerate() {
            let bit = (parity(*column & later) ^ (result >> j)) & 1;
            *column = (*column << 1) | u128::from(bit);
        }
    }
    state[..C].copy_from_slice(&s);
}

/// The parities of the four head columns of one key, bit j for column j
/// (the lines `here` and `next` are the heads of its start block and the
/// next, `left` and `right` its coefficients shifted onto each), one
/// column at a time, each bit shifted into place. Not gathered with
/// `pext`: AMD processors before Zen 3 run it in microcode, slowly, and no
/// query copy enables bmi2.
#[inline(always)]
fn head_parities(here: &[u128; 4], next: &[u128; 4], left: u128, right: u128) -> u32 {
    let mut bits = 0;
    for j in 0..4 {
        bits |= parity((here[j] & left) ^ (next[j] & right)) << j;
    }
    bits
}

/// Whether the key of `span` matches the solution, for as many result bits
/// as its start block has columns.
///
/// The head columns of the start block and the next lie side by side (two
/// adjacent cache lines for 4 head columns), and an absent key fails one
/// of them with probability `1 - 2^-h`: they are checked together, without
/// a branch between them (a branch per column mispredicts half the time
/// and waits for the memory it depends on). The tail is read only by keys
/// that pass the head. It is not prefetched before the head check: out of
/// cache that made absent lookups slower (measured 1.7x: the extra lines
/// and instructions crowd out the overlap of independent lookups, for
/// lines that 15 absent keys in 16 never read). Out of cache, the fewer
/// instructions a lookup takes the more lookups the processor overlaps,
/// so the usual shape has its own short path.
/// REQUIRES: the span's start is below `layout.num_starts()` and
/// `solution` is laid out by `layout` (checked when a filter is built or
/// decoded). (The query runs the two parts itself; tests run this.)
#[cfg(test)]
pub(crate) fn matches(solution: &Solution, layout: &Layout, span: &Span) -> bool {
    head_matches(solution, layout, span) && tail_matches(solution, layout, span)
}

/// The first part of [`matches`]: whether the head columns agree.
#[inline(always)]
pub(crate) fn head_matches(solution: &Solution, layout: &Layout, span: &Span) -> bool {
    let head = layout.head_columns();
    let head_bits = if head == HEAD_COLUMNS {
        // Each block's head is one whole line; the span's block is below
        // `num_blocks`, and the next one too when it straddles (a start in
        // the last block is its first slot).
        let line = span.block as usize;
        let next = line + usize::from(span.straddles);
        debug_assert!(next < solution.num_lines());
        // SAFETY: `line <= next < num_blocks <= num_lines`: the start is
        // below `num_starts = 128 num_blocks - 127` (REQUIRES), so its
        // block is below `num_blocks` and, if it straddles, not the last;
        // with 4 head columns every block has at least 4 columns, so the
        // solution has at least `4 num_blocks` segments, `num_blocks`
        // lines.
        let (here, next) =
            unsafe { (solution.line_unchecked(line), solution.line_unchecked(next)) };
        head_parities(here, next, span.left, span.right)
    } else {
        let here = layout.head_of_block(span.block) as usize;
        let head = head as usize;
        let next = if span.straddles { here + head } else { here };
        (0..head).fold(0, |bits, j| {
            bits | span.column(solution, here + j, next + j) << j
        })
    };
    let head_mask = (1u32 << head) - 1;
    (head_bits ^ span.result) & head_mask == 0
}

/// What a query needs of its key: its start block, its coefficients
/// shifted onto the start block's segments (`left`) and onto the next
/// block's (`right`, none when the span is exactly the start block), and
/// its result bits.
#[derive(Clone, Copy)]
pub(crate) struct Span {
    block: u64,
    straddles: bool,
    left: u128,
    right: u128,
    result: u32,
}

impl Span {
    /// The span of the equation (`start`, `coeff`, `result`).
    #[inline(always)]
    pub(crate) fn new(start: u64, coeff: u128, result: u32) -> Self {
        let offset = (start % COEFF_BITS) as u32;
        // The span straddles this block and the next, whose segments follow
        // this block's in the head and in the tail, unless it is exactly
        // this block (always so in the last block, which has no next).
        let straddles = offset != 0;
        Self {
            block: start / COEFF_BITS,
            straddles,
            left: coeff << offset,
            right: if straddles {
                coeff >> (COEFF_BITS as u32 - offset)
            } else {
                0
            },
            result,
        }
    }

    /// The parity of one column: segment `a` of the start block, `b` of
    /// the next.
    #[inline(always)]
    fn column(&self, solution: &Solution, a: usize, b: usize) -> u32 {
        parity((solution.get(a) & self.left) ^ (solution.get(b) & self.right))
    }
}

/// The rest of [`matches`]: whether the tail columns agree too. The query
/// compiles it out of line, so that the path of most absent keys holds few
/// registers.
#[inline(always)]
pub(crate) fn tail_matches(solution: &Solution, layout: &Layout, span: &Span) -> bool {
    let head = layout.head_columns() as usize;
    let (tail, tail_columns) = layout.tail_of_block(span.block);
    let (tail, tail_columns) = (tail as usize, tail_columns as usize);
    let tail_next = if span.straddles {
        tail + tail_columns
    } else {
        tail
    };
    (0..tail_columns)
        .all(|j| span.column(solution, tail + j, tail_next + j) == (span.result >> (head + j)) & 1)
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
        // Every path this CPU runs, the portable one first.
        let mut solutions = vec![
            back_substitute_portable(&band, &layout),
            back_substitute(&band, &layout),
        ];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has popcnt, checked just above.
            solutions.push(unsafe { back_substitute_popcnt(&band, &layout) });
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            solutions.push(unsafe { super::super::backsub_avx2::back_substitute(&band, &layout) });
        } else {
            println!("no AVX2 on this CPU: its back-substitution not compared");
        }
        #[cfg(target_arch = "x86_64")]
        if has_avx512() {
            // SAFETY: the CPU has what `backsub_avx512` requires, checked
            // just above.
            solutions
                .push(unsafe { super::super::backsub_avx512::back_substitute(&band, &layout) });
        } else {
            println!("no AVX-512 on this CPU: its back-substitution not compared");
        }
        for solution in &solutions {
            assert_eq!(solution.len() as u64, layout.num_segments());
            for &eq in &eqs {
                let span = Span::new(eq.start, eq.coeff, eq.result);
                assert!(matches(solution, &layout, &span), "{layout:?} {eq:?}");
            }
        }
        for solution in &solutions[1..] {
            assert_eq!(solution, &solutions[0], "{layout:?}");
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

    /// Every back-substitution path gives the portable solution on every
    /// shape over 2, 3, 5 and 6 blocks (every segment count: lower blocks
    /// of no columns, mixes, 32 columns), with random equations at every
    /// start including the last, and every banded equation holds.
    #[test]
    fn paths_agree_on_every_shape() {
        let mut x = 0x0dd_ba11u64;
        for blocks in [2u64, 3, 5, 6] {
            for segments in 1..=u64::from(MAX_COLUMNS) * blocks {
                let layout = Layout::new(blocks, segments);
                let mut band = Banding::new(layout.num_slots());
                let mut eqs = Vec::new();
                for k in 0..layout.num_slots() {
                    x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(7);
                    let start = if k % 7 == 0 {
                        layout.num_starts() - 1
                    } else {
                        (x >> 20) % layout.num_starts()
                    };
                    let coeff = (u128::from(x.rotate_left(29)) << 64 | u128::from(x)) | 1;
                    let eq = Equation {
                        start,
                        coeff,
                        result: (x >> 7) as u32,
                    };
                    if band.add(eq) {
                        eqs.push(eq);
                    }
                }
                let portable = back_substitute_portable(&band, &layout);
                for &eq in &eqs {
                    let span = Span::new(eq.start, eq.coeff, eq.result);
                    assert!(matches(&portable, &layout, &span), "{layout:?} {eq:?}");
                }
                assert_eq!(back_substitute(&band, &layout), portable, "{layout:?}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("popcnt") {
                    // SAFETY: the CPU has popcnt, checked just above.
                    let popcnt = unsafe { back_substitute_popcnt(&band, &layout) };
                    assert_eq!(popcnt, portable, "{layout:?}");
                }
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2, checked just above.
                    let avx2 =
                        unsafe { super::super::backsub_avx2::back_substitute(&band, &layout) };
                    assert_eq!(avx2, portable, "{layout:?}");
                }
                #[cfg(target_arch = "x86_64")]
                if has_avx512() {
                    // SAFETY: the CPU has what `backsub_avx512` requires,
                    // checked just above.
                    let avx512 =
                        unsafe { super::super::backsub_avx512::back_substitute(&band, &layout) };
                    assert_eq!(avx512, portable, "{layout:?}");
                }
            }
        }
    }

    /// Bands of hashed keys, nearly full as a filter's are, of every
    /// column count and both shapes: each path the CPU runs gives the
    /// portable path's solution.
    #[test]
    fn paths_agree_on_full_bands() {
        use super::super::sizing::{blocks_for, layout_for};
        use super::super::{RibbonTarget, solve};
        use crate::hash::KeyHash;
        let n = 5000u64;
        let keys: Vec<KeyHash> = (0..n).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
        let mut order = Vec::new();
        for c in 1..=MAX_COLUMNS {
            for bpk in [f64::from(c) - 0.5, f64::from(c)] {
                let layout = layout_for(RibbonTarget::BitsPerKey(bpk), n, blocks_for(n));
                let mut band = Banding::new(layout.num_slots());
                let solved = (0..8).any(|seed| {
                    band.clear();
                    solve(&mut band, &keys, &layout, seed, &mut order)
                });
                assert!(solved, "{bpk}");
                let portable = back_substitute_portable(&band, &layout);
                assert_eq!(back_substitute(&band, &layout), portable, "{bpk}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2, checked just above.
                    let avx2 =
                        unsafe { super::super::backsub_avx2::back_substitute(&band, &layout) };
                    assert_eq!(avx2, portable, "{bpk}");
                }
                #[cfg(target_arch = "x86_64")]
                if has_avx512() {
                    // SAFETY: the CPU has what `backsub_avx512` requires,
                    // checked just above.
                    let avx512 =
                        unsafe { super::super::backsub_avx512::back_substitute(&band, &layout) };
                    assert_eq!(avx512, portable, "{bpk}");
                }
            }
        }
    }
}
