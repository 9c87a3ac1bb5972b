//! On-the-fly Gaussian elimination of Ribbon equations into an upper
//! triangular band matrix ("banding").
//!
//! Row `i` of the band holds at most one equation, whose first coefficient
//! is slot `i` (so its 128 coefficient bits start at bit 0 = slot `i`). An
//! equation is added like a key into a linear-probing table: if the row of
//! its first slot is free it goes there; otherwise it is xored with that
//! row, which clears its first coefficient, and continues at its next set
//! coefficient. It ends stored, or reduced to `0 = 0` (redundant, for
//! example a duplicate key), or to `0 = r` with `r != 0`: no solution with
//! this seed. Rows never change once stored, so the band is always ready
//! for back-substitution.

use super::hasher::{COEFF_BITS, Equation};

/// A row's 128 coefficient bits: `[LO]` = slots `i..i + 64`, `[HI]` the
/// next 64. Zero when the row is free. Each row's result bits are kept
/// apart (`u32`, all a key has): 20 bytes a slot rather than 24.
pub(crate) type Coeffs = [u64; 2];
pub(crate) const LO: usize = 0;
pub(crate) const HI: usize = 1;

/// The band: one row per slot. Invariant: `coeffs` and `results` have the
/// same length, the band's slots.
#[derive(Clone, Debug)]
pub(crate) struct Banding {
    coeffs: Vec<Coeffs>,
    results: Vec<u32>,
    /// Starts an equation may have: `slots - 127` (0 when fewer than 128
    /// slots), so that its 128 coefficients are all rows of the band.
    num_starts: u64,
}

/// The 128 rows of one block: coefficients and results, row by row.
#[derive(Clone, Copy)]
pub(crate) struct BlockRows<'a> {
    pub(crate) coeffs: &'a [Coeffs; COEFF_BITS as usize],
    pub(crate) results: &'a [u32; COEFF_BITS as usize],
}

impl Banding {
    /// A band of `num_slots` free rows. REQUIRES: `num_slots` is at least
    /// [`COEFF_BITS`] and fits in memory.
    pub(crate) fn new(num_slots: u64) -> Self {
        debug_assert!(num_slots >= COEFF_BITS);
        // The coefficients' zeros written, not a zeroed allocation:
        // banding reads a row's coefficients before it writes them, and a
        // page of a lazily zeroed allocation that is first read maps the
        // shared zero page, then faults again on its first write (copy on
        // write). Written up front, each page faults once. A result is only
        // read once written.
        let slots = num_slots as usize;
        let mut coeffs = Vec::with_capacity(slots);
        coeffs.resize(slots, [0; 2]);
        let results = vec![0; slots];
        Self {
            num_starts: (slots as u64).saturating_sub(COEFF_BITS - 1),
            coeffs,
            results,
        }
    }

    /// Frees every row (to try another seed on the same slots).
    pub(crate) fn clear(&mut self) {
        self.coeffs.fill([0; 2]);
        self.results.fill(0);
    }

    /// Adds one equation. `false` when it contradicts those added before;
    /// a failed add stores nothing.
    /// REQUIRES: `eq.coeff & 1 == 1`. Panics unless
    /// `eq.start + 128 <= num_slots`.
    #[cfg(test)]
    pub(crate) fn add(&mut self, eq: Equation) -> bool {
        let cursor = Cursor::checked(eq, self.num_starts);
        self.rows().finish::<false>(cursor)
    }

