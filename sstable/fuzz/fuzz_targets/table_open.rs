#![no_main]
//! Arbitrary bytes as a table file: open, get and scan return values or
//! errors, never panic.

use std::io::Write;
use std::sync::Arc;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::{Table, TableIter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("bloomlsm-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("t.sst");
    if let Ok(mut f) = std::fs::File::create(&path) {
        let _ = f.write_all(data);
    }
    if let Ok(table) = Table::open_path(&path, 1, None) {
        let table = Arc::new(table);
        for key in [&b"a"[..], b"key", &data[..data.len().min(8)]] {
            if !key.is_empty() {
                let _ = table.get(key, KeyHash::of(key), u64::MAX >> 8);
            }
        }
        for entry in TableIter::new(table, false).take(10_000) {
            if entry.is_err() {
                break;
            }
        }
    }
});
