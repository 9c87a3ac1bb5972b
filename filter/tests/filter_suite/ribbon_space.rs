//! Ribbon spends at most 1.10 x log2(1/eps) bits per key for false positive
//! rates eps from 5% to 0.01%, eps measured on built filters.
//!
//! Sampling bound: a filter's measured rate p from N absent probes is
//! binomial; its true rate is below p + 5 sqrt(p (1 - p) / N) + 1/N except
//! about once in 3 million runs. The bound log2(1/eps) is taken at that
//! upper rate (the fewest bits a filter with the highest plausible rate
//! could need), so the check errs against the filter.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{Filter, KeyHash, RibbonFilter};

fn key(tag: u8, i: u64) -> KeyHash {
    let mut k = [tag; 9];
    k[1..].copy_from_slice(&i.to_le_bytes());
    KeyHash::of(&k)
}

#[test]
fn bits_per_key_within_ten_percent_of_the_bound() {
    let n = 200_000u64;
    let hashes: Vec<KeyHash> = (0..n).map(|i| key(b'p', i)).collect();
    for (eps, probes) in [
        (0.05, 400_000u64),
        (0.02, 500_000),
        (0.01, 1_000_000),
        (0.005, 1_000_000),
        (0.001, 2_000_000),
        (0.0005, 4_000_000),
        (0.0001, 10_000_000),
    ] {
        let f = RibbonFilter::from_hashes_with_fpr(&hashes, eps);
        // Everything serialized (header, parameters, checksum) counts.
        let bits_per_key = (f.to_bytes().len() * 8) as f64 / n as f64;
        let hits = (0..probes)
            .filter(|&i| f.contains_hash(key(b'a', i)))
            .count() as f64;
        let p = hits / probes as f64;
        let upper = p + 5.0 * (p * (1.0 - p) / probes as f64).sqrt() + 1.0 / probes as f64;
        let bound = -upper.log2();
        println!(
            "eps {eps}: {bits_per_key:.3} bits/key, measured {:.5}% (expected {:.5}%), \
             bound at the upper rate {bound:.3} bits/key, ratio {:.4}",
            p * 100.0,
            f.theoretical_fpr() * 100.0,
            bits_per_key / bound
        );
        assert!(
            bits_per_key <= 1.10 * bound,
            "eps {eps}: {bits_per_key} bits/key > 1.10 x {bound}"
        );
        // And the rate is the one it was sized for (within sampling error
        // and 3% for this filter's own luck).
        let sigma = (probes as f64 * eps).sqrt();
        assert!(
            (hits - probes as f64 * eps).abs() <= 5.0 * sigma + 0.03 * probes as f64 * eps,
            "eps {eps}: measured {p}"
        );
    }
}
