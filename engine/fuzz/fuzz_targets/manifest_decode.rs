#![no_main]
//! Any bytes as a manifest: decoded or refused, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bloomlsm::fuzzing::decode_manifest(data);
});
