#![no_main]
//! Manifests of the fuzzer's fields with a valid checksum
//! (`bloomlsm::fuzzing::resealed::reseal_manifest`), so the fuzzer reaches
//! the decoding and checks behind the crc32 that `manifest_decode` rarely
//! passes: decoding never panics, what decodes re-encodes as its version
//! says (`exercise_manifest`), and decoding allocates at most a small
//! multiple of the input's length (counted by this target's allocator).

use bloomlsm::fuzzing::CountingAlloc;
use bloomlsm::fuzzing::resealed::{exercise_manifest, reseal_manifest};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fuzz_target!(|data: &[u8]| {
    let bytes = reseal_manifest(data);
    let base = CountingAlloc::start();
    exercise_manifest(&bytes);
    let used = CountingAlloc::peak_since(base);
    // The tables (a record of at least 52 bytes each) and their keys, then
    // the re-encoding: a few copies of the input, never a count or length
    // the bytes claim.
    assert!(
        used <= 16 * bytes.len() + 16_384,
        "decoding {} bytes allocated {used}",
        bytes.len()
    );
});
