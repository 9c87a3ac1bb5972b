//! Choosing the next compaction: a pure function of the tree's shape, so
//! the whole input set and the tombstone decision can be tested on
//! hand-built trees without any file.

use std::cmp::Ordering;

use super::targets::{LevelTargets, level_targets};
use super::widen::widen;
use crate::manifest::TableMeta;
use crate::options::Options;
use crate::table_files::{MAX_COMPACTION_FACTOR, TableSpan};

/// Anything that carries a table's manifest record (live handles in the
/// store, bare records in tests).
pub(crate) trait TableRef {
    fn meta(&self) -> &TableMeta;
}

impl TableRef for TableMeta {
    fn meta(&self) -> &TableMeta {
        self
    }
}

impl TableRef for std::sync::Arc<crate::version::TableHandle> {
    fn meta(&self) -> &TableMeta {
        &self.meta
    }
}

/// A chosen compaction. `inputs` (from `level`) and `overlapping` (every
/// table of `output_level` whose key range meets the inputs' range) are
/// merged into new tables at `output_level`; `deeper` says, per key, whether
/// a level below the output can still hold an older version.
#[derive(Debug, Clone)]
pub(crate) struct Compaction<T> {
    /// The level the inputs come from.
    pub(crate) level: usize,
    /// Tables picked from `level`.
    pub(crate) inputs: Vec<T>,
    /// Where the merged tables go (`level + 1`, or the deepest level for a
    /// full compaction).
    pub(crate) output_level: usize,
    /// Tables of `output_level` that meet the inputs' key range.
    pub(crate) overlapping: Vec<T>,
    /// Key ranges below `output_level` that meet the compaction's range.
    pub(crate) deeper: DeeperRanges,
    /// The tables of the level below `output_level` that meet the
    /// compaction's range, in key order: the outputs are cut to line up
    /// with them (`table_files::OutputCuts`).
    pub(crate) grandparents: Vec<TableSpan>,
    /// The round-robin pointer of `level` after this compaction, if it moves.
    pub(crate) next_pointer: Option<Vec<u8>>,
    /// Nothing to merge: no table of `output_level` meets the inputs, and
    /// the inputs do not meet each other, so they move to `output_level`
    /// by a manifest edit alone, every version (and tombstone) kept.
    pub(crate) trivial_move: bool,
    /// A bottommost cleanup (`cleanup.rs`): one table rewritten alone into
    /// its own level, nothing below it, to drop its tombstones and shadowed
    /// versions.
    pub(crate) bottom_cleanup: bool,
}

impl<T> Compaction<T> {
    /// Every table the compaction reads (and removes when it installs).
    pub(crate) fn all_inputs(&self) -> impl Iterator<Item = &T> {
        self.inputs.iter().chain(&self.overlapping)
    }
}

/// Key ranges `(smallest, largest)` of the tables below a compaction's
/// output level that meet its key range: one list per level, each sorted
/// and non-overlapping (levels below L0 never overlap).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeeperRanges {
    levels: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
}

impl DeeperRanges {
    /// Nothing below: every key is at its base level (a full compaction).
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// No deeper table meets the range: every key in it is at its base
    /// level, so every trailing tombstone in it may go.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.levels.iter().all(Vec::is_empty)
    }

    /// REQUIRES: each level's ranges sorted and non-overlapping.
    pub(crate) fn new(levels: Vec<Vec<(Vec<u8>, Vec<u8>)>>) -> Self {
        Self { levels }
    }

    /// A per-key checker (LevelDB's `Compaction::IsBaseLevelForKey`).
    pub(crate) fn checker(&self) -> BaseLevelCheck<'_> {
        BaseLevelCheck {
            levels: &self.levels,
            cursors: vec![0; self.levels.len()],
        }
    }
}

/// Answers "can any level below the output hold `key`?" for keys asked in
/// ascending order, in amortized constant time per key.
#[derive(Debug)]
pub(crate) struct BaseLevelCheck<'a> {
    levels: &'a [Vec<(Vec<u8>, Vec<u8>)>],
    cursors: Vec<usize>,
}