    #[inline(always)]
    fn rows(&mut self) -> Rows<'_> {
        Rows {
            words: self.coeffs.as_flattened_mut(),
            results: &mut self.results,
        }
    }

    /// Bytes of the band per slot: a row's coefficients and its result.
    pub(crate) const BYTES_PER_SLOT: u64 = (size_of::<Coeffs>() + size_of::<u32>()) as u64;

    /// Adds equations `equation(0..n)`; `false` as soon as one contradicts
    /// the others. REQUIRES: as for [`Banding::add`], for each.
    /// `PREFETCH`: the equations come in order of their start blocks, so
    /// each new one asks for the rows [`PREFETCH_SLOTS`] past its start
    /// (useless in any other order). `SPLIT_SHIFT`: see [`shift_right`].
    ///
    /// [`CHAINS`] ranges of the sequence are eliminated in turn, one step
    /// each, so the processor overlaps their chains of dependent loads
    /// (one step's row address follows from the last step's row); when a
    /// range runs out it takes the upper half of the longest rest of
    /// another (see [`Chains`]). The band is the same as the one-at-a-time
    /// order of the equations' completions would give: a stored row never
    /// changes, so every row a step reads as occupied is the same when the
    /// equation is finally stored, and the step that stores checks and
    /// fills its row at once.
    #[inline(always)]
    pub(crate) fn add_all<const PREFETCH: bool, const SPLIT_SHIFT: bool>(
        &mut self,
        n: usize,
        equation: impl Fn(usize) -> Equation,
    ) -> bool {
        let num_starts = self.num_starts;
        let cursor = |k: usize| Cursor::checked(equation(k), num_starts);
        let mut rows = self.rows();
        if n < 2 * CHAINS {
            return (0..n).all(|k| rows.finish::<SPLIT_SHIFT>(cursor(k)));
        }
        let mut chains = Chains::new(n);
        let mut cursors: [Cursor; CHAINS] = std::array::from_fn(|j| cursor(chains.next[j]));
        // One step of chain `$j` (a literal, so that the chains' cursors
        // stay in registers rather than in an array in memory).
        macro_rules! step {
            ($j:literal) => {
                match rows.step::<SPLIT_SHIFT>(&mut cursors[$j]) {
                    Step::Moved => {}
                    Step::Failed => return false,
                    Step::Done => match chains.advance($j) {
                        Some(k) => {
                            cursors[$j] = cursor(k);
                            if PREFETCH {
                                rows.prefetch(cursors[$j].word + 2 * PREFETCH_SLOTS);
                            }
                        }
                        None => {
                            // Every other chain is on its last equation.
                            return (0..CHAINS)
                                .filter(|&i| i != $j)
                                .all(|i| rows.finish::<SPLIT_SHIFT>(cursors[i]));
                        }
                    },
                }
            };
        }
        const _: () = assert!(CHAINS == 3, "one step! per chain below");
        loop {
            step!(0);
            step!(1);
            step!(2);
        }
    }

    /// Row `i`: coefficients and result. REQUIRES: `i < num_slots`.
    #[cfg(test)]
    pub(crate) fn row(&self, i: usize) -> (u128, u32) {
        let c = self.coeffs[i];
        (
            (u128::from(c[HI]) << 64) | u128::from(c[LO]),
            self.results[i],
        )
    }

    /// The 128 rows of block `block`. REQUIRES: `block < num_slots / 128`.
    #[inline]
    pub(crate) fn block_rows(&self, block: u64) -> BlockRows<'_> {
        const W: usize = COEFF_BITS as usize;
        BlockRows {
            coeffs: &self.coeffs.as_chunks::<W>().0[block as usize],
            results: &self.results.as_chunks::<W>().0[block as usize],
        }
    }

    /// Rows in use.
    #[cfg(test)]
    pub(crate) fn occupied(&self) -> usize {
        self.coeffs
            .iter()
            .filter(|r| r[LO] != 0 || r[HI] != 0)
            .count()
    }
}

/// How far ahead of a new equation's start [`Banding::add_all`] asks for
/// the band's rows: the equations are banded in order of start block, so
/// a chain reaches the rows `PREFETCH_SLOTS` slots on about as many
/// equations later. Every equation asks for one line of coefficients
/// (4 rows) and one of results (16 rows), about one equation a slot, so
/// every line of the band is asked for. 128 measured best of 16, 64, 128
/// and 256 (thread CPU time of banding, 19.5 ms without, 17.9 ms with, a
/// million keys at 10 bits per key).
const PREFETCH_SLOTS: usize = 128;

