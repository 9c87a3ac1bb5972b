//! Read-path and write-path counters, updated with relaxed atomics on the
//! hot paths and read by `Db::stats` (docs/DESIGN.md, "Stats").
//!
//! Per filter probe of a key really absent from that table: a *negative*
//! (filter said no: a read saved) or a *false positive* (filter said maybe,
//! block read, key not there). For a key present: a *true positive*.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bloomlsm_sstable::{BlockSource, FilterVerdict, Lookup};

/// Write-path counters of one level, updated with relaxed atomics (a
/// few per table written: never contended enough to matter).
#[derive(Debug, Default)]
pub(crate) struct LevelCounters {
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

/// Read-path counters of one level in one stripe (see [`ReadCounters`]).
/// A probe adds to exactly one verdict's counter, and the level's probes
/// are those counters' sum ([`ReadCounters::level`]), not a counter of
/// their own: `Db::stats` reads the counters one after another while
/// gets go on, and a separate probe count read before the verdicts (or
/// after) disagreed with their sum by the probes recorded in between
/// (thousands in a snapshot beside four readers,
/// `engine/tests/engine_suite/stats_beside_readers.rs`).
#[derive(Debug, Default)]
pub(crate) struct LevelReadCounters {
    negatives: AtomicU64,
    true_positives: AtomicU64,
    false_positives: AtomicU64,
    no_filter_probes: AtomicU64,
    blocks_from_file: AtomicU64,
    cache_hits: AtomicU64,
}

impl LevelReadCounters {
    pub(crate) fn record(&self, lookup: &Lookup) {
        let verdict = lookup.verdict();
        if verdict == FilterVerdict::NotAsked {
            return;
        }
        let counter = match verdict {
            FilterVerdict::Negative => &self.negatives,
            FilterVerdict::TruePositive => &self.true_positives,
            FilterVerdict::FalsePositive => &self.false_positives,
            FilterVerdict::NoFilter | FilterVerdict::NotAsked => &self.no_filter_probes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // Release, after the verdict: a block counted is read (Acquire,
        // first) with its verdict (`ReadCounters::level`).
        match lookup.block {
            Some(BlockSource::File) => self.blocks_from_file.fetch_add(1, Ordering::Release),
            Some(BlockSource::Cache) => self.cache_hits.fetch_add(1, Ordering::Release),
            None => 0,
        };
    }
}

/// One level's read counters summed over the stripes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LevelReadTotals {
    pub(crate) probes: u64,
    pub(crate) negatives: u64,
    pub(crate) true_positives: u64,
    pub(crate) false_positives: u64,
    pub(crate) no_filter_probes: u64,
    pub(crate) blocks_from_file: u64,
    pub(crate) cache_hits: u64,
}

/// `T` alone on its cache lines (128 bytes: x86 processors fetch lines in
/// adjacent pairs), so that threads writing two of them never contend.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(T);

/// The read counters of the threads that map to one stripe.
#[derive(Debug)]
pub(crate) struct ReadStripe {
    pub(crate) gets: AtomicU64,
    pub(crate) memtable_hits: AtomicU64,
    levels: Box<[Padded<LevelReadCounters>]>,
}

impl ReadStripe {
    /// The counters of `level`. REQUIRES: `level` is below the store's levels.
    pub(crate) fn level(&self, level: usize) -> &LevelReadCounters {
        &self.levels[level].0
    }
}

/// Stripes of read counters. Every get adds to a few counters (the get,
/// each table probed and its verdict and block); with one shared copy,
/// readers on different cores took turns owning those cache lines, and a
/// second reader thread added no throughput (under `perf`, the locked
/// increments were half of `get`'s samples with two threads). Each thread
/// adds to its own stripe, picked once per thread; `Db::stats` sums them.
/// Threads beyond the stripes share them, which costs speed, never counts.
#[derive(Debug)]
pub(crate) struct ReadCounters {
    stripes: Box<[Padded<ReadStripe>]>,
}

/// Stripes per store: more than the reader threads a machine runs at once
/// in most deployments; a power of two, so a thread's pick is a mask.
const STRIPES: usize = 16;

/// The stripe this thread uses in every store: threads are numbered in
/// the order they first read, so concurrent readers land on different
/// stripes.
fn thread_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl ReadCounters {
    fn new(levels: usize) -> Self {
        let stripe = || {
            Padded(ReadStripe {
                gets: AtomicU64::new(0),
                memtable_hits: AtomicU64::new(0),
                levels: (0..levels).map(|_| Padded::default()).collect(),
            })
        };
        Self {
            stripes: (0..STRIPES).map(|_| stripe()).collect(),
        }
    }

    /// The calling thread's stripe.
    #[inline]
    pub(crate) fn mine(&self) -> &ReadStripe {
        &self.stripes[thread_stripe()].0
    }

    /// One counter summed over the stripes. Acquire: a counter added to
    /// with Release (`memtable_hits`, blocks) makes what its thread counted
    /// before visible to the sums read after it (`gets_and_memtable_hits`,
    /// `level`); the
    /// others gain nothing from it and lose nothing (stats are read
    /// rarely, never on the get path).
    fn sum(&self, f: impl Fn(&ReadStripe) -> &AtomicU64) -> u64 {
        self.stripes
            .iter()
            .map(|s| f(&s.0).load(Ordering::Acquire))
            .fold(0, u64::wrapping_add)
    }

    pub(crate) fn gets(&self) -> u64 {
        self.sum(|s| &s.gets)
    }

    /// `(gets, memtable_hits)` with hits at most gets in every reading,
    /// whatever gets run meanwhile: a get counts itself in its stripe's
    /// `gets` before it can add a hit there (with Release), and the hits
    /// are read first (with Acquire), so each hit read has its get in the
    /// `gets` read after it.
    pub(crate) fn gets_and_memtable_hits(&self) -> (u64, u64) {
        let hits = self.sum(|s| &s.memtable_hits);
        (self.gets(), hits)
    }

    /// `level`'s counters over every stripe. REQUIRES: `level` is below
    /// the store's levels. Invariants, whatever gets run meanwhile:
    /// `probes` is the sum of the four verdicts read here (each probe has
    /// exactly one); `blocks_from_file + cache_hits` is at most the
    /// verdicts that search a block (true and false positives, probes
    /// without filter), as each block is added after its verdict with
    /// Release and the blocks are read first (equal when no get runs).
    pub(crate) fn level(&self, level: usize) -> LevelReadTotals {
        let sum = |f: fn(&LevelReadCounters) -> &AtomicU64| self.sum(|s| f(s.level(level)));
        let (blocks_from_file, cache_hits) = (sum(|l| &l.blocks_from_file), sum(|l| &l.cache_hits));
        let (negatives, true_positives, false_positives, no_filter_probes) = (
            sum(|l| &l.negatives),
            sum(|l| &l.true_positives),
            sum(|l| &l.false_positives),
            sum(|l| &l.no_filter_probes),
        );
        LevelReadTotals {
            probes: negatives
                .wrapping_add(true_positives)
                .wrapping_add(false_positives)
                .wrapping_add(no_filter_probes),
            negatives,
            true_positives,
            false_positives,
            no_filter_probes,
            blocks_from_file,
            cache_hits,
        }
    }
}

/// Store-wide counters.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Gets, memtable hits and each level's probes, striped by thread.
    pub(crate) reads: ReadCounters,
    pub(crate) levels: Vec<LevelCounters>,
    pub(crate) flushes: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) trivial_moves: AtomicU64,
    /// Bottommost cleanups (also counted in `compactions`).
    pub(crate) bottom_cleanups: AtomicU64,
    /// Deletion-triggered compactions picked (each also counted as a
    /// compaction or a trivial move).
    pub(crate) deletion_compactions: AtomicU64,
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
            reads: ReadCounters::new(levels),
            levels: (0..levels).map(|_| LevelCounters::default()).collect(),
            flushes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            trivial_moves: AtomicU64::new(0),
            bottom_cleanups: AtomicU64::new(0),
            deletion_compactions: AtomicU64::new(0),
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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn stripes_sum_to_every_thread_s_counts_also_past_the_stripes() {
        let reads = ReadCounters::new(3);
        let threads = STRIPES + 5; // some threads share a stripe
        std::thread::scope(|scope| {
            for t in 0..threads {
                let reads = &reads;
                scope.spawn(move || {
                    for _ in 0..1000 {
                        let mine = reads.mine();
                        mine.gets.fetch_add(1, Ordering::Relaxed);
                        mine.memtable_hits.fetch_add(t as u64, Ordering::Relaxed);
                        mine.level(2).negatives.fetch_add(2, Ordering::Relaxed);
                        mine.level(0).cache_hits.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        let n = threads as u64;
        assert_eq!(reads.gets(), 1000 * n);
        assert_eq!(reads.gets_and_memtable_hits().1, 1000 * (n * (n - 1) / 2));
        assert_eq!(reads.level(2).negatives, 2000 * n);
        assert_eq!(reads.level(2).probes, 2000 * n);
        assert_eq!(reads.level(0).cache_hits, 1000 * n);
        assert_eq!(reads.level(1), LevelReadTotals::default());
    }

    #[test]
    fn each_stripe_has_lines_of_its_own() {
        let reads = ReadCounters::new(2);
        let addr = |i: usize| std::ptr::from_ref(&reads.stripes[i].0) as usize;
        assert_eq!(addr(1) - addr(0), std::mem::size_of::<Padded<ReadStripe>>());
        assert_eq!(std::mem::align_of::<Padded<ReadStripe>>(), 128);
        let level = |i: usize, l: usize| std::ptr::from_ref(reads.stripes[i].0.level(l)) as usize;
        assert_eq!(level(0, 0) % 128, 0);
        assert!(level(0, 1) - level(0, 0) >= 128);
    }
}
