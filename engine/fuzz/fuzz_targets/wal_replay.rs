#![no_main]
//! Any bytes as a WAL: replay returns records or an error, never panics.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bloomlsm::fuzzing::replay_wal(data, false);
    let _ = bloomlsm::fuzzing::replay_wal(data, true);
});
