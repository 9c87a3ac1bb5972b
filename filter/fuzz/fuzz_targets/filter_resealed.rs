#![no_main]
//! Serialized filters of every kind with the fuzzer's header fields and
//! payload and a valid checksum (`bloomlsm_filter::fuzzing::reseal`), so
//! the fuzzer reaches the checks behind the crc32 that `filter_from_bytes`
//! rarely passes. Decoding never panics, the kind decoders agree, a
//! decoded filter answers probes and re-encodes as its version says
//! (`fuzzing::exercise`), and decoding allocates at most a small multiple
//! of the input's length (counted by this target's allocator).

use bloomlsm_filter::fuzzing::{CountingAlloc, exercise, reseal};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fuzz_target!(|data: &[u8]| {
    let bytes = reseal(data);
    let base = CountingAlloc::start();
    exercise(&bytes);
    let used = CountingAlloc::peak_since(base);
    // Every kind decoded at once, each filter cloned once, each re-encoded
    // once: a few copies of the input, never a size the header claims.
    assert!(
        used <= 16 * bytes.len() + 16_384,
        "decoding {} bytes allocated {used}",
        bytes.len()
    );
});
