#![no_main]
//! Any bytes as a WAL: replay returns records or an error, never panics.
//! The bytes are replayed as they are (a version 1 WAL, or whatever header
//! they begin with) and after each header this build writes, so that the
//! recovery of version 2 and 3 WALs, strict and relaxed, is reached too.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for point_in_time in [false, true] {
        let _ = bloomlsm::fuzzing::replay_wal(data, point_in_time);
        for synced in [false, true] {
            for mut headed in bloomlsm::fuzzing::wal_headers(synced) {
                headed.extend_from_slice(data);
                let _ = bloomlsm::fuzzing::replay_wal(&headed, point_in_time);
            }
        }
    }
});