/// Equations eliminated in turn by [`Banding::add_all`]. 3: with the
/// BMI2 shift ([`shift_right`]) a step takes about twelve ALU operations
/// and about 9 cycles of latency a chain, so two chains left the ALUs
/// idle and three keep them busy (user CPU time 9% less at 60,000 keys
/// on Zen 3; with `shrd`, or with two chains, no faster). Cursors past
/// the registers spill to the stack.
const CHAINS: usize = 3;

/// Which equation each chain of [`Banding::add_all`] is on: chain `j` on
/// `next[j]`, the rest of its range `next[j] + 1..end[j]` to follow.
/// Invariant: the ranges `next[j]..end[j]` are disjoint and nonempty, and
/// with the equations done they cover `0..n`.
struct Chains {
    next: [usize; CHAINS],
    end: [usize; CHAINS],
}

impl Chains {
    /// `0..n` cut into [`CHAINS`] ranges of about equal length. REQUIRES:
    /// `n >= CHAINS`.
    fn new(n: usize) -> Self {
        Self {
            next: std::array::from_fn(|j| n * j / CHAINS),
            end: std::array::from_fn(|j| n * (j + 1) / CHAINS),
        }
    }

    /// The next equation of chain `j`, whose equation is done: the next
    /// of its range, or when that is spent the first of the upper half of
    /// the longest rest of another chain's (which keeps the lower half).
    /// `None` when no chain has any equation left to start.
    #[inline]
    fn advance(&mut self, j: usize) -> Option<usize> {
        self.next[j] += 1;
        if self.next[j] < self.end[j] {
            return Some(self.next[j]);
        }
        let rest = |i: usize| self.end[i] - self.next[i] - 1;
        let longest = (0..CHAINS).filter(|&i| i != j).max_by_key(|&i| rest(i))?;
        let left = rest(longest);
        if left == 0 {
            return None;
        }
        let mid = self.next[longest] + 1 + left / 2;
        (self.next[j], self.end[j]) = (mid, self.end[longest]);
        self.end[longest] = mid;
        Some(mid)
    }
}

/// The band's rows, borrowed for elimination: `words` its coefficients
/// flattened (row `i`'s `[LO]` at `2 i`, `[HI]` at `2 i + 1`), `results`
/// one per row. Invariant: `words.len() == 2 * results.len()`, the band's
/// slots twice.
struct Rows<'a> {
    words: &'a mut [u64],
    results: &'a mut [u32],
}

impl Rows<'_> {
    /// Asks the processor to fetch into cache the row that starts at
    /// `word` (or the last row, if `word` is past the band): its
    /// coefficients' line and its result's. A hint only: nothing is read.
    #[inline(always)]
    fn prefetch(&self, word: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // The band has at least 128 rows: `words` is not empty.
            let word = word.min(self.words.len() - 2);
            // SAFETY: `word < words.len()`, and `word / 2 < results.len()`
            // by the `Rows` invariant, so both pointers are in bounds of
            // their slices (`add` stays inside the allocation). A prefetch
            // reads nothing the program sees and cannot fault.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(self.words.as_ptr().add(word).cast());
                _mm_prefetch::<_MM_HINT_T0>(self.results.as_ptr().add(word / 2).cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = word;
    }

    /// Runs one equation's elimination to its end.
    #[inline]
    fn finish<const SPLIT_SHIFT: bool>(&mut self, mut cursor: Cursor) -> bool {
        loop {
            match self.step::<SPLIT_SHIFT>(&mut cursor) {
                Step::Moved => {}
                Step::Done => return true,
                Step::Failed => return false,
            }
        }
    }

    /// One elimination step: store into a free row, or xor with the
    /// occupied one and move to the next set coefficient.
    #[inline(always)]
    fn step<const SPLIT_SHIFT: bool>(&mut self, c: &mut Cursor) -> Step {
        debug_assert!(c.word.is_multiple_of(2) && c.word < self.words.len() && c.lo & 1 == 1);
        // SAFETY: `c.word` is twice a slot below the band's slots by the
        // `Cursor` invariant (every set coefficient bit of the cursor lies
        // at a slot below the band's, and `c.word / 2` is the slot of its
        // lowest set bit), so `c.word + 1 < self.words.len()` and
        // `c.word / 2 < self.results.len()` by the `Rows` invariant; the
        // result is that row's (`2 c.word` bytes is `c.word / 2` `u32`s,
        // `c.word` being even, so the address is aligned too). The three
        // references are to distinct elements.
        let (lo_word, hi_word, result) = unsafe {
            let words = self.words.as_mut_ptr().add(c.word);
            let result = self.results.as_mut_ptr().cast::<u8>().add(2 * c.word);
            (&mut *words, &mut *words.add(1), &mut *result.cast::<u32>())
        };
        // A stored row's bit 0 is set (it is the row's own slot), so a row
        // is free exactly when its low word is zero.
        if *lo_word == 0 {
            (*lo_word, *hi_word, *result) = (c.lo, c.hi, c.result);
            return Step::Done;
        }
        // Every set bit of the stored row lies below the band's slots too
        // (it was a cursor when stored), so the xor keeps the invariant.
        let lo = c.lo ^ *lo_word;
        let hi = c.hi ^ *hi_word;
        c.result ^= *result;
        if lo == 0 {
            let step;
            (*c, step) = past_low_word(Cursor { lo, hi, ..*c });
            return step;
        }
        // Bit 0 is now clear and some other low bit set: `skip` is in
        // 1..=63.
        let skip = lo.trailing_zeros();
        (c.lo, c.hi) = shift_right::<SPLIT_SHIFT>(lo, hi, skip);
        c.word += 2 * skip as usize;
        Step::Moved
    }
}

