#![no_main]
//! A Ribbon filter's bytes with a valid checksum appended, so the fuzzer
//! reaches the layout checks behind the crc32: decoding never panics, and a
//! decoded filter answers any hash, reports its statistics and re-encodes
//! to the same bytes (version 2) or to the same filter (version 1).

use bloomlsm_filter::{Filter, KeyHash, RibbonFilter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    bytes.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    if let Ok(f) = RibbonFilter::from_bytes(&bytes) {
        for probe in data.chunks(8) {
            let mut raw = [0u8; 8];
            raw[..probe.len()].copy_from_slice(probe);
            let _ = f.contains_hash(KeyHash::from_raw(u64::from_le_bytes(raw)));
        }
        let _ = (f.theoretical_fpr(), f.fill_ratio(), f.num_slots());
        // Version 2 bytes re-encode to themselves; version 1 (reordered
        // on reading) re-encodes as version 2 of the same filter.
        let again = f.to_bytes();
        if bytes[4..6] == 2u16.to_le_bytes() {
            assert_eq!(again, bytes);
        } else {
            assert_eq!(RibbonFilter::from_bytes(&again).ok(), Some(f));
        }
    }
});
