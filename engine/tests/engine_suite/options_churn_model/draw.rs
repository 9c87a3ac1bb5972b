//! The options a user may legally change between two opens of one store,
//! drawn at random: every field of `Options` but none that the store's
//! own state forbids (`num_levels` never below the deepest table's level
//! plus one here; `refusals` draws the options an open must refuse).

use crate::common::Rng;

use bloomlsm::{CorruptFilterPolicy, FilterKind, FilterPolicy, Options, SyncMode, WalRecovery};

/// Bits per key: none, below the one-bit floor (no filter), at and just
/// past it, fractional, the default, large, the most a policy accepts.
pub fn bits(rng: &mut Rng) -> f64 {
    *rng.pick(&[
        0.0, 0.4, 0.99, 1.0, 1.01, 1.3, 2.0, 3.7, 4.5, 6.25, 9.9, 10.0, 14.3, 23.7, 50.0, 100.0,
    ])
}

pub fn policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(6) {
        0 | 1 => FilterPolicy::Uniform {
            bits_per_key: bits(rng),
        },
        2 => FilterPolicy::PerLevel((0..1 + rng.below(8)).map(|_| bits(rng)).collect()),
        _ => FilterPolicy::Optimized {
            bits_per_key: bits(rng),
        },
    }
}

pub fn kind(rng: &mut Rng) -> FilterKind {
    *rng.pick(&[
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ])
}

/// How background work runs in a run: always inline, always on the
/// background threads, or drawn at each open.
#[derive(Clone, Copy, Debug)]
pub enum Work {
    Inline,
    Background,
    Mixed,
}

/// New options for the next open of a store whose deepest table sits at
/// level `min_levels - 1`: a deep tree of narrow tables (tiny memtables,
/// tables and L1, small size ratios) of at most `levels_cap` levels (or
/// `min_levels`), with every other field drawn anew.
/// `direct_ok`: the scratch directory serves `O_DIRECT`.
pub fn options(
    rng: &mut Rng,
    work: Work,
    direct_ok: bool,
    min_levels: usize,
    levels_cap: usize,
) -> Options {
    let l0_compaction_trigger = 1 + rng.below(4) as usize;
    let l0_slowdown_trigger = l0_compaction_trigger + rng.below(4) as usize;
    let l0_stop_trigger = l0_slowdown_trigger + rng.below(5) as usize;
    // Now and then the floor of every size: each write its own memtable,
    // each entry its own table.
    let tiny = rng.below(12) == 0;
    let size = |rng: &mut Rng, sizes: &[u64]| if tiny { 1 } else { *rng.pick(sizes) };
    let memtable_bytes = size(rng, &[256, 512, 1024, 2048, 4096]) as usize;
    let target_file_bytes = size(rng, &[128, 256, 512, 1024, 2048]);
    let l1_bytes = size(rng, &[256, 512, 1024, 2048, 4096]);
    let background_work = match work {
        Work::Inline => false,
        Work::Background => true,
        Work::Mixed => rng.below(2) == 0,
    };
    Options {
        filter_policy: policy(rng),
        filter_kind: kind(rng),
        block_size: *rng.pick(&[64, 65, 100, 128, 256, 511, 1024, 4096]),
        memtable_bytes,
        max_immutable_memtables: 1 + rng.below(3) as usize,
        block_cache_bytes: *rng.pick(&[0, 1, 4096, 1 << 20]),
        sync: *rng.pick(&[SyncMode::Never, SyncMode::Always]),
        wal_recovery: *rng.pick(&[WalRecovery::TolerateTornTail, WalRecovery::PointInTime]),
        l0_compaction_trigger,
        l0_slowdown_trigger,
        l0_stop_trigger,
        l1_bytes,
        dynamic_level_bytes: rng.below(3) != 0,
        level_size_ratio: *rng.pick(&[2, 2, 3, 4, 10]),
        // Now and then exactly as many as the tree needs: its deepest
        // level becomes the last, where tombstones go. Never more than the
        // run's cap: with dynamic budgets a store's first tables go to the
        // last level, and no open can take it back to fewer.
        num_levels: if rng.below(4) == 0 {
            min_levels.max(3)
        } else {
            (5 + rng.below(6) as usize).clamp(min_levels, levels_cap.max(min_levels))
        },
        target_file_bytes,
        // Now and then under the longest keys and values the run writes:
        // their puts are refused (`Error::InvalidKey`, `ValueTooLarge`),
        // while the keys already stored stay readable and deletable.
        max_key_bytes: if rng.below(10) == 0 {
            *rng.pick(&[10, 16])
        } else {
            65536
        },
        max_value_bytes: if rng.below(10) == 0 {
            40
        } else {
            *rng.pick(&[16 << 20, 64 << 20])
        },
        on_corrupt_filter: *rng.pick(&[
            CorruptFilterPolicy::Ignore,
            CorruptFilterPolicy::Fail,
            CorruptFilterPolicy::Rebuild,
        ]),
        background_work,
        use_direct_reads: direct_ok && rng.below(4) == 0,
        max_open_files: *rng.pick(&[None, None, Some(1), Some(2), Some(16)]),
        deletion_compaction_ratio: *rng.pick(&[None, None, Some(0.25), Some(1.0)]),
    }
}