impl BaseLevelCheck<'_> {
    /// True when no table below the output level has `key` in its range:
    /// then a tombstone for `key` hides nothing and may be dropped.
    /// REQUIRES: successive calls pass ascending keys.
    pub(crate) fn is_base_level_for(&mut self, key: &[u8]) -> bool {
        for (ranges, cursor) in self.levels.iter().zip(self.cursors.iter_mut()) {
            while let Some((smallest, largest)) = ranges.get(*cursor) {
                if key <= largest.as_slice() {
                    if key >= smallest.as_slice() {
                        return false;
                    }
                    break;
                }
                *cursor += 1;
            }
        }
        true
    }
}

/// The most urgent compaction of the tree `levels` (L0 newest first, deeper
/// levels sorted by smallest key), or `None` when no level needs one. The
/// level of the highest score (`scores`) goes, if that score reaches 1:
/// L0 whole into the base level (`targets.rs`); any other level gives the
/// table whose overlap with the next level is the smallest part of its own
/// size (RocksDB's `kMinOverlappingRatio`: the least rewriting per byte
/// moved down); ties go round robin, to the first after `pointers[level]`,
/// the largest key of the last input compacted out of that level. That
/// table's neighbours join it where they add no table below (`widen.rs`).
pub(crate) fn pick<T: TableRef + Clone>(
    levels: &[Vec<T>],
    options: &Options,
    pointers: &[Vec<u8>],
) -> Option<Compaction<T>> {
    if levels.len() < 2 {
        return None;
    }
    let bytes: Vec<u64> = levels.iter().map(|l| level_bytes(l)).collect();
    let targets = level_targets(&bytes, options);
    let scores = scores(levels[0].len(), &bytes, &targets, options);
    let (level, score) = scores
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, f64::MIN),
            |best, (l, s)| if s > best.1 { (l, s) } else { best },
        );
    if score < 1.0 {
        return None;
    }
    let max_compaction_bytes = max_compaction_bytes(options);
    if level == 0 {
        return Some(l0_into_base(levels, targets.base_level, options));
    }
    let pointer = pointers.get(level).map_or(&[][..], Vec::as_slice);
    let at = least_overlapping(&levels[level], &levels[level + 1], pointer)?;
    let inputs = widen(&levels[level], at, &levels[level + 1], max_compaction_bytes).to_vec();
    let next_pointer = inputs.last().map(|t| t.meta().largest_key.clone());
    Some(expand(
        levels,
        level,
        inputs,
        level + 1,
        next_pointer,
        max_compaction_bytes,
    ))
}

/// The most bytes one compaction takes from the levels below its inputs'
/// (RocksDB's `max_compaction_bytes`).
pub(super) fn max_compaction_bytes(options: &Options) -> u64 {
    options
        .target_file_bytes
        .saturating_mul(MAX_COMPACTION_FACTOR)
}

/// Every L0 table into `base_level` (`targets.rs`), with the tables there
/// they meet: what the L0 trigger compacts.
pub(super) fn l0_into_base<T: TableRef + Clone>(
    levels: &[Vec<T>],
    base_level: usize,
    options: &Options,
) -> Compaction<T> {
    expand(
        levels,
        0,
        levels[0].clone(),
        base_level,
        None,
        max_compaction_bytes(options),
    )
}

/// The level L0 compacts into for the tree `levels` (`targets.rs`).
pub(super) fn base_level<T: TableRef>(levels: &[Vec<T>], options: &Options) -> usize {
    let bytes: Vec<u64> = levels.iter().map(|l| level_bytes(l)).collect();
    level_targets(&bytes, options).base_level
}

