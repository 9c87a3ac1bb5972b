//! The narrow store shapes a case runs on: tiny memtables, small blocks,
//! tables cut at a few hundred bytes and small level budgets at size ratio
//! 2 or 3, so that a few hundred operations on a hundred and fifty keys
//! build four levels or more through flushes and the compactions the store
//! chooses. Work runs inline (`background_work: false`): a case runs the
//! same way every time.

use crate::FilterKind;
use crate::options::Options;

use super::ops::{FilterConfig, Shape};

/// One layout: the size options of a shape.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// `Options::memtable_bytes`.
    pub memtable_bytes: usize,
    /// `Options::block_size`.
    pub block_size: usize,
    /// `Options::target_file_bytes`.
    pub target_file_bytes: u64,
    /// `Options::l1_bytes`.
    pub l1_bytes: u64,
    /// `Options::level_size_ratio`.
    pub level_size_ratio: u64,
    /// `Options::l0_compaction_trigger`.
    pub l0_compaction_trigger: usize,
    /// `Options::dynamic_level_bytes`.
    pub dynamic_level_bytes: bool,
}

/// The layouts a case chooses among.
pub const LAYOUTS: [Layout; 4] = [
    // Smallest of all: blocks of one or two entries, a table per flush.
    Layout {
        memtable_bytes: 256,
        block_size: 64,
        target_file_bytes: 256,
        l1_bytes: 256,
        level_size_ratio: 2,
        l0_compaction_trigger: 2,
        dynamic_level_bytes: true,
    },
    // Static level budgets (L0 into L1), 128-byte blocks.
    Layout {
        memtable_bytes: 512,
        block_size: 128,
        target_file_bytes: 512,
        l1_bytes: 1024,
        level_size_ratio: 2,
        l0_compaction_trigger: 4,
        dynamic_level_bytes: false,
    },
    // Memtables larger than the tables compactions cut.
    Layout {
        memtable_bytes: 2048,
        block_size: 128,
        target_file_bytes: 256,
        l1_bytes: 512,
        level_size_ratio: 3,
        l0_compaction_trigger: 3,
        dynamic_level_bytes: true,
    },
    // The target's first shape, at ratio 3.
    Layout {
        memtable_bytes: 512,
        block_size: 128,
        target_file_bytes: 512,
        l1_bytes: 2048,
        level_size_ratio: 3,
        l0_compaction_trigger: 4,
        dynamic_level_bytes: true,
    },
];

/// The filter kind a store may be opened with (`Counting` is not a table
/// filter: blocked instead).
pub fn table_kind(kind: FilterKind) -> FilterKind {
    match kind {
        FilterKind::Counting => FilterKind::Blocked,
        k => k,
    }
}

impl Shape {
    /// The options of the first open.
    pub fn options(&self) -> Options {
        let l = LAYOUTS[usize::from(self.layout) % LAYOUTS.len()];
        let options = Options {
            memtable_bytes: l.memtable_bytes,
            block_size: l.block_size,
            target_file_bytes: l.target_file_bytes,
            l1_bytes: l.l1_bytes,
            level_size_ratio: l.level_size_ratio,
            l0_compaction_trigger: l.l0_compaction_trigger,
            dynamic_level_bytes: l.dynamic_level_bytes,
            num_levels: 7,
            // Small enough that blocks are evicted and read again.
            block_cache_bytes: 16 << 10,
            background_work: false,
            deletion_compaction_ratio: self.deletion_compaction.then_some(0.25),
            // Half the cases (the layout byte's next bit) keep at most two
            // table files open: files closed and reopened under every read.
            max_open_files: (usize::from(self.layout) / LAYOUTS.len() % 2 == 1).then_some(2),
            ..Options::default()
        };
        with_filters(options, &self.filters)
    }
}

/// `options` with the filters of `config`.
pub fn with_filters(options: Options, config: &FilterConfig) -> Options {
    Options {
        filter_kind: table_kind(config.kind),
        filter_policy: config.policy.policy(),
        ..options
    }
}
