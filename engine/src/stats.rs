//! `Db::stats`: the live tables' figures beside the counters, per level
//! (docs/DESIGN.md, "Stats: words with one meaning"). Observed FPR = false
//! positives / (false positives + negatives).

use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm_filter::Filter;
use bloomlsm_sstable::FilterStatus;

use crate::counters::{LevelCounters, LevelReadTotals};
use crate::inner::DbInner;

/// Read-path figures of one level (or of all levels).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Tables in the level.
    pub tables: u64,
    /// Entries in its tables.
    pub entries: u64,
    /// Tombstones among them (from the tables' properties).
    pub tombstones: u64,
    /// Bytes of its tables (each up to the size its manifest record says).
    pub file_bytes: u64,
    /// Of `file_bytes`, those that filter rebuilds in place left unused
    /// (replaced filters, properties blocks and footers; at most an eighth
    /// of the rest of each table).
    pub unused_bytes: u64,
    /// Heap bytes the loaded filters of the level's live tables hold
    /// (`Filter::memory_bytes`): each filter's bit array, 64-byte blocks
    /// or Ribbon solution as allocated (a solution in whole 64-byte lines,
    /// so up to 48 bytes past its 16-byte segments), exact to the byte for
    /// every kind (`filter/tests/memory_bytes_heap.rs`); not each filter's
    /// fixed-size struct (96 bytes, `size_of::<AnyFilter>()`, a table). The filter budget's
    /// equal-memory promise is stated in this figure, on both sides (the
    /// filters and uniform's, `planning::planned_memory_bytes`). Live
    /// tables are those of the current version: a filter awaiting a retry
    /// of its read counts 0 until loaded, and a filter or table that a
    /// rebuild or compaction replaced counts no more, even while an
    /// iterator or a get still holds it (freed when the last one ends).
    pub filter_bytes: u64,
    /// Filter bits per distinct key in memory.
    pub bits_per_key: f64,
    /// Tables probed (key in range).
    pub table_probes: u64,
    /// Filter said "definitely absent": reads saved.
    pub filter_negatives: u64,
    /// Filter said "maybe" and the key was there.
    pub filter_true_positives: u64,
    /// Filter said "maybe", a block was read, the key was not there.
    pub filter_false_positives: u64,
    /// Probes of tables without a usable filter.
    pub probes_without_filter: u64,
    /// Data blocks read from table files (block cache misses) by gets
    /// that searched them (a get failing at a damaged or unreadable block
    /// counts neither that block nor that table's probe).
    pub data_blocks_read: u64,
    /// Data blocks served by the block cache.
    pub block_cache_hits: u64,
    /// false positives / (false positives + negatives); 0 when undefined.
    pub observed_fpr: f64,
    /// Each filter's expected rate for its kind (the lecture's formula for
    /// a standard filter; docs/DESIGN.md, "theoretical FPR"), weighted by
    /// the filters' keys;
    /// 0 when the level has no usable filter (its probes are then
    /// `probes_without_filter`, each a block searched, not a rate of 0).
    pub theoretical_fpr: f64,
    /// Tables without a usable filter: a damaged filter block, or one whose
    /// read failed, until a lookup's retry of the read succeeds.
    pub tables_without_usable_filter: u64,
    /// Retries of failed filter-block reads that lookups ran on this
    /// level's live tables (each table's count leaves with it when it is
    /// compacted away or rebuilt). A retry that loads the filter counts
    /// too, so a table that now has its filter may show retries.
    pub filter_read_retries: u64,
    /// Bytes of tables written into this level since open: flushes (L0),
    /// compaction outputs and filter rebuilds, including the outputs of a
    /// compaction that then failed (they reached the disk). Over all levels,
    /// the bytes behind write amplification.
    pub bytes_written: u64,
    /// Bytes of this level's tables read by compactions since open (as
    /// inputs from this level or as the output level's overlapping tables).
    pub bytes_compacted_read: u64,
    /// Bytes of tables moved into this level by trivial moves since open
    /// (not read, not written).
    pub bytes_moved_in: u64,
    /// Flushes (L0) or compaction merges into this level since open
    /// (RocksDB's per-level `Comp(cnt)`).
    pub writes_into: u64,
}

