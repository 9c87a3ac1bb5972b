#![no_main]
//! Arbitrary bytes as a table file (held in memory): open, get and scan
//! return values or errors, never panic. (Bytes that pass every checksum:
//! `table_resealed`.)

use std::sync::Arc;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{Table, TableIter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(table) = Table::open(Arc::new(MemFile(data.to_vec())), "fuzz.sst", 1, None) {
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