/// The 128 bits `hi:lo` shifted right by `skip`. REQUIRES: `1 <= skip
/// <= 63`, so the double-word shift needs no case for 64 or more.
///
/// Two forms of the same value. `SPLIT_SHIFT = false`: `(hi << 1) << (63
/// - skip)` is `hi << (64 - skip)` without an out-of-range shift, which
/// the compiler makes one `shrd` (a funnel shift). `SPLIT_SHIFT = true`:
/// the count of the high word's shift left is `-skip mod 64`, which equals
/// `64 - skip` only because `skip` is not 0; the compiler cannot prove
/// that, so it does not make a funnel shift of it, and with BMI2 the form
/// is `shrx`, `shlx`, `or`, `shrx` and a `neg`, one micro-op each, where
/// `shrd r64, r64, cl` takes about five ALU slots on Zen 3 (measured:
/// two of them beside twelve independent adds cost as much as ten more
/// adds). Without BMI2 the split form needs the count in `cl` twice, so
/// only the copy compiled with BMI2 uses it (`ribbon::solve`).
#[inline(always)]
fn shift_right<const SPLIT_SHIFT: bool>(lo: u64, hi: u64, skip: u32) -> (u64, u64) {
    debug_assert!((1..64).contains(&skip));
    let lo = if SPLIT_SHIFT {
        (lo >> skip) | (hi << (skip.wrapping_neg() & 63))
    } else {
        (lo >> skip) | ((hi << 1) << (63 - skip))
    };
    (lo, hi >> skip)
}

/// An equation part way through elimination: coefficients `lo` (slots
/// `i..i + 64` for `i = word / 2`) and `hi` (the next 64). Invariant:
/// `word` is even; bit 0 of `lo` is set and is slot `i`; every set bit
/// lies at a slot below the band's slots (so `i` is a row of the band), as
/// an added equation's do when `start + 128 <= slots`. `word` is where row
/// `i` starts in [`Rows::words`].
#[derive(Clone, Copy)]
struct Cursor {
    word: usize,
    lo: u64,
    hi: u64,
    result: u32,
}

impl Cursor {
    /// The cursor of a new equation, its start checked against the band's
    /// `num_starts`: the one check that keeps every later step's row in
    /// range.
    #[inline(always)]
    fn checked(eq: Equation, num_starts: u64) -> Self {
        assert!(eq.start < num_starts, "equation outside the band");
        debug_assert_eq!(eq.coeff & 1, 1);
        Self {
            word: 2 * eq.start as usize,
            lo: eq.coeff as u64,
            hi: (eq.coeff >> 64) as u64,
            result: eq.result,
        }
    }
}

