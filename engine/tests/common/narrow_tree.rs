//! The options of a deep tree of narrow tables that many tests start from:
//! a few hundred writes make several tables and reach levels below L1.
//! A test states its own departures at its call site with struct-update
//! syntax (`Options { max_open_files: Some(2), ..narrow_tree_options() }`).

use bloomlsm::Options;

/// 2 KiB memtables, 1 KiB tables of 128-byte blocks, an L1 of 2 KiB and a
/// size ratio of 2 over 7 levels, L0 compacted at 2 tables; no background
/// threads (work runs inline in the writer).
pub fn narrow_tree_options() -> Options {
    Options {
        block_size: 128,
        memtable_bytes: 2048,
        target_file_bytes: 1024,
        l1_bytes: 2048,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        background_work: false,
        ..Options::default()
    }
}
