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
    // The table as the whole file, and as a prefix of it (a recorded size
    // with bytes past it, as after an in-place filter rebuild that never
    // reached the manifest; `Table::open_at`).
    let file = Arc::new(MemFile(data.to_vec()));
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let prefix = Table::open_at(file.clone(), "fuzz.sst", (data.len() - cut) as u64, 1, None);
    if let Ok(table) = prefix {
        let _ = (table.live_bytes(), table.bytes_dead_after_append());
    }
    if let Ok(table) = Table::open(file, "fuzz.sst", 1, None) {
        let _ = (table.live_bytes(), table.bytes_dead_after_append());
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
