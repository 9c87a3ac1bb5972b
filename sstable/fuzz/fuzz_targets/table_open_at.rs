#![no_main]
//! Arbitrary bytes as a table file read at a recorded size below its
//! length (an in-place filter rebuild's tail past it, `Table::open_at`):
//! the first two bytes say how many bytes of the rest lie past the size.
//! Open, get, scan and the unused-bytes figures return values or errors,
//! never panic, and never count more bytes than the size.

use std::sync::Arc;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{Table, TableIter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, file)) = data.split_first_chunk::<2>() else {
        return;
    };
    let past = u64::from(u16::from_le_bytes(*head));
    let size = (file.len() as u64).saturating_sub(past);
    let Ok(table) = Table::open_at(Arc::new(MemFile(file.to_vec())), "fuzz.sst", size, 1, None)
    else {
        return;
    };
    assert!(table.live_bytes() <= 4 * size + 64);
    assert!(table.bytes_dead_after_append() <= size);
    let table = Arc::new(table);
    for key in [&b"a"[..], b"key", &file[..file.len().min(8)]] {
        if !key.is_empty() {
            let _ = table.get(key, KeyHash::of(key), u64::MAX >> 8);
        }
    }
    for entry in TableIter::new(table, false).take(10_000) {
        if entry.is_err() {
            break;
        }
    }
});
