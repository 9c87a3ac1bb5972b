#![no_main]
//! Any bytes: decoding returns Ok or Err, never panics; a decoded filter
//! answers queries and re-encodes to the same bytes.

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, RibbonFilter,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = AnyFilter::from_bytes(data) {
        let _ = f.contains(data);
        assert_eq!(f.to_bytes(), data);
    }
    let _ = BloomFilter::from_bytes(data);
    let _ = BlockedBloomFilter::from_bytes(data);
    let _ = RibbonFilter::from_bytes(data);
    if let Ok(f) = CountingBloomFilter::from_bytes(data) {
        let _ = f.contains(data);
    }
});