/// The rest of [`Rows::step`] for cursor `c` whose low word came out
/// zero (rare: all 64 of its bits cancelled): the equation is redundant or
/// contradictory if the high word is zero too, else it moves to the high
/// word's lowest set bit. Out of line and taking the cursor whole, so that
/// the hot step keeps only the new words live (inlined, the compiler
/// tested the high word and the result against the rows' instead, keeping
/// the old ones in registers through the step).
#[cold]
#[inline(never)]
fn past_low_word(mut c: Cursor) -> (Cursor, Step) {
    debug_assert_eq!(c.lo, 0);
    if c.hi == 0 {
        // Redundant when the results agree too (a duplicate key).
        let step = if c.result == 0 {
            Step::Done
        } else {
            Step::Failed
        };
        return (c, step);
    }
    let skip = c.hi.trailing_zeros();
    c.word += 2 * (64 + skip as usize);
    (c.lo, c.hi) = (c.hi >> skip, 0);
    (c, Step::Moved)
}

enum Step {
    /// Not stored yet: the cursor is at its next set coefficient.
    Moved,
    /// Stored, or redundant.
    Done,
    /// Contradicts the rows stored.
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_redundant_and_contradictions_fail() {
        let mut b = Banding::new(256);
        let eq = Equation {
            start: 3,
            coeff: 0b1011,
            result: 5,
        };
        assert!(b.add(eq));
        assert!(b.add(eq), "the same equation twice is redundant");
        assert_eq!(b.occupied(), 1);
        assert!(
            !b.add(Equation { result: 4, ..eq }),
            "same left side, other right side"
        );
    }

    #[test]
    fn reduction_moves_to_the_next_coefficient() {
        let mut b = Banding::new(256);
        assert!(b.add(Equation {
            start: 0,
            coeff: 0b11,
            result: 1
        }));
        assert!(b.add(Equation {
            start: 0,
            coeff: 0b101,
            result: 0
        }));
        // 0b101 ^ 0b11 = 0b110: stored at row 1 as 0b11 with result 1.
        assert_eq!(b.row(1), (0b11, 1));
    }

    #[test]
    fn reduction_past_the_low_word() {
        let mut b = Banding::new(256);
        let eq = Equation {
            start: 5,
            coeff: 1 | 1 << 70,
            result: 3,
        };
        assert!(b.add(eq));
        // The low words cancel: the rest starts at slot 5 + 70.
        assert!(b.add(Equation {
            coeff: 1 | 1 << 100,
            result: 6,
            ..eq
        }));
        assert_eq!(b.row(75), (1 | 1 << 30, 5));
        assert_eq!(b.occupied(), 2);
        // Cancelling to nothing past the low word: redundant, then a
        // contradiction.
        assert!(b.add(Equation {
            coeff: 1 | 1 << 100,
            result: 6,
            ..eq
        }));
        assert!(!b.add(Equation {
            coeff: 1 | 1 << 100,
            result: 7,
            ..eq
        }));
        assert_eq!(b.occupied(), 2);
    }

    /// SplitMix64.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// One straightforward elimination step on `u128` rows: the cursor
    /// `(i, coeff, result)` is stored, or xored and shifted to its next set
    /// coefficient. `Some(outcome)` when it ends.
    /// REQUIRES: `c.1 != 0`.
    fn reference_step(rows: &mut [(u128, u32)], c: &mut (usize, u128, u32)) -> Option<bool> {
        let skip = c.1.trailing_zeros();
        c.0 += skip as usize;
        c.1 >>= skip;
        let row = &mut rows[c.0];
        if row.0 == 0 {
            *row = (c.1, c.2);
            return Some(true);
        }
        c.1 ^= row.0;
        c.2 ^= row.1;
        // Redundant or contradictory: all coefficients cancelled.
        (c.1 == 0).then_some(c.2 == 0)
    }

