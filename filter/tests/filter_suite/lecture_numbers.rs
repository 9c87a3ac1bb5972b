//! The lecture's numbers, measured on real filters.
//!
//! Tolerance: a measured false positive count X over N absent probes is
//! binomial with mean N*p, so it must lie within 5 standard deviations
//! (sqrt(N p (1-p))) of N*p for the exact formula's p, plus 3% of N*p for the
//! formula's own approximation error (it treats the k bits of a key as
//! independent). A correct filter fails this about once in 3 million runs; a
//! filter off by 10% fails it every time at these N.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::math::{
    blocked_false_positive_rate_exact, expected_fill, false_positive_rate,
    optimal_false_positive_rate, optimal_num_hashes,
};
use bloomlsm_filter::{BLOCK_BITS, BlockedBloomFilter, BloomFilter, Filter, InsertFilter, KeyHash};

fn present_key(i: u64) -> [u8; 9] {
    let mut k = [b'p'; 9];
    k[1..].copy_from_slice(&i.to_le_bytes());
    k
}

fn absent_key(i: u64) -> [u8; 9] {
    let mut k = [b'a'; 9];
    k[1..].copy_from_slice(&i.to_le_bytes());
    k
}

fn fill<F: InsertFilter>(filter: &mut F, n: u64) {
    for i in 0..n {
        filter.insert_hash(KeyHash::of(&present_key(i)));
    }
}

fn measured_fpr<F: Filter>(filter: &F, probes: u64) -> f64 {
    let hits = (0..probes)
        .filter(|&i| filter.contains_hash(KeyHash::of(&absent_key(i))))
        .count();
    hits as f64 / probes as f64
}

fn assert_within_sampling_error(label: &str, measured: f64, expected: f64, probes: u64) {
    let n = probes as f64;
    let sigma = (n * expected * (1.0 - expected)).sqrt();
    let allowed = 5.0 * sigma + 0.03 * n * expected;
    let diff = (measured * n - expected * n).abs();
    println!(
        "{label}: measured {:.4}% expected {:.4}% ({probes} probes)",
        measured * 100.0,
        expected * 100.0
    );
    assert!(
        diff <= allowed,
        "{label}: measured {measured} vs expected {expected}: off by {diff} > {allowed}"
    );
}

#[test]
fn k_sweep_at_ten_bits_per_key() {
    let n = 100_000;
    let m = 1_000_000;
    let probes = 1_000_000;
    let lecture = [
        (1, 9.52),
        (2, 3.29),
        (3, 1.74),
        (5, 0.94),
        (7, 0.82),
        (10, 1.02),
        (14, 1.90),
    ];
    let mut measured = Vec::new();
    for (k, lecture_percent) in lecture {
        let mut filter = BloomFilter::new(m, k);
        fill(&mut filter, n);
        let fpr = measured_fpr(&filter, probes);
        assert_within_sampling_error(&format!("k={k}"), fpr, false_positive_rate(n, m, k), probes);
        // The lecture's rounded figure, within its rounding and sampling.
        assert!(
            (fpr * 100.0 - lecture_percent).abs() < lecture_percent * 0.06,
            "k={k}: {fpr}"
        );
        measured.push((k, fpr));
    }
    let rate = |k: u32| {
        measured
            .iter()
            .find(|(kk, _)| *kk == k)
            .map(|(_, r)| *r)
            .unwrap_or(1.0)
    };
    let best = measured
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|m| m.0);
    assert_eq!(best, Some(7), "7 hashes is the best at 10 bits per key");
    assert!(rate(10) > rate(7), "10 hashes is worse than 7");
    assert!(rate(14) > rate(3), "14 hashes is worse than 3");
}

