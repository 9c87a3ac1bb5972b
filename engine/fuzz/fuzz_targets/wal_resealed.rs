#![no_main]
//! WALs of the fuzzer's batches in intact record frames (valid crc32s),
//! under any header, split over up to four WALs
//! (`bloomlsm::fuzzing::resealed::reseal_wal`), so the fuzzer reaches the
//! batch decoding and sequence checks behind the checksums that
//! `wal_replay` rarely passes: replay never panics in either recovery
//! mode, and a clean log (every record a batch continuing the sequence)
//! replays whole (`exercise_wal`).

use bloomlsm::fuzzing::resealed::{exercise_wal, reseal_wal};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (wals, clean) = reseal_wal(data);
    exercise_wal(&wals, clean);
});
