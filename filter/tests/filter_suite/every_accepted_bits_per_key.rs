//! The engine accepts any bits per key in 0..=100 (`FilterPolicy::validate`)
//! and builds table filters through `FilterBuilder`: every kind at every
//! such value, whole and fractional, must hold every key it was given,
//! before and after serialization. `no_false_negatives.rs` draws bits per
//! key below 24 (40 for ribbon) only.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{AnyFilter, BloomFilter, Filter, FilterBuilder, FilterKind};
use proptest::collection::{hash_set, vec};
use proptest::prelude::*;

fn check(kind: FilterKind, bits_per_key: f64, keys: &[Vec<u8>]) {
    let mut b = FilterBuilder::new(kind, bits_per_key);
    for k in keys {
        b.add_hash(BloomFilter::key_hash(k));
    }
    // Every value the engine accepts builds a filter: a build error would
    // leave the table without one (read, but never ruled out).
    let f = b
        .finish()
        .unwrap_or_else(|e| panic!("{kind:?} at {bits_per_key} bits/key: {e}"));
    let back = AnyFilter::from_bytes(&f.to_bytes()).unwrap();
    for k in keys {
        assert!(
            f.contains(k),
            "{kind:?} at {bits_per_key} bits/key forgot {k:?}"
        );
        assert!(
            back.contains(k),
            "{kind:?} at {bits_per_key} bits/key forgot {k:?} once read back"
        );
    }
}

#[test]
fn every_kind_at_the_edges_of_the_accepted_range() {
    let keys: Vec<Vec<u8>> = (0..500u32).map(|i| format!("k{i}").into_bytes()).collect();
    for kind in [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ] {
        for bpk in [
            1.0, 1.5, 23.9, 24.0, 31.5, 32.0, 40.0, 63.9, 64.0, 64.5, 80.0, 99.99, 100.0,
        ] {
            for n in [0usize, 1, 2, 7, 64, 500] {
                check(kind, bpk, &keys[..n]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn high_bits_per_key_never_forgets(
        keys in hash_set(vec(any::<u8>(), 0..24), 0..300),
        bpk in 24.0f64..=100.0,
        which in 0u8..3,
    ) {
        let kind = [FilterKind::Blocked, FilterKind::Standard, FilterKind::Ribbon][usize::from(which)];
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        check(kind, bpk, &keys);
    }
}
