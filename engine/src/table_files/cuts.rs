//! Where a compaction's output is cut into tables: at the target size, and
//! earlier where the cut lines up with the tables of the level below the
//! output (the *grandparent* level), so that the next compaction of an
//! output table rewrites fewer bytes below it, or none (RocksDB's
//! `CompactionOutputs::ShouldStopBefore` with
//! `level_compaction_dynamic_file_size`, its default).
//!
//! With grandparents, a table is cut at twice the target size wherever it
//! stands (RocksDB's `max_output_file_size` for a level with a level
//! below); without them, at the target size. Before that, the rules below,
//! checked before each new user key, only where that key crosses a
//! grandparent table's boundary (its start or its end):
//! - the output table and the grandparent bytes it overlaps would exceed
//!   `MAX_COMPACTION_FACTOR` target sizes (a later compaction of it would be
//!   that large);
//! - the key jumps over a whole grandparent table, and the grandparent
//!   tables it newly enters (the jumped ones and the one it lands in) hold
//!   more than an eighth of the target size: cutting before it leaves the
//!   jumped table overlapped by no output, so it is never rewritten for
//!   them (and an output falling in a gap of the level below can later move
//!   down without being rewritten);
//! - the output has reached 50% of the target size, plus 5% for every
//!   boundary it already crossed (at most 90%): a table ending on a
//!   grandparent boundary overlaps fewer grandparent tables, and having seen
//!   boundaries makes another before the target size likely.
//!
//! Cuts only ever fall between user keys (the writer asks only when the user
//! key changes), so where they fall changes which tables hold a key, never
//! which versions are kept.

/// A compaction's output table and the grandparent bytes it overlaps stay
/// under this many target sizes (RocksDB's `max_compaction_bytes` default:
/// 25 x `target_file_size_base`).
pub(crate) const MAX_COMPACTION_FACTOR: u64 = 25;

/// A table of the grandparent level: its user-key range and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableSpan {
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
    pub(crate) file_size: u64,
}

/// The cutting state of one run of output tables. Invariants: `spans` are
/// sorted and disjoint (one sorted level); `index` is the first span whose
/// largest key is at or above the last key seen, and `in_gap` says that key
/// is below `spans[index]` (or past every span); `overlapped` is the bytes of
/// the spans the open output table meets.
#[derive(Debug)]
pub(crate) struct OutputCuts {
    target_bytes: u64,
    spans: Vec<TableSpan>,
    index: usize,
    in_gap: bool,
    seen_key: bool,
    overlapped: u64,
    /// Grandparent boundaries crossed since the open table started.
    crossed_in_table: u64,
}

impl OutputCuts {
    /// One table, however large (flushes: an L0 table holds the memtables of one flush).
    pub(crate) fn one_table() -> Self {
        Self::new(u64::MAX, Vec::new())
    }

    /// Tables of about `target_bytes`, aligned with `grandparents` (the
    /// tables of the level below the output that meet the compaction's
    /// range, in key order).
    /// REQUIRES: `grandparents` sorted and disjoint.
    pub(crate) fn new(target_bytes: u64, grandparents: Vec<TableSpan>) -> Self {
        debug_assert!(
            grandparents
                .windows(2)
                .all(|w| w[0].largest < w[1].smallest),
            "grandparent tables must be sorted and disjoint"
        );
        Self {
            target_bytes: target_bytes.max(1),
            spans: grandparents,
            index: 0,
            in_gap: true,
            seen_key: false,
            overlapped: 0,
            crossed_in_table: 0,
        }
    }

    /// Whether the open table (`open_bytes` long so far; `None` when no
    /// table is open) ends before `key`. When it does, the caller must
    /// finish it and start a new one with `key`.
    /// REQUIRES: called once per user key, in ascending key order.
    pub(crate) fn cut_before(&mut self, key: &[u8], open_bytes: Option<u64>) -> bool {
        let before = self.overlapped;
        let crossed = self.advance(key);
        let Some(size) = open_bytes else {
            return false;
        };
        let cut = size >= self.hard_limit()
            || (crossed > 0 && self.cut_at_boundary(size, before, crossed));
        if cut {
            self.crossed_in_table = 0;
            self.overlapped = self.overlap_of_current_key();
        }
        cut
    }

    /// The size at which a table is cut wherever it stands.
    fn hard_limit(&self) -> u64 {
        if self.spans.is_empty() {
            self.target_bytes
        } else {
            self.target_bytes.saturating_mul(2)
        }
    }

    fn cut_at_boundary(&self, size: u64, before: u64, crossed: u64) -> bool {
        let target = self.target_bytes;
        if self.overlapped.saturating_add(size) > target.saturating_mul(MAX_COMPACTION_FACTOR) {
            return true;
        }
        // Crossing the end of one table, the start and end of the next, (and
        // from inside a table, the start of a third) jumps a whole table.
        let skips_a_table = crossed >= if self.in_gap { 2 } else { 3 };
        if skips_a_table && self.overlapped - before > target / 8 {
            return true;
        }
        let percent = 50 + (self.crossed_in_table * 5).min(40);
        size >= target.div_ceil(100).saturating_mul(percent)
    }

    /// Moves past the spans `key` is beyond; returns how many span
    /// boundaries (starts and ends) that crossed since the previous key.
    fn advance(&mut self, key: &[u8]) -> u64 {
        let mut crossed = 0;
        while let Some(span) = self.spans.get(self.index) {
            if self.in_gap {
                if key < span.smallest.as_slice() {
                    break;
                }
                if self.seen_key {
                    crossed += 1;
                    self.overlapped = self.overlapped.saturating_add(span.file_size);
                }
                self.in_gap = false;
            } else {
                if key <= span.largest.as_slice() {
                    break;
                }
                if self.seen_key {
                    crossed += 1;
                }
                self.in_gap = true;
                self.index += 1;
            }
        }
        if !self.seen_key {
            self.overlapped = self.overlap_of_current_key();
            self.seen_key = true;
        }
        self.crossed_in_table += crossed;
        crossed
    }

    /// The grandparent bytes a table starting at the last key seen meets.
    fn overlap_of_current_key(&self) -> u64 {
        match self.spans.get(self.index) {
            Some(span) if !self.in_gap => span.file_size,
            _ => 0,
        }
    }
}
