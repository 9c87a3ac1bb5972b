#![no_main]
//! Any bytes: decoding returns Ok or Err, never panics; a decoded filter
//! answers queries and re-encodes as its version says
//! (`bloomlsm_filter::fuzzing::exercise`). Random bytes rarely pass the
//! checksum: `filter_resealed` reaches the decoding behind it.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bloomlsm_filter::fuzzing::exercise(data);
});
