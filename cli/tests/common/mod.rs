//! Stores the CLI's tests study.
#![allow(dead_code)] // Each test crate uses part of it.

use std::path::Path;

use bloomlsm::{Db, Options};

/// The key of index `i`: `k00000`, `k00001`, ...
pub fn key(i: u64) -> String {
    format!("k{i:05}")
}

/// Several levels of narrow tables (2 KiB, 256-byte blocks, size ratio
/// 2) and overlapping L0 tables, over keys `0..keys`: seven rounds, each
/// putting every key divisible by the round plus two and deleting one key
/// in eleven (tombstones over deeper values), then flushing. Closed;
/// returns the tables per level.
pub fn deep_store(dir: &Path, keys: u64) -> Vec<u64> {
    let options = Options {
        block_size: 256,
        memtable_bytes: 16 << 10,
        target_file_bytes: 2 << 10,
        l1_bytes: 8 << 10,
        level_size_ratio: 2,
        dynamic_level_bytes: false,
        background_work: false,
        ..Options::default()
    }
    .with_bits_per_key(4.0);
    let db = Db::open(dir, options).unwrap();
    for r in 0..7u64 {
        for i in (0..keys).filter(|i| i % (r + 2) == 0) {
            db.put(key(i).as_bytes(), format!("v{r}").as_bytes())
                .unwrap();
        }
        for i in (0..keys).filter(|i| i % 11 == r) {
            db.delete(key(i).as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    let levels = db.stats().levels.iter().map(|l| l.tables).collect();
    db.close().unwrap();
    levels
}

/// Runs the `bloomlsm` binary with `args`, capturing its output.
pub fn bloomlsm(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .output()
        .unwrap()
}