impl LevelStats {
    pub(crate) fn fill_counters(&mut self, r: &LevelReadTotals, c: &LevelCounters) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        self.table_probes = r.probes;
        self.filter_negatives = r.negatives;
        self.filter_true_positives = r.true_positives;
        self.filter_false_positives = r.false_positives;
        self.probes_without_filter = r.no_filter_probes;
        self.data_blocks_read = r.blocks_from_file;
        self.block_cache_hits = r.cache_hits;
        self.bytes_written = get(&c.bytes_written);
        self.bytes_compacted_read = get(&c.bytes_compacted_read);
        self.bytes_moved_in = get(&c.bytes_moved_in);
        self.writes_into = get(&c.writes_into);
        self.observed_fpr = ratio(
            self.filter_false_positives,
            self.filter_false_positives
                .saturating_add(self.filter_negatives),
        );
    }

    /// Adds `o`'s sums. The averages (`bits_per_key`, `theoretical_fpr`)
    /// are not sums: the caller sets them from the same weights a level
    /// uses (distinct keys; the filters' keys).
    pub(crate) fn accumulate(&mut self, o: &LevelStats) {
        self.tables += o.tables;
        // Sizes as the manifest records them, each at most its file's,
        // and counts, each at most its table's data bytes: a sparse file
        // may hold 2^63 - 1 bytes, so a crafted store's sums saturate
        // (`stats_crafted_file_sizes.rs`, `stats_crafted_sparse_counts.rs`).
        self.entries = self.entries.saturating_add(o.entries);
        self.tombstones = self.tombstones.saturating_add(o.tombstones);
        self.file_bytes = self.file_bytes.saturating_add(o.file_bytes);
        self.unused_bytes = self.unused_bytes.saturating_add(o.unused_bytes);
        self.filter_bytes = self.filter_bytes.saturating_add(o.filter_bytes);
        // Counters wrap past 2^64 as the atomics they are read from do
        // (`ReadCounters::sum`), in release and debug builds alike.
        let add = |a: &mut u64, b: u64| *a = a.wrapping_add(b);
        add(&mut self.table_probes, o.table_probes);
        add(&mut self.filter_negatives, o.filter_negatives);
        add(&mut self.filter_true_positives, o.filter_true_positives);
        add(&mut self.filter_false_positives, o.filter_false_positives);
        add(&mut self.probes_without_filter, o.probes_without_filter);
        add(&mut self.data_blocks_read, o.data_blocks_read);
        add(&mut self.block_cache_hits, o.block_cache_hits);
        add(
            &mut self.tables_without_usable_filter,
            o.tables_without_usable_filter,
        );
        add(&mut self.filter_read_retries, o.filter_read_retries);
        add(&mut self.bytes_written, o.bytes_written);
        add(&mut self.bytes_compacted_read, o.bytes_compacted_read);
        add(&mut self.bytes_moved_in, o.bytes_moved_in);
        add(&mut self.writes_into, o.writes_into);
        self.observed_fpr = ratio(
            self.filter_false_positives,
            self.filter_false_positives
                .saturating_add(self.filter_negatives),
        );
    }
}

pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// A snapshot of the store's counters (`Db::stats`). Every counter starts
/// from zero at each open (none is persisted); scans and iterators count
/// nothing (docs/DESIGN.md, "Stats"). Taken while gets run, the counters
/// are read one after another, yet each level's `table_probes` is the sum
/// of its four verdicts, its `data_blocks_read + block_cache_hits` is at
/// most its true and false positives and probes without filter (equal
/// when no get runs), and `memtable_hits` is at most `gets`.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Gets served (plain, traced and snapshot gets).
    pub gets: u64,
    /// Gets answered by a memtable (active or frozen).
    pub memtable_hits: u64,
    /// Per level, L0 first.
    pub levels: Vec<LevelStats>,
    /// All levels together.
    pub total: LevelStats,
    /// data blocks read from files / gets.
    pub data_blocks_read_per_get: f64,
    /// Flushes: L0 tables written from frozen memtables (one per flush,
    /// however many memtables it merged), the replay at open included.
    pub flushes: u64,
    /// Compactions run (merges that read and wrote tables).
    pub compactions: u64,
    /// Tables moved one level down by a manifest edit alone (no merge).
    pub trivial_moves: u64,
    /// Bottommost cleanups: compactions (counted in `compactions` too)
    /// that rewrote one table with nothing below it alone into its own
    /// level, to drop the tombstones and shadowed versions no live
    /// snapshot needs any more.
    pub bottom_cleanups: u64,
    /// Deletion-triggered compactions (`Options::deletion_compaction_ratio`):
    /// a table dense with tombstones over deeper data carried one level
    /// down (each counted in `compactions` or `trivial_moves` too).
    pub deletion_compactions: u64,
    /// Filters built (one per table written).
    pub filters_built: u64,
    /// Bytes of table files written.
    pub bytes_written: u64,
    /// Bytes of table files read by compaction.
    pub bytes_compacted_read: u64,
    /// Writes delayed or stopped (each counted once, however long it
    /// waited) by L0 at its slowdown or stop trigger or by frozen
    /// memtables at `max_immutable_memtables`.
    pub write_stalls: u64,
    /// Block cache bytes in use.
    pub block_cache_used_bytes: u64,
    /// Filters rebuilt because the optimized policy's budget for their
    /// level moved: rebalancing rebuilds, and the lowerings a compaction
    /// runs before it plans to make room for its install (in the
    /// compaction's thread, inline with a write when there is no
    /// background work). A rebuild appends the filter or copies the table.
    pub filters_rebalanced: u64,
    /// Where the open's WAL replay ended before the end of the WALs (a
    /// torn tail; damage in a WAL written without fsync, which ends the
    /// log; damage under `WalRecovery::PointInTime`): the writes logged
    /// from there on were dropped. `None` when every WAL was replayed
    /// whole (a WAL whose header never became durable, its creation
    /// interrupted by a power loss or its header's fsync failed, held no
    /// record and counts as whole: a prefix of a header, or up to 24 bytes
    /// of zeros, what a file system shows of a page never written back;
    /// so does a torn or damaged close marker at the log's end whose
    /// length field survived, `wal/seal.rs`). A WAL of more zeros than a
    /// header may have held acknowledged writes: it is cut.
    pub wal_replay_cut: Option<crate::wal_cut::WalCut>,
    /// WALs, oldest first, whose header this open found damaged and read
    /// past under `WalRecovery::PointInTime`: their records verified under
    /// the salt the damaged header still held (what a clean close's header
    /// rewrite torn inside its sector leaves; `wal::salvaged_records`).
    /// Their writes were replayed (up to `wal_replay_cut`, if it names
    /// one of them); the header's promises (whether the WAL was fsynced
    /// record by record, whether a close ended it) were not read, but for
    /// a header half of which is the closed one, whose WAL ended in a
    /// close marker: with none at its end, `wal_replay_cut` names its lost
    /// end (`wal::header::torn_from_closed`). Empty
    /// when every header was intact, or under `TolerateTornTail`, which
    /// refuses such a WAL.
    pub wal_headers_salvaged: Vec<std::path::PathBuf>,
    /// Table files open now, where `Options::max_open_files` bounds them
    /// (`None` without a bound: every live table keeps its file open).
    pub open_table_files: Option<u64>,
    /// Table files opened because a read found them closed, where
    /// `Options::max_open_files` bounds them (0 without a bound): more
    /// than the tables opened means the bound is closing files that reads
    /// then reopen.
    pub table_file_opens: u64,
}

