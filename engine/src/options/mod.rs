//! How a store is configured, with documented defaults.

use bloomlsm_filter::FilterKind;

use crate::error::{Error, Result};

mod filter_policy;

pub use filter_policy::{FilterPolicy, MAX_FILTER_BITS_PER_KEY, MIN_FILTER_BITS_PER_KEY};

/// When the WAL is fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// fsync before every write returns: survives power loss.
    Always,
    /// No fsync: a returned write has reached the OS (survives a process
    /// kill, not a power loss).
    Never,
}

/// What WAL recovery does with a damaged record that is not the tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalRecovery {
    /// A torn last record is dropped; damage before the tail is an error
    /// in a WAL written with `SyncMode::Always` (or by a build before WAL
    /// format version 2). In a WAL written with `SyncMode::Never`, where a
    /// power loss may lose any unsynced page, recovery ends at the first
    /// damage as `PointInTime` does, unless the store was closed cleanly
    /// since: `close` (and drop) fsyncs every live WAL and then marks its
    /// header synced, so damage found in it later (a bit flipped on the
    /// device) with a record of the log after it is an error there too,
    /// never a silent loss of the writes after it. The close first appends
    /// a close marker (an empty batch holding no write) after the last
    /// write, in either sync mode, so damage in that last write has a
    /// record after it and is an error as well; a crash mid-append leaves
    /// no marker, and its torn record is dropped, unless the manifest
    /// recorded that write as visible (an install after it) in a WAL
    /// written with `SyncMode::Always`: it was fsynced, and its damage is
    /// an error.
    TolerateTornTail,
    /// Recovery stops just before the first damaged record (point in time).
    /// A WAL whose header alone is damaged (a clean close's header rewrite
    /// torn inside its sector, which `TolerateTornTail` refuses) has its
    /// records read under the salt the header still holds, when its first
    /// record verifies under it.
    PointInTime,
}

/// What to do with a table whose filter block is damaged. A filter block
/// whose read failed (`EIO`; `FilterLoadError::Read`) is not damage: under
/// `Ignore` and `Rebuild` later lookups retry the read (ever more rarely
/// while it keeps failing) and the table has its filter again once one
/// succeeds; `Fail` refuses the open with the I/O error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptFilterPolicy {
    /// Read the table without its filter (every key "maybe"); count it.
    Ignore,
    /// Refuse: opening the store returns the corruption error.
    Fail,
    /// Read without it, and rebuild that table's filter in the background
    /// (also after a failed read, but not one the allocator refused).
    Rebuild,
}

/// Options of a store. `Options::default()` documents every default.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Filter bits per key by level (default uniform 10.0).
    pub filter_policy: FilterPolicy,
    /// Filter layout (default blocked: one cache miss per probe; also
    /// standard or ribbon). `FilterKind::Counting` is not a table filter:
    /// `Db::open` refuses it with `Error::InvalidOptions`.
    pub filter_kind: FilterKind,
    /// Data block size in bytes (default 4096; 64 to [`MAX_BLOCK_SIZE`]).
    pub block_size: usize,
    /// A memtable is frozen and flushed once its arena holds this many bytes
    /// (default 8 MiB): its versions with their skiplist links, headers and
    /// padding, as RocksDB counts `write_buffer_size`.
    pub memtable_bytes: usize,
    /// Frozen memtables allowed to wait for flush before writers wait (default 2).
    pub max_immutable_memtables: usize,
    /// Shared block cache capacity in bytes (default 8 MiB).
    pub block_cache_bytes: u64,
    /// fsync policy of the WAL (default `Never`: fsync off, WAL on).
    pub sync: SyncMode,
    /// WAL damage handling (default `TolerateTornTail`).
    pub wal_recovery: WalRecovery,
    /// L0 tables that trigger a compaction into the base level (default
    /// 4). L0 is also compacted, whatever its table count, once its bytes
    /// reach `l1_bytes` (as RocksDB does), so a few large flushes do not
    /// pile up into one giant compaction.
    pub l0_compaction_trigger: usize,
    /// L0 tables at which each write is delayed by 1 ms (default 8).
    pub l0_slowdown_trigger: usize,
    /// L0 tables at which writes wait for compaction (default 12).
    pub l0_stop_trigger: usize,
    /// Byte budget of L1 (default 64 MiB); level n+1 gets `level_size_ratio` times level n.
    /// With `dynamic_level_bytes`, the budget of the level L0 compacts into.
    pub l1_bytes: u64,
    /// Level budgets from the last level's size up, L0 compacting into the
    /// shallowest level that needs to exist (default true; RocksDB's
    /// `level_compaction_dynamic_level_bytes`, on by default since 8.4).
    /// False: L0 into L1, budgets from `l1_bytes` down.
    pub dynamic_level_bytes: bool,
    /// Size ratio between adjacent levels (default 10).
    pub level_size_ratio: u64,
    /// Number of levels, L0 included (default 7; 2 to [`MAX_LEVELS`]). A
    /// store holding a table deeper than this is refused at open with
    /// `Error::InvalidOptions`: open it with its own number.
    pub num_levels: usize,
    /// Compaction cuts output tables at this size (default 8 MiB).
    pub target_file_bytes: u64,
    /// Largest key a put stores (default 64 KiB, also the most `Db::open`
    /// accepts; at least 1). Empty keys are always refused. It limits new
    /// keys only: a store written under a larger limit keeps its longer
    /// keys, which gets and scans find and deletes (up to 64 KiB, what a
    /// table holds) remove.
    pub max_key_bytes: usize,
    /// Largest value accepted (default 16 MiB; `Db::open` accepts up to
    /// 64 MiB). Empty values are fine.
    pub max_value_bytes: usize,
    /// Damaged filter blocks (default `Ignore`).
    pub on_corrupt_filter: CorruptFilterPolicy,
    /// Run flushes and compactions on a background thread (default true).
    /// When false they run inline in the writing thread.
    pub background_work: bool,
    /// Read table data blocks with `O_DIRECT` (default false), bypassing
    /// the operating system's page cache so every block-cache miss is a
    /// device read. `open` fails, naming the path, where the file system
    /// refuses direct I/O.
    pub use_direct_reads: bool,
    /// Most table files kept open at once (default `None`: every live
    /// table keeps its file open, as RocksDB's `max_open_files = -1`).
    /// `Some(n)`, `n >= 1`: a table's file is opened when a read needs it
    /// and past `n` one is closed (the cache keeps the files read most
    /// often), as LevelDB's table cache does; indexes and filters stay in memory, so only reads that
    /// miss the block cache may reopen a file. Each open table file is one
    /// descriptor, two with `use_direct_reads`; a file let go stays open
    /// until a read in flight on it ends.
    pub max_open_files: Option<usize>,
    /// Deletion-triggered compaction (default `None`: off, as in RocksDB,
    /// where it takes a `CompactOnDeletionCollector`). `Some(r)`, `r` in
    /// `(0, 1]`: when no level needs a size-driven compaction, a table
    /// whose tombstones are at least `r` of its entries and whose key
    /// range meets a deeper level is merged into the next level (an L0
    /// table: all of L0 into the base level), so its deletes reach the
    /// data they hide and both go. Costs the rewrite of the tables it
    /// meets there.
    pub deletion_compaction_ratio: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
            filter_kind: FilterKind::Blocked,
            block_size: 4096,
            memtable_bytes: 8 << 20,
            max_immutable_memtables: 2,
            block_cache_bytes: 8 << 20,
            sync: SyncMode::Never,
            wal_recovery: WalRecovery::TolerateTornTail,
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 8,
            l0_stop_trigger: 12,
            l1_bytes: 64 << 20,
            level_size_ratio: 10,
            dynamic_level_bytes: true,
            num_levels: 7,
            target_file_bytes: 8 << 20,
            max_key_bytes: 64 << 10,
            max_value_bytes: 16 << 20,
            on_corrupt_filter: CorruptFilterPolicy::Ignore,
            background_work: true,
            use_direct_reads: false,
            max_open_files: None,
            deletion_compaction_ratio: None,
        }
    }
}

