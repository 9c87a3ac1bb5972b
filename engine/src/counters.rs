//! Read-path and write-path counters, updated with relaxed atomics on the
//! hot paths and read by `Db::stats` (docs/DESIGN.md, "Stats").
//!
//! Per filter probe of a key really absent from that table: a *negative*
//! (filter said no: a read saved) or a *false positive* (filter said maybe,
//! block read, key not there). For a key present: a *true positive*.

use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm_sstable::{BlockSource, FilterVerdict, Lookup};

/// Counters of one level, updated with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct LevelCounters {
    pub(crate) probes: AtomicU64,
    pub(crate) negatives: AtomicU64,
    pub(crate) true_positives: AtomicU64,
    pub(crate) false_positives: AtomicU64,
    pub(crate) no_filter_probes: AtomicU64,
    pub(crate) blocks_from_file: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    /// Bytes of tables written into this level (flush, compaction, filter
    /// rebuild).
    pub(crate) bytes_written: AtomicU64,
    /// Bytes of this level's tables read by compactions, as inputs from
    /// this level or as overlapping tables of the output level.
    pub(crate) bytes_compacted_read: AtomicU64,
    /// Bytes of tables moved into this level by a manifest edit alone.
    pub(crate) bytes_moved_in: AtomicU64,
    /// Writes of tables into this level: flushes (L0) or compaction merges
    /// whose output level this is (trivial moves and rebuilds not counted).
    pub(crate) writes_into: AtomicU64,
}

impl LevelCounters {
    pub(crate) fn record(&self, lookup: &Lookup) {
        let verdict = lookup.verdict();
        if verdict == FilterVerdict::NotAsked {
            return;
        }
        self.probes.fetch_add(1, Ordering::Relaxed);
        let counter = match verdict {
            FilterVerdict::Negative => &self.negatives,
            FilterVerdict::TruePositive => &self.true_positives,
            FilterVerdict::FalsePositive => &self.false_positives,
            FilterVerdict::NoFilter | FilterVerdict::NotAsked => &self.no_filter_probes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        match lookup.block {
            Some(BlockSource::File) => self.blocks_from_file.fetch_add(1, Ordering::Relaxed),
            Some(BlockSource::Cache) => self.cache_hits.fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
    }
}

/// Store-wide counters.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) gets: AtomicU64,
    pub(crate) memtable_hits: AtomicU64,
    pub(crate) levels: Vec<LevelCounters>,
    pub(crate) flushes: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) trivial_moves: AtomicU64,
    /// Bottommost cleanups (also counted in `compactions`).
    pub(crate) bottom_cleanups: AtomicU64,
    pub(crate) filters_built: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) bytes_compacted_read: AtomicU64,
    pub(crate) write_stalls: AtomicU64,
    /// Tables whose filter was rebuilt because their level's budget moved.
    pub(crate) filters_rebalanced: AtomicU64,
}

impl Counters {
    pub(crate) fn new(levels: usize) -> Self {
        Self {
            gets: AtomicU64::new(0),
            memtable_hits: AtomicU64::new(0),
            levels: (0..levels).map(|_| LevelCounters::default()).collect(),
            flushes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            trivial_moves: AtomicU64::new(0),
            bottom_cleanups: AtomicU64::new(0),
            filters_built: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            bytes_compacted_read: AtomicU64::new(0),
            write_stalls: AtomicU64::new(0),
            filters_rebalanced: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