impl DbInner {
    /// Figures of the live tables beside the read-path counters.
    pub(crate) fn stats(&self) -> Stats {
        let sv = self.current.load_full();
        let mut levels = Vec::new();
        let mut total = LevelStats::default();
        // Invariant: the total's averages have the levels' meaning, over
        // all tables: bits per distinct key, and the formula's FPR weighted
        // by the keys of the filters that exist (tables without a filter
        // have no formula; they are counted in `probes_without_filter`).
        // The keys weighting the FPR are summed as f64: a filter's `len()`
        // is its header's claim (up to 2^64 - 1 in crafted bytes), and a
        // u64 sum of two overflowed (a panic, or a wrapped weight and a
        // "rate" of 10^19).
        let (mut all_distinct, mut all_filtered, mut all_weighted) = (0u64, 0.0, 0.0);
        for (level, tables) in sv.version.levels.iter().enumerate() {
            let mut s = LevelStats::default();
            let mut weighted_fpr = 0.0;
            let mut filtered_keys = 0.0;
            for t in tables {
                s.tables += 1;
                s.entries = s.entries.saturating_add(t.meta.entries);
                s.tombstones = s.tombstones.saturating_add(t.table.properties().tombstones);
                s.file_bytes = s.file_bytes.saturating_add(t.meta.file_size);
                s.unused_bytes = s
                    .unused_bytes
                    .saturating_add(t.meta.file_size.saturating_sub(t.table.live_bytes()));
                if let FilterStatus::Unusable(_) = t.table.filter_status() {
                    s.tables_without_usable_filter += 1;
                }
                s.filter_read_retries += t.table.filter_retries();
                if let Some(f) = t.table.filter() {
                    s.filter_bytes += f.memory_bytes() as u64;
                    weighted_fpr += f.theoretical_fpr() * f.len() as f64;
                    filtered_keys += f.len() as f64;
                }
            }
            let distinct: u64 = tables.iter().fold(0, |sum: u64, t| {
                sum.saturating_add(t.table.properties().distinct_keys)
            });
            s.bits_per_key = if distinct > 0 {
                s.filter_bytes as f64 * 8.0 / distinct as f64
            } else {
                0.0
            };
            s.theoretical_fpr = if filtered_keys > 0.0 {
                (weighted_fpr / filtered_keys).min(1.0)
            } else {
                0.0
            };
            s.fill_counters(
                &self.counters.reads.level(level),
                &self.counters.levels[level],
            );
            total.accumulate(&s);
            all_distinct = all_distinct.saturating_add(distinct);
            all_filtered += filtered_keys;
            all_weighted += weighted_fpr;
            levels.push(s);
        }
        total.bits_per_key = ratio(total.filter_bytes * 8, all_distinct);
        total.theoretical_fpr = if all_filtered > 0.0 {
            (all_weighted / all_filtered).min(1.0)
        } else {
            0.0
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (gets, memtable_hits) = self.counters.reads.gets_and_memtable_hits();
        Stats {
            gets,
            memtable_hits,
            data_blocks_read_per_get: ratio(total.data_blocks_read, gets),
            levels,
            total,
            flushes: get(&self.counters.flushes),
            compactions: get(&self.counters.compactions),
            trivial_moves: get(&self.counters.trivial_moves),
            bottom_cleanups: get(&self.counters.bottom_cleanups),
            deletion_compactions: get(&self.counters.deletion_compactions),
            filters_built: get(&self.counters.filters_built),
            bytes_written: get(&self.counters.bytes_written),
            bytes_compacted_read: get(&self.counters.bytes_compacted_read),
            write_stalls: get(&self.counters.write_stalls),
            block_cache_used_bytes: self.tables.cache().used_bytes(),
            filters_rebalanced: get(&self.counters.filters_rebalanced),
            wal_replay_cut: self.wal_cut.clone(),
            wal_headers_salvaged: self.wal_headers_salvaged.clone(),
            open_table_files: self.tables.open_files().map(|files| files.len() as u64),
            table_file_opens: self.tables.open_files().map_or(0, |files| files.opens()),
        }
    }
}
