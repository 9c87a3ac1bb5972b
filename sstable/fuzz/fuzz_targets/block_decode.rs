#![no_main]
//! Arbitrary bytes as a block, and as properties and a footer.

use bloomlsm_sstable::{Footer, TableProperties, decode_block};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_block(data);
    let _ = TableProperties::decode(data);
    let _ = Footer::decode(data);
});
