//! Byte budgets of the levels below L0, and the level L0 compacts into.
//!
//! Static budgets: L0 goes to L1, L1's budget is `l1_bytes`, each next level
//! `level_size_ratio` times larger. Dynamic budgets
//! (`Options::dynamic_level_bytes`, RocksDB's
//! `level_compaction_dynamic_level_bytes`): the budgets are set from the
//! LAST level's actual size down, each level `level_size_ratio` times
//! smaller than the one below, and L0 compacts into the *base level*, the
//! shallowest level whose budget is still at least `l1_bytes /
//! level_size_ratio`; the levels above it stay empty. A small store then has
//! one sorted level (the last), not a chain of nearly empty ones each
//! rewritten on the way down, so most data is written once per level it
//! really needs.

use crate::options::Options;

/// Where L0 goes and what each level may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LevelTargets {
    /// The level L0 compacts into (>= 1). Invariant: every level between
    /// L1 and it is empty.
    pub(crate) base_level: usize,
    /// Byte budget per level; `u64::MAX` for L0 and the levels above the
    /// base level (never compacted by size).
    pub(crate) budgets: Vec<u64>,
}

/// The targets of a tree whose levels hold `level_bytes` (L0 included,
/// ignored). REQUIRES: `level_bytes.len() == options.num_levels >= 2`.
pub(crate) fn level_targets(level_bytes: &[u64], options: &Options) -> LevelTargets {
    let levels = level_bytes.len();
    let mut budgets = vec![u64::MAX; levels];
    if !options.dynamic_level_bytes {
        for (level, budget) in budgets.iter_mut().enumerate().skip(1) {
            *budget = options.level_budget(level);
        }
        return LevelTargets {
            base_level: 1,
            budgets,
        };
    }
    let last = levels - 1;
    let ratio = options.level_size_ratio.max(2);
    let base_max = options.l1_bytes.max(1);
    let base_min = (base_max / ratio).max(1);
    let Some(first_non_empty) = (1..levels).find(|&l| level_bytes[l] > 0) else {
        // An empty tree: L0 goes straight to the last level.
        budgets[last] = base_max;
        return LevelTargets {
            base_level: last,
            budgets,
        };
    };
    let max_level_bytes = level_bytes[1..].iter().copied().max().unwrap_or(0);
    // The size the first non-empty level would get if the last level's
    // budget were the largest level's size.
    let mut size = max_level_bytes;
    for _ in first_non_empty..last {
        size /= ratio;
    }
    let mut base_level = first_non_empty;
    let base_size = if size <= base_min {
        base_min + 1
    } else {
        while base_level > 1 && size > base_max {
            base_level -= 1;
            size /= ratio;
        }
        size.min(base_max)
    };
    let mut budget = base_size;
    for (level, slot) in budgets.iter_mut().enumerate().skip(base_level) {
        if level > base_level {
            budget = budget.saturating_mul(ratio);
        }
        // No level's budget below `l1_bytes` (RocksDB: otherwise the tree
        // can take an hourglass shape, deeper levels smaller than L0).
        *slot = budget.max(base_max);
    }
    LevelTargets {
        base_level,
        budgets,
    }
}