/// How urgently each level needs a compaction; 1 or more: it needs one.
/// RocksDB's rules (`VersionStorageInfo::ComputeCompactionScore`):
/// - L0 scores its table count over `l0_compaction_trigger`. With dynamic
///   budgets it also reaches 1.01 once it holds `l1_bytes`, and L0 bytes
///   over the base level's (actual or budget, the larger) once it holds
///   more than the base level's budget; a score above 1 is scaled by 10.
///   With static budgets it also scores its bytes over `l1_bytes`.
/// - A level below scores bytes over budget. With dynamic budgets a level
///   over budget scores bytes over (budget + the bytes about to come down
///   into it: all of L0 and every shallower level's excess), scaled by 10:
///   a level about to receive a large ratio of its size waits, so L0 is
///   not starved by the base level nor the base level grown without bound
///   by L0 (each L0 compaction rewrites the base level, so a base level
///   let grow multiplies write amplification). Levels above the base
///   level and the last level score 0.
fn scores(l0_tables: usize, bytes: &[u64], targets: &LevelTargets, options: &Options) -> Vec<f64> {
    const SCALE: f64 = 10.0;
    let mut scores = vec![0.0; bytes.len()];
    let l0_bytes = bytes[0] as f64;
    let base = targets.base_level;
    let mut l0 = l0_tables as f64 / options.l0_compaction_trigger.max(1) as f64;
    if options.dynamic_level_bytes {
        if l0_bytes >= options.l1_bytes as f64 {
            l0 = l0.max(1.01);
        }
        let base_budget = targets.budgets[base] as f64;
        if l0_bytes > base_budget {
            l0 = l0.max(l0_bytes / (bytes[base] as f64).max(base_budget));
        }
        if l0 > 1.0 {
            l0 *= SCALE;
        }
    } else {
        l0 = l0.max(l0_bytes / options.l1_bytes.max(1) as f64);
    }
    scores[0] = l0;
    let mut coming_down = l0_bytes;
    let last = bytes.len() - 1;
    for level in base..last {
        let (b, budget) = (bytes[level] as f64, targets.budgets[level].max(1) as f64);
        scores[level] = if !options.dynamic_level_bytes || b < budget {
            b / budget
        } else {
            b / (budget + coming_down) * SCALE
        };
        coming_down += (b - budget).max(0.0);
    }
    scores
}

/// Saturating: a crafted store's recorded sizes (each at most its file's,
/// up to 2^63 - 1 for a sparse file) may sum past a u64
/// (`stats_crafted_file_sizes.rs`).
pub(super) fn level_bytes<T: TableRef>(tables: &[T]) -> u64 {
    tables
        .iter()
        .fold(0u64, |sum, t| sum.saturating_add(t.meta().file_size))
}

/// The index in `tables` (a sorted level) of the table whose overlapping
/// bytes in `next` (the sorted level below) are the smallest fraction of its
/// own size; among equals, the first at or after the round-robin `pointer`.
fn least_overlapping<T: TableRef>(tables: &[T], next: &[T], pointer: &[u8]) -> Option<usize> {
    let start = tables
        .iter()
        .position(|t| t.meta().smallest_key.as_slice() > pointer)
        .unwrap_or(0);
    let mut best: Option<(usize, u64)> = None;
    for i in (start..tables.len()).chain(0..start) {
        let m = tables[i].meta();
        let overlap = level_bytes(overlapping_slice(next, &m.smallest_key, &m.largest_key));
        let better = best.is_none_or(|(b, b_overlap)| {
            // overlap / size < b_overlap / b_size, without division.
            let lhs = u128::from(overlap) * u128::from(tables[b].meta().file_size.max(1));
            let rhs = u128::from(b_overlap) * u128::from(m.file_size.max(1));
            lhs.cmp(&rhs) == Ordering::Less
        });
        if better {
            best = Some((i, overlap));
        }
    }
    best.map(|(i, _)| i)
}

/// The tables of a sorted level (disjoint, by smallest key) that meet
/// `[smallest, largest]`: a contiguous run, found by binary search.
pub(super) fn overlapping_slice<'a, T: TableRef>(
    tables: &'a [T],
    smallest: &[u8],
    largest: &[u8],
) -> &'a [T] {
    let from = tables.partition_point(|t| t.meta().largest_key.as_slice() < smallest);
    let to = tables.partition_point(|t| t.meta().smallest_key.as_slice() <= largest);
    &tables[from..to.max(from)]
}

/// A compaction of every table into the deepest level in use (at least L1).
pub(crate) fn pick_all<T: TableRef + Clone>(levels: &[Vec<T>]) -> Option<Compaction<T>> {
    let deepest = (1..levels.len()).rev().find(|&l| !levels[l].is_empty());
    let output_level = deepest.unwrap_or(1);
    let inputs: Vec<T> = levels[..output_level].iter().flatten().cloned().collect();
    let overlapping = levels.get(output_level).cloned().unwrap_or_default();
    if inputs.is_empty() && overlapping.is_empty() {
        return None;
    }
    Some(Compaction {
        level: 0,
        inputs,
        output_level,
        overlapping,
        deeper: DeeperRanges::none(),
        grandparents: Vec::new(),
        next_pointer: None,
        trivial_move: false,
        bottom_cleanup: false,
    })
}

