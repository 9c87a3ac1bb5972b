//! The store the tests of `Options::max_open_files` drive: narrow tables
//! of scattered keys and values padded to 60-109 bytes, and a tiny block
//! cache, so reads go to the files and many tables are live at once.

use bloomlsm::Options;

/// 4 KiB memtables and tables of 512-byte blocks, an L1 of 16 KiB and a
/// size ratio of 4, a 4 KiB block cache, at most `max_open` table files
/// open.
pub fn bounded_options(max_open: usize) -> Options {
    Options {
        memtable_bytes: 4 << 10,
        target_file_bytes: 4 << 10,
        l1_bytes: 16 << 10,
        level_size_ratio: 4,
        block_size: 512,
        block_cache_bytes: 4 << 10,
        max_open_files: Some(max_open),
        ..Options::default()
    }
}

/// The `i`-th key, scattered over the key space.
pub fn key(i: u64) -> Vec<u8> {
    format!("k{:09}", i.wrapping_mul(2_654_435_761) % 1_000_000_007).into_bytes()
}

/// `key(i)`'s value in round (or version) `round`: the numbers, then 60
/// to 109 bytes of padding.
pub fn value(i: u64, round: u64) -> Vec<u8> {
    format!("{i}-{round}-{}", "v".repeat(60 + (i % 50) as usize)).into_bytes()
}
