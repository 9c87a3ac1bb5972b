//! bloomlsm: an embeddable LSM-tree key-value store whose read path is
//! driven by Bloom filters.
//!
//! Every table carries a checksummed filter block; `get` hashes the key
//! once and asks each candidate table's filter first, skipping the disk
//! when the filter says "definitely absent". Compaction never edits a
//! filter: each table it writes gets a new filter built from exactly the
//! keys it holds.
//!
//! ```
//! use bloomlsm::{Db, Options, WriteBatch};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default()).unwrap();
//! let mut batch = WriteBatch::new();
//! batch.put(b"a", b"1").put(b"b", b"2").delete(b"c");
//! db.write(batch).unwrap();
//! db.flush().unwrap();
//! let (value, trace) = db.get_traced(b"zzz").unwrap();
//! assert_eq!(value, None);
//! println!("{} reads saved", trace.reads_saved());
//! let all: Vec<_> = db.scan::<&[u8], _>(..).unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(all.len(), 2);
//! ```

mod answer;
mod arena;
mod background;
#[cfg(test)]
mod background_model_tests;
#[cfg(test)]
mod background_panic_tests;
mod batch;
#[cfg(test)]
mod budget_test_shapes;
#[cfg(test)]
mod closed_cache_tests;
mod compaction;
mod counters;
mod cursor;
mod damage;
mod db;
mod error;
#[cfg(test)]
mod filter_allowance_tests;
mod filter_budget;
#[cfg(test)]
mod filter_memory_tests;
#[cfg(test)]
mod filter_retry_budget_tests;
mod flush;
#[cfg(test)]
mod flush_tests;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(test)]
mod half_batch_tests;
#[cfg(test)]
mod inline_work_tests;
mod inner;
mod install;
#[cfg(test)]
mod install_refusal_tests;
#[cfg(test)]
mod interleaving_tests;
mod iter;
#[cfg(test)]
mod l0_floor_tests;
mod level_fences;
mod manifest;
mod memtable;
mod merge;
#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod merged_flush_interleaving_tests;
mod merging_cursor;
#[cfg(test)]
mod mixed_kind_tests;
mod open_table_files;
mod options;
#[cfg(test)]
mod panic_drop_tests;
#[cfg(test)]
mod panic_points_tests;
#[cfg(test)]
mod panic_window_tests;
mod read;
mod read_only_fs;
#[cfg(test)]
mod read_view_tests;
mod rebalance;
#[cfg(test)]
mod rebalance_raise_tests;
#[cfg(test)]
mod rebalance_starvation_tests;
#[cfg(test)]
mod rebalance_tests;
mod rebuild;
#[cfg(test)]
mod rebuild_budget_tests;
#[cfg(test)]
mod rebuild_load_tests;
mod recovery;
mod replay;
#[cfg(test)]
mod rotate_panic_tests;
#[cfg(test)]
mod scratch_dirs;
mod skiplist;
mod stats;
#[cfg(test)]
mod stop_error_window_tests;
#[cfg(test)]
mod stop_flush_window_tests;
#[cfg(test)]
mod stop_inflight_tests;
#[cfg(test)]
mod stop_lock_order_tests;
#[cfg(test)]
mod stop_rotation_window_tests;
#[cfg(test)]
mod store_files;
mod table_files;
#[cfg(test)]
mod target_range_tests;
#[cfg(test)]
mod test_hooks;
#[cfg(test)]
mod test_model;
#[cfg(test)]
mod tiny_rebuild_tests;
mod trace;
mod version;
#[cfg(test)]
mod version_liveness_tests;
mod wal;
mod wal_cut;
mod write;
#[cfg(test)]
mod write_panic_tests;
#[cfg(test)]
mod write_room_tests;
mod write_stop;

pub use batch::{BatchError, MAX_BATCH_BYTES, WriteBatch};
/// The filter crate: the filters [`FilterKind`] names, for applications
/// that depend on `bloomlsm` alone.
pub use bloomlsm_filter as filter;
pub use bloomlsm_filter::FilterKind;
/// The table crate: what [`Error::Table`], [`Damage`] and [`fs`] hold
/// (`sstable::Error`, `sstable::CorruptionReason`, the file traits), for
/// applications that depend on `bloomlsm` alone.
pub use bloomlsm_sstable as sstable;
/// What a [`TraceStep`] says of a table's filter and of its block read.
pub use bloomlsm_sstable::{BlockSource, FilterVerdict};
pub use damage::{Damage, ManifestDamage, TableRecordField, TreeOrderError, WalDamage};
pub use db::{Db, Snapshot};
pub use error::{Error, Result};
pub use iter::DbIter;
pub use manifest::{STORE_FORMAT_VERSION, TableMeta, table_records};
pub use options::{
    CorruptFilterPolicy, FilterPolicy, MAX_BLOCK_SIZE, MAX_FILTER_BITS_PER_KEY, MAX_LEVELS,
    MIN_FILTER_BITS_PER_KEY, Options, SyncMode, WalRecovery,
};
pub use stats::{LevelStats, Stats};
pub use table_files::MAX_OPEN_FILE_NUMBER;
pub use trace::{LookupTrace, TraceResult, TraceSource, TraceStep};
pub use wal_cut::{WalCut, WalCutCause};
pub use write_stop::{StopCause, WriteStop};