/// Adds the overlapping tables of `output_level` and the ranges below it.
/// The inputs move without a merge only if each, with the tables below the
/// output level it meets, stays within `max_compaction_bytes` (RocksDB's
/// `Compaction::IsTrivialMove`): a table over far more of the level below
/// is rewritten instead, its outputs cut to line up with that level, so
/// merging it down later does not rewrite that whole span at once.
pub(super) fn expand<T: TableRef + Clone>(
    levels: &[Vec<T>],
    level: usize,
    inputs: Vec<T>,
    output_level: usize,
    next_pointer: Option<Vec<u8>>,
    max_compaction_bytes: u64,
) -> Compaction<T> {
    let next_level = match key_range(&inputs) {
        Some((smallest, largest)) => overlapping(&levels[output_level], smallest, largest),
        None => Vec::new(),
    };
    let all: Vec<&T> = inputs.iter().chain(&next_level).collect();
    let range = key_range(all.iter().copied());
    let grandparents = match (range, levels.get(output_level + 1)) {
        (Some((smallest, largest)), Some(tables)) => overlapping_slice(tables, smallest, largest)
            .iter()
            .map(|t| {
                let m = t.meta();
                TableSpan {
                    smallest: m.smallest_key.clone(),
                    largest: m.largest_key.clone(),
                    file_size: m.file_size,
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    let deeper = match range {
        Some((smallest, largest)) => deeper_ranges(levels, output_level, smallest, largest),
        None => DeeperRanges::none(),
    };
    let below_output = levels.get(output_level + 1).map_or(&[][..], Vec::as_slice);
    let trivial_move = next_level.is_empty()
        && pairwise_disjoint(&inputs)
        && inputs.iter().all(|t| {
            let m = t.meta();
            let grandparents = overlapping_slice(below_output, &m.smallest_key, &m.largest_key);
            m.file_size.saturating_add(level_bytes(grandparents)) <= max_compaction_bytes
        });
    Compaction {
        level,
        inputs,
        output_level,
        overlapping: next_level,
        deeper,
        grandparents,
        next_pointer,
        trivial_move,
        bottom_cleanup: false,
    }
}

/// Whether a table below `level` meets `[smallest, largest]`: exactly when
/// `deeper_ranges(levels, level, ..)` is not empty, without building it.
pub(super) fn meets_deeper<T: TableRef>(
    levels: &[Vec<T>],
    level: usize,
    smallest: &[u8],
    largest: &[u8],
) -> bool {
    levels[level + 1..]
        .iter()
        .any(|tables| !overlapping_slice(tables, smallest, largest).is_empty())
}

/// The key ranges of the tables below `output_level` that meet
/// `[smallest, largest]`: what decides, key by key, whether a tombstone
/// written at `output_level` hides anything (`BaseLevelCheck`).
fn deeper_ranges<T: TableRef>(
    levels: &[Vec<T>],
    output_level: usize,
    smallest: &[u8],
    largest: &[u8],
) -> DeeperRanges {
    DeeperRanges::new(
        levels[output_level + 1..]
            .iter()
            .map(|tables| {
                overlapping_slice(tables, smallest, largest)
                    .iter()
                    .map(|t| {
                        let m = t.meta();
                        (m.smallest_key.clone(), m.largest_key.clone())
                    })
                    .collect()
            })
            .collect(),
    )
}

/// No two of `tables` share a key, so they can sit in one sorted level.
fn pairwise_disjoint<T: TableRef>(tables: &[T]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8])> = tables
        .iter()
        .map(|t| {
            (
                t.meta().smallest_key.as_slice(),
                t.meta().largest_key.as_slice(),
            )
        })
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// The smallest and largest user key over `tables`.
fn key_range<'a, T: TableRef + 'a>(
    tables: impl IntoIterator<Item = &'a T>,
) -> Option<(&'a [u8], &'a [u8])> {
    tables.into_iter().fold(None, |range, t| {
        let m = t.meta();
        let (s, l) = (m.smallest_key.as_slice(), m.largest_key.as_slice());
        Some(match range {
            None => (s, l),
            Some((rs, rl)) => (rs.min(s), rl.max(l)),
        })
    })
}

/// Tables of one level whose key range meets `[smallest, largest]`.
pub(crate) fn overlapping<T: TableRef + Clone>(
    tables: &[T],
    smallest: &[u8],
    largest: &[u8],
) -> Vec<T> {
    tables
        .iter()
        .filter(|t| {
            let m = t.meta();
            m.smallest_key.as_slice() <= largest && m.largest_key.as_slice() >= smallest
        })
        .cloned()
        .collect()
}