    /// `add_all` done the straightforward way: the same chains (one
    /// reference step each in turn), on `u128` rows. The outcome and rows.
    fn reference_add_all(slots: usize, eqs: &[Equation]) -> (bool, Vec<(u128, u32)>) {
        let mut rows = vec![(0u128, 0u32); slots];
        let fresh = |k: usize| (eqs[k].start as usize, eqs[k].coeff, eqs[k].result);
        let finish = |rows: &mut Vec<(u128, u32)>, mut c| loop {
            if let Some(ok) = reference_step(rows, &mut c) {
                return ok;
            }
        };
        if eqs.len() < 2 * CHAINS {
            let ok = (0..eqs.len()).all(|k| finish(&mut rows, fresh(k)));
            return (ok, rows);
        }
        let mut chains = Chains::new(eqs.len());
        let mut cursors: Vec<_> = (0..CHAINS).map(|j| fresh(chains.next[j])).collect();
        loop {
            for j in 0..CHAINS {
                match reference_step(&mut rows, &mut cursors[j]) {
                    None => {}
                    Some(false) => return (false, rows),
                    Some(true) => match chains.advance(j) {
                        Some(k) => cursors[j] = fresh(k),
                        None => {
                            let ok = (0..CHAINS)
                                .filter(|&i| i != j)
                                .all(|i| finish(&mut rows, cursors[i]));
                            return (ok, rows);
                        }
                    },
                }
            }
        }
    }

    /// All 32 result bits of every slot solved from `rows`, free slots 0.
    fn reference_solution(rows: &[(u128, u32)]) -> Vec<u32> {
        let mut bits = vec![0u32; rows.len()];
        for i in (0..rows.len()).rev() {
            let (coeff, result) = rows[i];
            bits[i] = (1..128)
                .filter(|&t| coeff >> t & 1 == 1)
                .fold(result & u32::from(coeff & 1 == 1).wrapping_neg(), |b, t| {
                    b ^ bits[i + t]
                });
        }
        bits
    }

    /// `add_all` against the reference on many shapes: uniform and piled
    /// starts, sparse coefficients (whose low words cancel), duplicates,
    /// contradictions, more equations than slots. The same outcome and the
    /// same band row for row; and against one-at-a-time banding in the
    /// given order, the same outcome, occupied rows and solution.
    #[test]
    fn add_all_matches_the_reference() {
        let mut state = 0x5eed;
        let (mut failed, mut solved) = (0, 0);
        for slots in [128usize, 256, 640, 128 * 40] {
            let num_starts = (slots - 127) as u64;
            for n in [
                0usize,
                1,
                3,
                4,
                5,
                17,
                100,
                slots / 2,
                slots * 9 / 10,
                slots,
                slots + 40,
            ] {
                for shape in 0..6 {
                    let mut eqs: Vec<Equation> = (0..n)
                        .map(|_| {
                            let r = next(&mut state);
                            let start = match shape {
                                // Piled on the last few starts.
                                1 => num_starts - 1 - r % num_starts.min(5),
                                _ => r % num_starts,
                            };
                            let coeff = match shape {
                                // One more coefficient, in the high word.
                                2 => 1 | 1u128 << (64 + r % 64),
                                // A few low bits and a high one.
                                3 => 1 | u128::from(r & 0x7) << 1 | 1u128 << (64 + (r >> 8) % 64),
                                _ => (u128::from(next(&mut state)) << 64 | u128::from(r)) | 1,
                            };
                            Equation {
                                start,
                                coeff,
                                result: (r >> 32) as u32,
                            }
                        })
                        .collect();
                    if shape == 4 {
                        // Duplicates, interleaved.
                        let copies: Vec<_> = eqs.iter().step_by(3).copied().collect();
                        for (k, eq) in copies.into_iter().enumerate() {
                            eqs.insert((2 * k + 1).min(eqs.len()), eq);
                        }
                    }
                    if shape == 5 && n > 0 {
                        // A contradiction: a copy with another result.
                        let k = (next(&mut state) % n as u64) as usize;
                        let eq = Equation {
                            result: eqs[k].result ^ 1,
                            ..eqs[k]
                        };
                        eqs.push(eq);
                    }
                    let mut band = Banding::new(slots as u64);
                    let ok = band.add_all::<true, false>(eqs.len(), |k| eqs[k]);
                    let mut plain = Banding::new(slots as u64);
                    assert_eq!(plain.add_all::<false, false>(eqs.len(), |k| eqs[k]), ok);
                    assert!(plain.coeffs == band.coeffs && plain.results == band.results);
                    let mut split = Banding::new(slots as u64);
                    assert_eq!(split.add_all::<true, true>(eqs.len(), |k| eqs[k]), ok);
                    assert!(split.coeffs == band.coeffs && split.results == band.results);
                    let got: Vec<_> = (0..slots).map(|i| band.row(i)).collect();
                    let (want_ok, want) = reference_add_all(slots, &eqs);
                    let what = format!("{slots} slots, {n} equations, shape {shape}");
                    assert_eq!(ok, want_ok, "{what}");
                    assert!(got == want, "{what}: bands differ");
                    // One at a time: the outcome does not depend on the
                    // order; nor, when solved, the rows used and the
                    // solution.
                    let mut one = Banding::new(slots as u64);
                    let one_ok = eqs.iter().all(|&eq| one.add(eq));
                    assert_eq!(ok, one_ok, "{what}");
                    if shape == 5 && n > 0 {
                        assert!(!ok, "{what}: the contradiction was missed");
                    }
                    if !ok {
                        failed += 1;
                        continue;
                    }
                    solved += 1;
                    let one_rows: Vec<_> = (0..slots).map(|i| one.row(i)).collect();
                    let used = |rows: &[(u128, u32)]| -> Vec<bool> {
                        rows.iter().map(|r| r.0 != 0).collect()
                    };
                    assert_eq!(used(&got), used(&one_rows), "{what}");
                    assert_eq!(
                        reference_solution(&got),
                        reference_solution(&one_rows),
                        "{what}"
                    );
                }
            }
        }
        assert!(
            failed > 20 && solved > 50,
            "{failed} failed, {solved} solved"
        );
    }

