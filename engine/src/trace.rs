//! The path of one traced `get`: every memtable and table consulted, in
//! order, and what its filter said.

use std::path::Path;

use bloomlsm_sstable::{BlockSource, FilterVerdict};

/// Where a step of a lookup looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceSource {
    /// The active memtable.
    Memtable,
    /// A frozen memtable waiting for flush (0 = newest).
    ImmutableMemtable(usize),
    /// A table.
    Table {
        /// Its level.
        level: usize,
        /// Its file number.
        number: u64,
    },
}

impl TraceSource {
    /// The name of the table's file in the store directory (the store's
    /// one naming, as [`crate::TableMeta::file_path`]); `None` for a
    /// memtable.
    pub fn table_file_name(&self) -> Option<String> {
        match *self {
            Self::Table { number, .. } => Some(
                crate::fs::names::table(Path::new(""), number)
                    .display()
                    .to_string(),
            ),
            Self::Memtable | Self::ImmutableMemtable(_) => None,
        }
    }
}

/// What a step found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceResult {
    /// Nothing visible here; the lookup went on.
    Missing,
    /// A value: the lookup ended.
    Value,
    /// A tombstone: the lookup ended, the key is deleted.
    Deleted,
}

/// One step of a lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// Where it looked.
    pub source: TraceSource,
    /// The filter's verdict (`None` for memtables).
    pub filter: Option<FilterVerdict>,
    /// The data block read, if any.
    pub block: Option<BlockSource>,
    /// What it found.
    pub result: TraceResult,
}

/// Every step of one `get_traced`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LookupTrace {
    /// The key's XXH3-64 hash, computed once.
    pub key_hash: u64,
    /// The snapshot sequence the lookup read at.
    pub snapshot_seq: u64,
    /// Steps, in the order taken.
    pub steps: Vec<TraceStep>,
}

impl LookupTrace {
    /// Data blocks read from files.
    pub fn blocks_read_from_files(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.block == Some(BlockSource::File))
            .count()
    }

    /// Tables whose filter said "definitely absent".
    pub fn reads_saved(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.filter == Some(FilterVerdict::Negative))
            .count()
    }
}
