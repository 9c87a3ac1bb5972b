//! The store's shape: a deep tree of narrow tables (tiny memtables, tables
//! and level budgets, size ratio 2), and the filter policies rebuilds
//! switch between.

use bloomlsm::{FilterKind, FilterPolicy, Options, SyncMode};

use super::rng::Mix;

/// Options of a deep narrow store: about 1 KiB tables, L1 at 2 KiB, each
/// level twice the one above, so a few thousand live keys fill 5 or more
/// levels below L0.
pub fn deep_options(
    kind: FilterKind,
    sync: SyncMode,
    deletion_compaction_ratio: Option<f64>,
    background_work: bool,
) -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 6.0 },
        filter_kind: kind,
        block_size: 128,
        memtable_bytes: 2048,
        max_immutable_memtables: 1,
        block_cache_bytes: 16 << 10,
        sync,
        l0_compaction_trigger: 2,
        l1_bytes: 2048,
        level_size_ratio: 2,
        num_levels: 8,
        target_file_bytes: 1024,
        background_work,
        deletion_compaction_ratio,
        ..Options::default()
    }
}

/// One of the filter kinds tables can have.
pub fn kind(rng: &mut Mix) -> FilterKind {
    [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ][rng.below(3) as usize]
}

/// A filter policy for `rebuild_filters`: uniform (none, under the
/// 1-bit floor, or usual), per level (some levels without), or optimized.
pub fn policy(rng: &mut Mix) -> FilterPolicy {
    let bits = [0.0, 0.5, 1.0, 2.5, 6.0, 10.0, 16.0][rng.below(7) as usize];
    match rng.below(3) {
        0 => FilterPolicy::Uniform { bits_per_key: bits },
        1 => FilterPolicy::PerLevel(
            (0..1 + rng.below(6))
                .map(|_| [0.0, 0.7, 2.0, 5.0, 9.0, 14.0][rng.below(6) as usize])
                .collect(),
        ),
        _ => FilterPolicy::Optimized { bits_per_key: bits },
    }
}

/// Levels below L0 holding tables now.
pub fn sorted_levels_in_use(db: &bloomlsm::Db) -> usize {
    db.stats()
        .levels
        .iter()
        .skip(1)
        .filter(|l| l.tables > 0)
        .count()
}