    /// [`shift_right`] compiled with BMI1 and BMI2, as `ribbon::solve_bmi2`
    /// compiles it. REQUIRES: the CPU has both.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2")]
    fn split_shift_with_bmi2(lo: u64, hi: u64, skip: u32) -> (u64, u64) {
        shift_right::<true>(lo, hi, skip)
    }

    /// Both forms of the step's double-word shift are the 128-bit shift,
    /// for every skip a step makes (1..=63) and words whose bits cross the
    /// boundary in every way; the split form compiled with BMI2 too.
    #[test]
    fn shift_right_is_the_double_word_shift_for_every_skip() {
        let mut state = 0x5417;
        let mut words = vec![
            0,
            1,
            u64::MAX,
            1 << 63,
            1 << 63 | 1,
            0xaaaa_aaaa_aaaa_aaaa,
            0x5555_5555_5555_5555,
            0x0123_4567_89ab_cdef,
        ];
        words.extend((0..24).map(|_| next(&mut state)));
        #[cfg(target_arch = "x86_64")]
        let bmi2 = std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2");
        for skip in 1..64u32 {
            // Not a constant the compiler could fold into the shifts.
            let skip = std::hint::black_box(skip);
            for &lo in &words {
                for &hi in &words {
                    let wide = (u128::from(hi) << 64 | u128::from(lo)) >> skip;
                    let want = (wide as u64, (wide >> 64) as u64);
                    let what = format!("skip {skip}, lo {lo:#x}, hi {hi:#x}");
                    assert_eq!(shift_right::<false>(lo, hi, skip), want, "{what}");
                    assert_eq!(shift_right::<true>(lo, hi, skip), want, "{what}");
                    #[cfg(target_arch = "x86_64")]
                    if bmi2 {
                        // SAFETY: the CPU has BMI1 and BMI2, checked above.
                        let got = unsafe { split_shift_with_bmi2(lo, hi, skip) };
                        assert_eq!(got, want, "{what}, BMI2");
                    }
                }
            }
        }
    }

