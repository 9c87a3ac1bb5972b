//! Bottommost cleanups (RocksDB's "bottommost files marked for
//! compaction", `VersionStorageInfo::ComputeBottommostFilesMarkedForCompaction`):
//! the lowest-priority pick, a pure function of the tree.
//!
//! Tombstones and shadowed versions can stay in a table for good: a trivial
//! move carries them into a level with nothing below; a merge into the
//! bottom keeps what a live snapshot could see; and nothing rewrites that
//! table later unless new data comes to overlap it. A deleted key then
//! keeps its filter entry, so every `get` of it reads a data block, and its
//! bytes are never reclaimed. A cleanup rewrites such a table alone into
//! its own level, keeping only what a bottom merge keeps.

use super::pick::{Compaction, DeeperRanges, TableRef, meets_deeper};

/// The table to clean up, or `None`. Asked only when no level needs a
/// size-based or L0 compaction.
///
/// A candidate is a table of L1 or deeper
/// - with no table of any deeper level meeting its key range (no range a
///   merge into its level decides tombstones by, `pick::deeper_ranges`),
///   so every tombstone in it hides nothing and may go;
/// - with `garbage(table) > 0`: tombstones, or more entries than distinct
///   keys (shadowed versions), by its properties; the caller returns 0 for
///   a table it knows a rewrite would not shrink (no loop);
/// - whose largest sequence is at or below `oldest_snapshot` (every
///   snapshot sees only each key's newest version in it), or any when no
///   snapshot is live.
///
/// Then the rewrite keeps exactly each key's newest version unless it is a
/// tombstone: it drops at least one entry. Among candidates the one with
/// the most garbage goes; ties to the shallower level, then the smaller
/// key. L0 is left to its own trigger: its tables are ordered by sequence
/// and go down whole.
pub(crate) fn pick_bottom_cleanup<T: TableRef + Clone>(
    levels: &[Vec<T>],
    oldest_snapshot: Option<u64>,
    garbage: impl Fn(&T) -> u64,
) -> Option<Compaction<T>> {
    let mut best: Option<(usize, &T, u64)> = None;
    for (level, tables) in levels.iter().enumerate().skip(1) {
        for t in tables {
            let m = t.meta();
            if oldest_snapshot.is_some_and(|s| m.largest_seq > s) {
                continue;
            }
            let g = garbage(t);
            if g == 0 || best.is_some_and(|(_, _, b)| b >= g) {
                continue;
            }
            if !meets_deeper(levels, level, &m.smallest_key, &m.largest_key) {
                best = Some((level, t, g));
            }
        }
    }
    let (level, t, _) = best?;
    Some(Compaction {
        level,
        inputs: vec![t.clone()],
        output_level: level,
        overlapping: Vec::new(),
        deeper: DeeperRanges::none(),
        grandparents: Vec::new(),
        next_pointer: None,
        trivial_move: false,
        bottom_cleanup: true,
    })
}
