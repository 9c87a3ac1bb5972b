//! Growing a compaction's inputs where it costs nothing more below
//! (RocksDB's `SetupOtherInputs` and `TryExtendNonL0TrivialMove`, LevelDB's
//! `SetupOtherInputs`).
//!
//! A table picked from level `n` pulls in every table of `n + 1` its range
//! meets, and those span more than it does. The neighbours of the pick in
//! level `n` that fall inside that wider span would merge with the very
//! same `n + 1` tables later, rewriting them a second time: taking them now
//! moves more bytes down for the same rewrite. A pick that meets nothing
//! below (a trivial move) likewise takes up to `MAX_TRIVIAL_MOVE` - 1
//! neighbours that still meet nothing, so one manifest edit moves a run.
//!
//! Tables of a level below L0 are disjoint and never split one user key's
//! versions (the writer cuts only where the user key changes), so any
//! contiguous run of them is a clean set of inputs.

use super::pick::{TableRef, level_bytes, overlapping_slice};

/// Most tables one trivial move takes (RocksDB's `kMaxMultiTrivialMove`).
const MAX_TRIVIAL_MOVE: usize = 4;

/// The inputs from `tables` (a sorted level) for the pick `tables[at]`,
/// merged into `next` (the sorted level below): a contiguous run that holds
/// the pick. `max_compaction_bytes` bounds a trivial move's run; a merge may
/// grow to twice that, inputs and overlapped tables together (RocksDB's
/// softer limit for an expansion that adds no table below).
pub(crate) fn widen<'a, T: TableRef>(
    tables: &'a [T],
    at: usize,
    next: &[T],
    max_compaction_bytes: u64,
) -> &'a [T] {
    let pick = tables[at].meta();
    let below = overlapping_slice(next, &pick.smallest_key, &pick.largest_key);
    if below.is_empty() {
        return trivial_run(tables, at, next, max_compaction_bytes);
    }
    // The span the merge rewrites below: the pick's and the tables it meets.
    let first = below[0].meta().smallest_key.as_slice();
    let last = below[below.len() - 1].meta().largest_key.as_slice();
    let start = first.min(pick.smallest_key.as_slice());
    let end = last.max(pick.largest_key.as_slice());
    let limit = max_compaction_bytes.saturating_mul(2);
    let below_bytes = level_bytes(below);
    let fits = |run: &[T]| run.len() > 1 && below_bytes.saturating_add(level_bytes(run)) < limit;
    // Every table meeting the span, if together they still meet only
    // `below` (they may reach past it on either side).
    let meeting = overlapping_slice(tables, start, end);
    if fits(meeting) {
        let (s, l) = run_range(meeting);
        if overlapping_slice(next, s, l).len() == below.len() {
            return meeting;
        }
    }
    // Otherwise the tables wholly inside the span: they cannot meet more.
    let inside = inside_slice(tables, start, end);
    if fits(inside) {
        return inside;
    }
    &tables[at..=at]
}

/// The pick and its neighbours, rightwards first, while the run's whole
/// range meets nothing in `next`, up to `MAX_TRIVIAL_MOVE` tables and
/// `max_compaction_bytes`.
fn trivial_run<'a, T: TableRef>(
    tables: &'a [T],
    at: usize,
    next: &[T],
    max_compaction_bytes: u64,
) -> &'a [T] {
    let (mut from, mut to) = (at, at);
    let mut bytes = tables[at].meta().file_size;
    let extend = |from: usize, to: usize, added: usize, bytes: &mut u64| {
        let (s, l) = run_range(&tables[from..=to]);
        let size = bytes.saturating_add(tables[added].meta().file_size);
        let ok = to - from < MAX_TRIVIAL_MOVE
            && overlapping_slice(next, s, l).is_empty()
            && size <= max_compaction_bytes;
        if ok {
            *bytes = size;
        }
        ok
    };
    while to + 1 < tables.len() && extend(from, to + 1, to + 1, &mut bytes) {
        to += 1;
    }
    while from > 0 && extend(from - 1, to, from - 1, &mut bytes) {
        from -= 1;
    }
    &tables[from..=to]
}

/// The smallest and largest key of a run of a sorted level.
/// REQUIRES: `run` is not empty.
fn run_range<T: TableRef>(run: &[T]) -> (&[u8], &[u8]) {
    (
        run[0].meta().smallest_key.as_slice(),
        run[run.len() - 1].meta().largest_key.as_slice(),
    )
}

/// The tables of a sorted level whose whole range lies in `[start, end]`:
/// a contiguous run.
fn inside_slice<'a, T: TableRef>(tables: &'a [T], start: &[u8], end: &[u8]) -> &'a [T] {
    let from = tables.partition_point(|t| t.meta().smallest_key.as_slice() < start);
    let to = tables.partition_point(|t| t.meta().largest_key.as_slice() <= end);
    &tables[from..to.max(from)]
}
