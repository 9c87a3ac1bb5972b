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
    #[inline]
    pub(crate) fn add(&mut self, eq: Equation) -> bool {
        let cursor = self.cursor(eq);
        self.finish(cursor)
    }

    /// The cursor of a new equation, its start checked: the one check that
    /// keeps every later step's row index in range.
    #[inline(always)]
    fn cursor(&self, eq: Equation) -> Cursor {
        assert!(eq.start < self.num_starts, "equation outside the band");
        Cursor::new(eq)
    }

    /// Adds equations `equation(0..n)`; `false` as soon as one contradicts
    /// the others. REQUIRES: as for [`Banding::add`], for each.
    ///
    /// Two ranges of the sequence are eliminated in alternation, one step
    /// each, so the processor overlaps the two chains of dependent loads;
    /// when one range runs out it takes the upper half of what is left of
    /// the other. The band is the same as some one-at-a-time order would
    /// give: a stored row never changes, so every row a step reads as
    /// occupied is the same when the equation is finally stored, and the
    /// step that stores checks and fills its row at once.
    pub(crate) fn add_all(&mut self, n: usize, equation: impl Fn(usize) -> Equation) -> bool {
        let (mut a_next, mut a_end) = (0, n / 2);
        let (mut b_next, mut b_end) = (n / 2, n);
        while a_next < a_end && b_next < b_end {
            let mut a = self.cursor(equation(a_next));
            let mut b = self.cursor(equation(b_next));
            loop {
                match self.step(&mut a) {
                    Step::Moved => {}
                    Step::Failed => return false,
                    Step::Done => {
                        a_next += 1;
                        if a_next == a_end {
                            if !self.finish(b) {
                                return false;
                            }
                            b_next += 1;
                            break;
                        }
                        a = self.cursor(equation(a_next));
                    }
                }
                match self.step(&mut b) {
                    Step::Moved => {}
                    Step::Failed => return false,
                    Step::Done => {
                        b_next += 1;
                        if b_next == b_end {
                            if !self.finish(a) {
                                return false;
                            }
                            a_next += 1;
                            break;
                        }
                        b = self.cursor(equation(b_next));
                    }
                }
            }
            // Give the idle side the upper half of the other's rest.
            if a_next == a_end {
                let mid = b_next + (b_end - b_next) / 2;
                (a_next, a_end, b_end) = (mid, b_end, mid);
            } else {
                let mid = a_next + (a_end - a_next) / 2;
                (b_next, b_end, a_end) = (mid, a_end, mid);
            }
        }
        (a_next..a_end)
            .chain(b_next..b_end)
            .all(|k| self.add(equation(k)))
    }

    /// Runs one equation's elimination to its end.
    #[inline]
    fn finish(&mut self, mut cursor: Cursor) -> bool {
        loop {
            match self.step(&mut cursor) {
                Step::Moved => {}
                Step::Done => return true,
                Step::Failed => return false,
            }
        }
    }

    /// One elimination step: store into a free row, or xor with the
    /// occupied one and move to the next set coefficient.
    #[inline(always)]
    fn step(&mut self, c: &mut Cursor) -> Step {
        debug_assert!(c.i < self.coeffs.len() && c.lo & 1 == 1);
        // SAFETY: `c.i < self.coeffs.len() == self.results.len()` by the
        // `Cursor` invariant (every set coefficient bit of the cursor lies
        // at a slot below the band's, and `c.i` is the slot of its lowest
        // set bit) and the `Banding` one.
        let (row, result) = unsafe {
            (
                self.coeffs.get_unchecked_mut(c.i),
                self.results.get_unchecked_mut(c.i),
            )
        };
        // A stored row's bit 0 is set (it is the row's own slot), so a row
        // is free exactly when its low word is zero.
        if row[LO] == 0 {
            *row = [c.lo, c.hi];
            *result = c.result;
            return Step::Done;
        }
        // Every set bit of the stored row lies below the band's slots too
        // (it was a cursor when stored), so the xor keeps the invariant.
        c.lo ^= row[LO];
        c.hi ^= row[HI];
        c.result ^= *result;
        if c.lo == 0 {
            cold();
            return c.step_high();
        }
        // Bit 0 is now clear and some other low bit set: 1..=63.
        let skip = c.lo.trailing_zeros() & 63;
        let coeff = ((u128::from(c.hi) << 64) | u128::from(c.lo)) >> skip;
        (c.lo, c.hi) = (coeff as u64, (coeff >> 64) as u64);
        c.i += skip as usize;
        Step::Moved
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

/// An equation part way through elimination: coefficients `lo` (slots
/// `i..i + 64`) and `hi` (the next 64). Invariant: bit 0 of `lo` is set
/// and is slot `i`; every set bit lies at a slot below the band's slots
/// (so `i` is a row of the band), as an added equation's do when
/// `start + 128 <= slots`.
#[derive(Clone, Copy)]
struct Cursor {
    i: usize,
    lo: u64,
    hi: u64,
    result: u32,
}

impl Cursor {
    #[inline]
    fn new(eq: Equation) -> Self {
        debug_assert_eq!(eq.coeff & 1, 1);
        Self {
            i: eq.start as usize,
            lo: eq.coeff as u64,
            hi: (eq.coeff >> 64) as u64,
            result: eq.result,
        }
    }

    /// The rest of [`Banding::step`] when the low word came out zero
    /// (rare: all 64 of its bits cancelled): the equation is redundant or
    /// contradictory if the high word is zero too, else it moves to the
    /// high word's lowest set bit.
    #[inline(always)]
    fn step_high(&mut self) -> Step {
        if self.hi == 0 {
            // Redundant when the results agree too (a duplicate key).
            return if self.result == 0 {
                Step::Done
            } else {
                Step::Failed
            };
        }
        let skip = self.hi.trailing_zeros();
        self.i += 64 + skip as usize;
        self.lo = self.hi >> skip;
        self.hi = 0;
        Step::Moved
    }
}

/// Marks the branch that calls it as rarely taken (`std::hint::cold_path`
/// is newer than the crate's minimum Rust version).
#[cold]
#[inline(never)]
fn cold() {}

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