    /// Every equation of `0..n` is handed out exactly once, whatever order
    /// the chains finish theirs in, and the end (`None`) comes only when
    /// every other chain is on its last: for every `n` from `CHAINS` on
    /// (uneven ranges included) and many finishing orders.
    #[test]
    fn chains_hand_out_every_equation_once() {
        let mut state = 0xc4a1;
        for n in CHAINS..200 {
            for order in 0..8 {
                let mut chains = Chains::new(n);
                let mut seen = vec![0u32; n];
                for j in 0..CHAINS {
                    seen[chains.next[j]] += 1;
                }
                loop {
                    // Round robin, or a random chain finishing first.
                    let j = if order == 0 {
                        seen.iter().sum::<u32>() as usize % CHAINS
                    } else {
                        (next(&mut state) % CHAINS as u64) as usize
                    };
                    match chains.advance(j) {
                        Some(k) => seen[k] += 1,
                        None => {
                            for i in (0..CHAINS).filter(|&i| i != j) {
                                assert_eq!(chains.next[i] + 1, chains.end[i], "n {n}");
                            }
                            break;
                        }
                    }
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "n {n}, order {order}: {seen:?}"
                );
            }
        }
    }

    /// `add_all` at every count up to several times `2 * CHAINS` (below
    /// it one at a time, at and above it the chains with ranges of uneven
    /// length), with and without a contradiction and duplicates: the
    /// outcome of one-at-a-time banding, and when solved its rows and
    /// solution, in both forms of the shift.
    #[test]
    fn add_all_agrees_with_one_at_a_time_at_every_small_count() {
        let mut state = 0x77;
        let slots = 256usize;
        let num_starts = (slots - 127) as u64;
        for n in 0..=8 * CHAINS + 1 {
            for shape in 0..3 {
                let mut eqs: Vec<Equation> = (0..n)
                    .map(|_| Equation {
                        // Piled on few starts, so that steps reduce.
                        start: next(&mut state) % if shape == 0 { num_starts } else { 3 },
                        coeff: (u128::from(next(&mut state)) << 64 | u128::from(next(&mut state)))
                            | 1,
                        result: next(&mut state) as u32,
                    })
                    .collect();
                if shape == 2 && n > 0 {
                    let k = (next(&mut state) % n as u64) as usize;
                    eqs.insert(k, eqs[n - 1 - k]);
                    let eq = eqs[k];
                    eqs.push(Equation {
                        result: eq.result ^ 1,
                        ..eq
                    });
                }
                let mut one = Banding::new(slots as u64);
                let one_ok = eqs.iter().all(|&eq| one.add(eq));
                let what = format!("{n} equations, shape {shape}");
                if shape == 2 && n > 0 {
                    assert!(!one_ok, "{what}");
                }
                let mut plain = Banding::new(slots as u64);
                let mut split = Banding::new(slots as u64);
                assert_eq!(
                    plain.add_all::<false, false>(eqs.len(), |k| eqs[k]),
                    one_ok,
                    "{what}"
                );
                assert_eq!(
                    split.add_all::<true, true>(eqs.len(), |k| eqs[k]),
                    one_ok,
                    "{what}"
                );
                assert!(
                    plain.coeffs == split.coeffs && plain.results == split.results,
                    "{what}"
                );
                if one_ok {
                    let rows = |b: &Banding| -> Vec<_> { (0..slots).map(|i| b.row(i)).collect() };
                    let used =
                        |r: &[(u128, u32)]| -> Vec<bool> { r.iter().map(|r| r.0 != 0).collect() };
                    let (got, want) = (rows(&plain), rows(&one));
                    assert_eq!(used(&got), used(&want), "{what}");
                    assert_eq!(
                        reference_solution(&got),
                        reference_solution(&want),
                        "{what}"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "outside the band")]
    fn equations_past_the_band_are_refused() {
        let mut b = Banding::new(256);
        b.add(Equation {
            start: 129,
            coeff: 1,
            result: 0,
        });
    }
}