impl Options {
    /// Uniform filters at `bits_per_key` (0 turns filters off).
    pub fn with_bits_per_key(mut self, bits_per_key: f64) -> Self {
        self.filter_policy = FilterPolicy::Uniform { bits_per_key };
        self
    }

    /// Byte budget of `level` (L0 is counted in tables, not bytes).
    pub fn level_budget(&self, level: usize) -> u64 {
        let mut budget = self.l1_bytes;
        for _ in 1..level {
            budget = budget.saturating_mul(self.level_size_ratio);
        }
        budget
    }

    /// Refuses options that could hang, overflow or divide by zero.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidOptions(m.to_string()));
        if !(2..=MAX_LEVELS).contains(&self.num_levels) {
            return bad("num_levels must be in 2..=64");
        }
        if !(64..=MAX_BLOCK_SIZE).contains(&self.block_size) {
            return bad("block_size must be in 64 bytes..=64 MiB");
        }
        if self.memtable_bytes == 0 {
            return bad("memtable_bytes must be at least 1");
        }
        if self.max_immutable_memtables == 0 {
            // With no room for a frozen memtable every write would wait
            // for a flush that has nothing to flush.
            return bad("max_immutable_memtables must be at least 1");
        }
        if self.l0_compaction_trigger == 0
            || self.l0_slowdown_trigger < self.l0_compaction_trigger
            || self.l0_stop_trigger < self.l0_slowdown_trigger
        {
            return bad(
                "need 1 <= l0_compaction_trigger <= l0_slowdown_trigger <= l0_stop_trigger",
            );
        }
        if self.l1_bytes == 0 {
            return bad("l1_bytes must be at least 1");
        }
        if self.level_size_ratio < 2 {
            return bad("level_size_ratio must be at least 2");
        }
        if self.target_file_bytes == 0 {
            return bad("target_file_bytes must be at least 1");
        }
        if self.max_key_bytes == 0 || self.max_key_bytes > bloomlsm_sstable::DEFAULT_MAX_KEY_BYTES {
            return bad("max_key_bytes must be in 1..=65536");
        }
        if self.max_value_bytes > bloomlsm_sstable::DEFAULT_MAX_VALUE_BYTES {
            return bad("max_value_bytes must be at most 64 MiB");
        }
        if self
            .deletion_compaction_ratio
            .is_some_and(|r| !(r > 0.0 && r <= 1.0))
        {
            return bad("deletion_compaction_ratio must be in (0, 1]");
        }
        if self.max_open_files == Some(0) {
            return bad("max_open_files must be at least 1 (None: no bound)");
        }
        if self.filter_kind == FilterKind::Counting {
            return bad("counting filters are not table filters");
        }
        self.filter_policy.validate()
    }
}

/// Most levels a store may have.
pub const MAX_LEVELS: usize = 64;
/// Largest data block size accepted.
pub const MAX_BLOCK_SIZE: usize = 64 << 20;
