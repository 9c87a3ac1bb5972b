//! No false negatives, for every kind, before and after serialization.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterBuilder,
    FilterKind,
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
    fn builder_and_any_filter(keys in hash_set(vec(any::<u8>(), 0..24), 0..300), blocked in any::<bool>()) {
        let kind = if blocked { FilterKind::Blocked } else { FilterKind::Standard };
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
