#![no_main]
//! Any set of hashes and any target: construction never fails or panics,
//! the filter holds every hash, and its bytes decode back to it.

use bloomlsm_filter::{Filter, KeyHash, RibbonFilter, RibbonTarget};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let hashes: Vec<KeyHash> = rest
        .chunks(8)
        .map(|c| {
            let mut raw = [0u8; 8];
            raw[..c.len()].copy_from_slice(c);
            KeyHash::from_raw(u64::from_le_bytes(raw))
        })
        .collect();
    let amount = f64::from(selector & 0x3f);
    let target = match selector >> 6 {
        0 => RibbonTarget::BitsPerKey(amount * 0.7),
        1 => RibbonTarget::Fpr(0.5f64.powf(amount * 0.6)),
        _ => RibbonTarget::MemoryBytes(u64::from(selector) * 16),
    };
    let f = RibbonFilter::build(&hashes, target);
    for &h in &hashes {
        assert!(f.contains_hash(h));
    }
    assert_eq!(RibbonFilter::from_bytes(&f.to_bytes()).ok(), Some(f));
});
