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

/// One row of the band: 128 coefficient bits (`[LO]` = slots `i..i + 64`,
/// `[HI]` the next 64) and the result bits (`[RESULT]`). All zero when the
/// row is free. One array of rows keeps a step to one bounds check and one
/// cache line; plain zeroed words let the allocator hand out zeroed pages.
pub(crate) type Row = [u64; 3];
pub(crate) const LO: usize = 0;
pub(crate) const HI: usize = 1;
pub(crate) const RESULT: usize = 2;

/// The band: one row per slot.
#[derive(Clone, Debug)]
pub(crate) struct Banding {
    rows: Vec<Row>,
}

impl Banding {
    /// A band of `num_slots` free rows. REQUIRES: `num_slots` is at least
    /// [`COEFF_BITS`] and fits in memory.
    pub(crate) fn new(num_slots: u64) -> Self {
        debug_assert!(num_slots >= COEFF_BITS);
        Self {
            rows: vec![[0; 3]; num_slots as usize],
        }
    }

    /// Frees every row (to try another seed on the same slots).
    pub(crate) fn clear(&mut self) {
        self.rows.fill([0; 3]);
    }

    /// Adds one equation. `false` when it contradicts those added before;
    /// a failed add stores nothing.
    /// REQUIRES: `eq.start + 128 <= num_slots` and `eq.coeff & 1 == 1`.
    #[inline]
    pub(crate) fn add(&mut self, eq: Equation) -> bool {
        self.finish(Cursor::new(eq))
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
            let mut a = Cursor::new(equation(a_next));
            let mut b = Cursor::new(equation(b_next));
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
                        a = Cursor::new(equation(a_next));
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
                        b = Cursor::new(equation(b_next));
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
        let row = &mut self.rows[c.i];
        let stored = (u128::from(row[HI]) << 64) | u128::from(row[LO]);
        if stored == 0 {
            *row = [c.coeff as u64, (c.coeff >> 64) as u64, c.result];
            return Step::Done;
        }
        let reduced = c.coeff ^ stored;
        c.result ^= row[RESULT];
        if reduced == 0 {
            // Redundant when the results agree too (a duplicate key).
            return if c.result == 0 {
                Step::Done
            } else {
                Step::Failed
            };
        }
        // Bit 0 is now clear: 1..=127.
        let skip = reduced.trailing_zeros();
        c.i += skip as usize;
        c.coeff = reduced >> skip;
        Step::Moved
    }

    /// Row `i`: coefficients and result. REQUIRES: `i < num_slots`.
    #[cfg(test)]
    pub(crate) fn row(&self, i: usize) -> (u128, u32) {
        let r = self.rows[i];
        (
            (u128::from(r[HI]) << 64) | u128::from(r[LO]),
            r[RESULT] as u32,
        )
    }

    /// The 128 rows of block `block`. REQUIRES: `block < num_slots / 128`.
    #[inline]
    pub(crate) fn block_rows(&self, block: u64) -> &[Row; COEFF_BITS as usize] {
        &self.rows.as_chunks::<{ COEFF_BITS as usize }>().0[block as usize]
    }

    /// Rows in use.
    #[cfg(test)]
    pub(crate) fn occupied(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r[LO] != 0 || r[HI] != 0)
            .count()
    }
}

/// An equation part way through elimination. Invariant: bit 0 of the
/// coefficients is set and is slot `i`; every set bit lies below the end
/// of some stored or original span, so `i` stays in range.
#[derive(Clone, Copy)]
struct Cursor {
    i: usize,
    coeff: u128,
    result: u64,
}

impl Cursor {
    #[inline]
    fn new(eq: Equation) -> Self {
        Self {
            i: eq.start as usize,
            coeff: eq.coeff,
            result: u64::from(eq.result),
        }
    }
}

enum Step {
    Moved,
    Done,
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
}
