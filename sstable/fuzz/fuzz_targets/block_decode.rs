#![no_main]
//! Arbitrary bytes as a block (with and without a trailer), and as
//! properties and a footer: each decoder returns a value or its typed
//! error, never panics.

use bloomlsm_sstable::format::verify_block;
use bloomlsm_sstable::{BlockKind, Footer, TableProperties, decode_block};
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
    let _ = TableProperties::decode(data);
    let _ = Footer::decode(data);
});