#[test]
fn bits_per_key_sweep_at_optimal_k() {
    let n = 100_000;
    for (bpk, lecture_percent, probes) in [
        (8.0, 2.1, 1_000_000),
        (10.0, 0.82, 1_000_000),
        (14.0, 0.12, 2_000_000),
        (20.0, 0.0067, 10_000_000),
    ] {
        let mut filter = BloomFilter::with_bits_per_key(n, bpk);
        fill(&mut filter, n);
        let k = optimal_num_hashes(bpk);
        assert_eq!(filter.num_hashes(), k);
        let fpr = measured_fpr(&filter, probes);
        assert_within_sampling_error(
            &format!("{bpk} bits/key"),
            fpr,
            false_positive_rate(n, filter.num_bits(), k),
            probes,
        );
        // The lecture quotes the closed form at the real-valued optimum.
        assert!(
            (optimal_false_positive_rate(bpk) * 100.0 - lecture_percent).abs()
                < lecture_percent * 0.05
        );
        assert!(
            (fpr * 100.0 - lecture_percent).abs() < lecture_percent * 0.12,
            "{bpk}: {fpr}"
        );
    }
}

#[test]
fn half_the_bits_are_set_at_optimal_k() {
    for bpk in [8.0, 10.0, 14.0, 20.0] {
        let mut filter = BloomFilter::with_bits_per_key(100_000, bpk);
        fill(&mut filter, 100_000);
        println!("{bpk} bits/key: fill {:.4}", filter.fill_ratio());
        // Exactly half at the real-valued optimum; k is rounded to a whole
        // number, which moves the fill by at most a few percent.
        let expected = expected_fill(100_000, filter.num_bits(), filter.num_hashes());
        assert!(
            (filter.fill_ratio() - expected).abs() < 0.005,
            "{bpk}: {}",
            filter.fill_ratio()
        );
        assert!(
            (filter.fill_ratio() - 0.5).abs() < 0.03,
            "{bpk}: {}",
            filter.fill_ratio()
        );
        let estimated = filter.estimated_items();
        assert!(
            (estimated - 100_000.0).abs() < 1_000.0,
            "estimated items {estimated}"
        );
    }
}

#[test]
fn sixteen_bit_row_fills_as_the_lecture_says() {
    // One 16-bit row is too noisy to measure, so average many rows.
    let rows = 20_000u64;
    for (items, lecture) in [(3u64, 0.43), (12, 0.89)] {
        let mut total = 0.0;
        for row in 0..rows {
            let mut filter = BloomFilter::new(16, 3);
            for i in 0..items {
                filter.insert_hash(KeyHash::of(&present_key(row * 100 + i)));
            }
            total += filter.fill_ratio();
        }
        let mean = total / rows as f64;
        let approx = expected_fill(items, 16, 3);
        // The exact expectation without the e^x approximation: 1 - (1 - 1/m)^(kn).
        let exact = 1.0 - (15.0f64 / 16.0).powi(3 * items as i32);
        println!("{items} items: mean fill {mean:.4}, formula {approx:.4}, exact {exact:.4}");
        assert!((approx - lecture).abs() < 0.01);
        assert!((mean - exact).abs() < 0.01, "{items}: {mean} vs {exact}");
    }
}

#[test]
fn blocked_filter_at_ten_bits_per_key_is_under_one_percent() {
    // This filter uses k = 6 (its expected rate is 0.9665%; k = 7 would be
    // 0.9686%); 4 million probes put 1.0% seven standard deviations away.
    let n = 200_000;
    let probes = 4_000_000;
    let mut filter = BlockedBloomFilter::with_bits_per_key(n, 10.0);
    assert_eq!(filter.num_hashes(), 6);
    fill(&mut filter, n);
    let fpr = measured_fpr(&filter, probes);
    let model =
        blocked_false_positive_rate_exact(filter.bits_per_key(), filter.num_hashes(), BLOCK_BITS);
    assert_within_sampling_error("blocked 10 bits/key", fpr, model, probes);
    assert!(fpr <= 0.010, "blocked filter at 10 bits/key: {fpr}");
}

#[test]
fn crawler_arithmetic() {
    let urls = 1_000_000_000u64;
    let exact_bytes = urls * 64;
    let filter_bytes = urls * 10 / 8;
    assert_eq!(exact_bytes, 64_000_000_000);
    assert_eq!(filter_bytes, 1_250_000_000);
    assert_eq!(exact_bytes / filter_bytes, 51);
    assert_eq!(8_000_000_000u64 / 64, 125_000_000);
    let wrongly_seen = false_positive_rate(urls, urls * 10, 7) * urls as f64;
    assert!((wrongly_seen / 1e6 - 8.2).abs() < 0.1, "{wrongly_seen}");
}
