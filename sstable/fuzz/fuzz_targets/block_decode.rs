#![no_main]
//! Arbitrary bytes as a block (with and without a trailer), as the index
//! block of either table format version, and as properties and a footer:
//! each decoder returns a value or its typed error, never panics.

use bloomlsm_sstable::format::verify_block;
use bloomlsm_sstable::{BlockKind, Footer, TableProperties, decode_block, decode_index_block};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_block(data);
    for kind in [
        BlockKind::Data,
        BlockKind::Filter,
        BlockKind::Index,
        BlockKind::Properties,
    ] {
        if let Ok(block) = verify_block(kind, data) {
            let _ = decode_block(block);
        }
    }
    for version in [1, 2] {
        let _ = decode_index_block(version, data, u64::MAX);
        let _ = decode_index_block(version, data, data.len() as u64);
    }
    let _ = TableProperties::decode(data);
    let _ = Footer::decode(data);
});
