//! No false negatives, for every kind, before and after serialization.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterBuilder,
    FilterKind, InsertFilter, KeyHash, RibbonFilter, RibbonTarget,
};
use proptest::collection::{hash_set, vec};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn standard_never_forgets(keys in hash_set(vec(any::<u8>(), 0..40), 0..400), bpk in 0.5f64..24.0) {
        let mut f = BloomFilter::with_bits_per_key(keys.len() as u64, bpk);
        for k in &keys { f.insert(k); }
        let back = BloomFilter::from_bytes(&f.to_bytes()).unwrap();
        for k in &keys {
            prop_assert!(f.contains(k));
            prop_assert!(back.contains(k));
        }
        prop_assert_eq!(back, f);
    }

    #[test]
    fn blocked_never_forgets(keys in hash_set(vec(any::<u8>(), 0..40), 0..400), bpk in 0.5f64..24.0) {
        let mut f = BlockedBloomFilter::with_bits_per_key(keys.len() as u64, bpk);
        for k in &keys { f.insert(k); }
        let back = BlockedBloomFilter::from_bytes(&f.to_bytes()).unwrap();
        for k in &keys {
            prop_assert!(f.contains(k));
            prop_assert!(back.contains(k));
        }
        prop_assert_eq!(back, f);
    }

    #[test]
    fn any_size_any_k(keys in hash_set(vec(any::<u8>(), 1..16), 1..200), bits in 1u64..5000, k in 1u32..31) {
        let mut f = BloomFilter::new(bits, k);
        let mut g = BlockedBloomFilter::new(bits, k);
        for key in &keys { f.insert(key); g.insert(key); }
        for key in &keys { prop_assert!(f.contains(key) && g.contains(key)); }
    }

    #[test]
    fn ribbon_never_forgets(keys in vec(vec(any::<u8>(), 0..40), 0..600), bpk in 0.0f64..40.0) {
        // Duplicates allowed: a table never adds one, but they must not hurt.
        let hashes: Vec<KeyHash> = keys.iter().map(|k| KeyHash::of(k)).collect();
        let f = RibbonFilter::from_hashes(&hashes, bpk);
        let back = RibbonFilter::from_bytes(&f.to_bytes()).unwrap();
        for k in &keys {
            prop_assert!(f.contains(k));
            prop_assert!(back.contains(k));
        }
        prop_assert_eq!(back, f);
    }

    #[test]
    fn ribbon_any_target(raw in vec(any::<u64>(), 1..3000), fpr in 1e-9f64..1.5, bytes in 0u64..20_000, which in 0u8..3) {
        // Raw hashes reach corners keys rarely do (equal and adjacent ones).
        let hashes: Vec<KeyHash> = raw.iter().map(|&h| KeyHash::from_raw(h)).collect();
        let target = match which {
            0 => RibbonTarget::Fpr(fpr),
            1 => RibbonTarget::MemoryBytes(bytes),
            _ => RibbonTarget::BitsPerKey(fpr * 20.0),
        };
        let f = RibbonFilter::build(&hashes, target);
        for &h in &hashes {
            prop_assert!(f.contains_hash(h));
        }
        if let RibbonTarget::MemoryBytes(b) = target {
            prop_assert!(f.to_bytes().len() as u64 <= b.max(bloomlsm_filter::RIBBON_FIXED_BYTES));
        }
    }

    #[test]
    fn builder_and_any_filter(keys in hash_set(vec(any::<u8>(), 0..24), 0..300), which in 0u8..3) {
        let kind = [FilterKind::Blocked, FilterKind::Standard, FilterKind::Ribbon][usize::from(which)];
        let mut b = FilterBuilder::new(kind, 10.0);
        for k in &keys { b.add_hash(BloomFilter::key_hash(k)); }
        let f = b.finish().unwrap();
        prop_assert_eq!(f.len(), keys.len() as u64);
        let back = AnyFilter::from_bytes(&f.to_bytes()).unwrap();
        prop_assert_eq!(back.kind(), kind);
        for k in &keys { prop_assert!(back.contains(k)); }
    }

    #[test]
    fn counting_removal_keeps_the_rest(keys in hash_set(vec(any::<u8>(), 1..24), 2..200), split in 0usize..200) {
        let keys: Vec<_> = keys.into_iter().collect();
        let split = split % keys.len();
        let mut f = CountingBloomFilter::with_bits_per_key(keys.len() as u64, 10.0);
        for k in &keys { f.insert(k); }
        for k in &keys[..split] { prop_assert!(f.remove(k)); }
        for k in &keys[split..] { prop_assert!(f.contains(k)); }
        let back = CountingBloomFilter::from_bytes(&f.to_bytes()).unwrap();
        for k in &keys[split..] { prop_assert!(back.contains(k)); }
    }
}
