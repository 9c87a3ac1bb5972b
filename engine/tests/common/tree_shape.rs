//! The shape a closed store's manifest describes, checked against what
//! every tree must be, whatever options wrote it: each table within
//! `num_levels`, L0's sequence ranges disjoint, every deeper level's
//! tables sorted with ordered bounds and sharing no key.

use super::{Record, read_manifest};

/// What [`check_tree_shape`] found of a valid tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeShape {
    /// The fewest levels the tree allows (its deepest level holding a
    /// table, plus one).
    pub fewest_levels: usize,
    /// Levels holding at least one table.
    pub levels_in_use: usize,
}

/// Checks the tree of the closed store in `dir` (`at` names the moment in
/// a failure message).
pub fn check_tree_shape(dir: &std::path::Path, num_levels: usize, at: &str) -> TreeShape {
    let m = read_manifest(dir);
    let mut by_level: Vec<Vec<&Record>> = vec![Vec::new(); num_levels];
    for t in &m.tables {
        assert!(
            (t.level as usize) < num_levels,
            "{at}: table at L{}",
            t.level
        );
        by_level[t.level as usize].push(t);
    }
    let mut l0: Vec<_> = by_level[0]
        .iter()
        .map(|t| (t.numbers[3], t.numbers[4]))
        .collect();
    l0.sort();
    for w in l0.windows(2) {
        assert!(w[0].1 < w[1].0, "{at}: L0 sequence ranges {w:?} overlap");
    }
    for (level, tables) in by_level.iter_mut().enumerate().skip(1) {
        tables.sort_by(|a, b| a.keys[0].cmp(&b.keys[0]));
        for w in tables.windows(2) {
            assert!(
                w[0].keys[1] < w[1].keys[0],
                "{at}: L{level} tables {} and {} overlap",
                w[0].numbers[0],
                w[1].numbers[0]
            );
        }
        for t in tables.iter() {
            assert!(t.keys[0] <= t.keys[1], "{at}: L{level} table range");
        }
    }
    TreeShape {
        fewest_levels: by_level.iter().rposition(|l| !l.is_empty()).unwrap_or(0) + 1,
        levels_in_use: by_level.iter().filter(|l| !l.is_empty()).count(),
    }
}
