//! Deletion-triggered compactions (RocksDB's `CompactOnDeletionCollector`
//! with a deletion ratio): the pick after the size-driven one, a pure
//! function of the tree.
//!
//! A tombstone hides its key's older versions only until a merge carries
//! it down to them: then both go (at the deepest level holding the key,
//! with no snapshot needing the value). Until then every `get` of the
//! deleted key finds the tombstone's filter entry and reads a data block,
//! and a scan steps over it. Size-driven compactions move a level's tables
//! down only when the level is over its budget, so a table full of
//! tombstones over older data can wait indefinitely in a store whose
//! deletes do not grow it (deletes shrink it). This pick moves such a
//! table down a level.

use super::pick::{
    Compaction, TableRef, base_level, expand, l0_into_base, max_compaction_bytes, meets_deeper,
};
use crate::options::Options;

/// What the pick reads of a table: its tombstones and entries (from its
/// properties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deletions {
    pub(crate) tombstones: u64,
    pub(crate) entries: u64,
}

/// The table to merge into the next level for its tombstones, or `None`.
/// Asked only when no level needs a size-based or L0 compaction.
///
/// A candidate is a table of any level but the last
/// - whose tombstones are at least `ratio` of its entries (`ratio` in
///   `(0, 1]`, so a candidate holds at least one tombstone);
/// - with a table of a deeper level meeting its key range (something its
///   tombstones may hide; a table with nothing below is the bottommost
///   cleanup's, `cleanup.rs`).
///
/// Among candidates the one with the most tombstones goes; ties to the
/// shallower level, then the smaller key. An L0 table takes all of L0
/// into the base level, as the L0 trigger does (L0 tables overlap, and
/// newer ones may not go below older ones): the last deletes of a load
/// sit in L0 tables too few to reach the trigger. A table of L1 or deeper
/// is merged into the next level like any size-driven pick
/// (`pick::expand`), with the tables of that level it meets; with none,
/// moved by a manifest edit, unless it and the tables it meets two levels
/// down pass `max_compaction_bytes` (then rewritten alone, its outputs cut
/// to line up with those).
///
/// Terminates: each pick moves the chosen tables' entries down, and
/// nothing moves entries up, so without new writes there are finitely
/// many picks; a table in the deepest level holding data is never a
/// candidate.
pub(crate) fn pick_deletion_compaction<T: TableRef + Clone>(
    levels: &[Vec<T>],
    options: &Options,
    ratio: f64,
    deletions: impl Fn(&T) -> Deletions,
) -> Option<Compaction<T>> {
    let mut best: Option<(usize, &T, u64)> = None;
    for (level, tables) in levels.iter().enumerate() {
        if level + 1 >= levels.len() {
            break;
        }
        for t in tables {
            let d = deletions(t);
            if d.tombstones == 0
                || (d.tombstones as f64) < ratio * d.entries as f64
                || best.is_some_and(|(_, _, b)| b >= d.tombstones)
            {
                continue;
            }
            let m = t.meta();
            if meets_deeper(levels, level, &m.smallest_key, &m.largest_key) {
                best = Some((level, t, d.tombstones));
            }
        }
    }
    let (level, t, _) = best?;
    if level == 0 {
        return Some(l0_into_base(levels, base_level(levels, options), options));
    }
    Some(expand(
        levels,
        level,
        vec![t.clone()],
        level + 1,
        None,
        max_compaction_bytes(options),
    ))
}
