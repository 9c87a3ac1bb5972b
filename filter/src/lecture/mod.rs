//! The lecture's numbers beside the lecture's formulas and rates measured
//! on real filters, and two tables past the lecture: the blocked filter's
//! k at each bits per key beside RocksDB's ([`blocked_k_curve`]), and bits
//! per key against the information-theoretic bound for the standard,
//! blocked and Ribbon filters ([`beyond_bloom`]). Used by the `lecture`
//! example and `bloomlsm lecture`.

mod beyond_bloom;
mod blocked_k;
pub mod rocksdb;

pub use beyond_bloom::{BeyondBloomRow, beyond_bloom};
pub use blocked_k::{BlockedKRow, blocked_k_curve};

use crate::blocked::{BLOCK_BITS, BlockedBloomFilter};
use crate::counting::CountingBloomFilter;
use crate::filter_trait::{Filter, InsertFilter};
use crate::hash::KeyHash;
use crate::math;
use crate::standard::BloomFilter;

/// One line of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct LectureRow {
    /// The part of the lecture ("k sweep at 10 bits/key", ...).
    pub topic: &'static str,
    /// What is measured ("k=7 false positive rate", ...).
    pub quantity: String,
    /// The figure the lecture states.
    pub lecture: f64,
    /// The closed-form value for the same parameters.
    pub formula: f64,
    /// The value measured on a real filter (equal to `formula` for pure
    /// arithmetic rows such as byte counts).
    pub measured: f64,
    /// How to read the numbers: "percent", "fraction", "bytes", "count", "ratio".
    pub unit: &'static str,
}

fn key(tag: u8, i: u64) -> [u8; 9] {
    let mut k = [tag; 9];
    k[1..].copy_from_slice(&i.to_le_bytes());
    k
}

/// The hashes of the `items` keys every measured filter holds.
fn present_hashes(items: u64) -> Vec<KeyHash> {
    (0..items).map(|i| KeyHash::of(&key(b'p', i))).collect()
}

/// The share of `probes` keys never inserted that `filter` calls "maybe".
fn absent_rate<F: Filter + ?Sized>(filter: &F, probes: u64) -> f64 {
    if probes == 0 {
        return 0.0;
    }
    let hits = (0..probes)
        .filter(|&i| filter.contains_hash(KeyHash::of(&key(b'a', i))))
        .count();
    hits as f64 / probes as f64
}

fn measure<F: InsertFilter>(filter: &mut F, items: u64, probes: u64) -> f64 {
    for h in present_hashes(items) {
        filter.insert_hash(h);
    }
    absent_rate(filter, probes)
}

/// Builds every row. `items` keys go into each measured filter and
/// `probes` absent keys are asked (rates below 0.01% want 10 million).
pub fn lecture_report(items: u64, probes: u64) -> Vec<LectureRow> {
    let mut rows = Vec::new();
    let m = items * 10;
    for (k, lecture) in [
        (1, 9.52),
        (2, 3.29),
        (3, 1.74),
        (5, 0.94),
        (7, 0.82),
        (10, 1.02),
        (14, 1.90),
    ] {
        let measured = measure(&mut BloomFilter::new(m, k), items, probes);
        rows.push(LectureRow {
            topic: "k sweep at 10 bits/key",
            quantity: format!("k={k} false positive rate"),
            lecture,
            formula: math::false_positive_rate(items, m, k) * 100.0,
            measured: measured * 100.0,
            unit: "percent",
        });
    }
    for (bpk, lecture) in [(8.0, 2.1), (10.0, 0.82), (14.0, 0.12), (20.0, 0.0067)] {
        let mut f = BloomFilter::with_bits_per_key(items, bpk);
        let measured = measure(&mut f, items, probes);
        rows.push(LectureRow {
            topic: "bits per key at optimal k",
            quantity: format!("{bpk} bits/key (k={}) false positive rate", f.num_hashes()),
            lecture,
            formula: math::optimal_false_positive_rate(bpk) * 100.0,
            measured: measured * 100.0,
            unit: "percent",
        });
        if bpk == 10.0 {
            rows.push(LectureRow {
                topic: "bits per key at optimal k",
                quantity: "fraction of bits set at k=7, 10 bits/key".into(),
                lecture: 0.5,
                formula: math::expected_fill(items, f.num_bits(), f.num_hashes()),
                measured: f.fill_ratio(),
                unit: "fraction",
            });
        }
    }
    let mut blocked = BlockedBloomFilter::with_bits_per_key(items, 10.0);
    let measured = measure(&mut blocked, items, probes);
    rows.push(LectureRow {
        topic: "cache-blocked filter",
        quantity: format!(
            "10 bits/key (k={}) false positive rate (first figure: RocksDB's)",
            blocked.num_hashes()
        ),
        lecture: rocksdb::PUBLISHED_FPR[0].2 * 100.0,
        formula: math::blocked_false_positive_rate_exact(10.0, blocked.num_hashes(), BLOCK_BITS)
            * 100.0,
        measured: measured * 100.0,
        unit: "percent",
    });
    for (n, lecture) in [(3u64, 0.43), (12, 0.89)] {
        let rows_measured = 10_000u64;
        let total: f64 = (0..rows_measured)
            .map(|r| {
                let mut f = BloomFilter::new(16, 3);
                for i in 0..n {
                    f.insert_hash(KeyHash::of(&key(b'r', r * 100 + i)));
                }
                f.fill_ratio()
            })
            .sum();
        rows.push(LectureRow {
            topic: "16-bit row, k=3",
            quantity: format!(
                "fraction of bits set after {n} items (mean of {rows_measured} rows)"
            ),
            lecture,
            formula: math::expected_fill(n, 16, 3),
            measured: total / rows_measured as f64,
            unit: "fraction",
        });
    }
    let urls = 1_000_000_000u64;
    let exact = urls as f64 * 64.0;
    let filter = urls as f64 * 10.0 / 8.0;
    let at_ten = rows
        .iter()
        .find(|r| r.quantity.starts_with("10 bits/key (k=7)"))
        .map_or(0.0, |r| r.measured);
    let crawler = [
        (
            "exact set of a billion 64-byte URLs",
            64e9,
            exact,
            exact,
            "bytes",
        ),
        (
            "filter of a billion URLs at 10 bits each",
            1.25e9,
            filter,
            filter,
            "bytes",
        ),
        (
            "exact set / filter",
            51.0,
            exact / filter,
            exact / filter,
            "ratio",
        ),
        (
            "URLs an exact set holds in 8 GB",
            125e6,
            8e9 / 64.0,
            8e9 / 64.0,
            "count",
        ),
        (
            "new URLs wrongly called seen, per billion",
            8e6,
            math::false_positive_rate(urls, urls * 10, 7) * urls as f64,
            at_ten / 100.0 * urls as f64,
            "count",
        ),
    ];
    for (quantity, lecture, formula, measured, unit) in crawler {
        rows.push(LectureRow {
            topic: "the crawler",
            quantity: quantity.into(),
            lecture,
            formula,
            measured,
            unit,
        });
    }
    let plain = BloomFilter::with_bits_per_key(items, 10.0);
    let counting = CountingBloomFilter::with_bits_per_key(items, 10.0);
    let ratio = counting.memory_bytes() as f64 / plain.memory_bytes() as f64;
    rows.push(LectureRow {
        topic: "deletion",
        quantity: "counting filter (4-bit counters) size / plain filter size".into(),
        lecture: 4.0,
        formula: 4.0,
        measured: ratio,
        unit: "ratio",
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_has_every_topic() {
        let rows = lecture_report(2_000, 20_000);
        assert!(rows.len() >= 20);
        for topic in [
            "k sweep at 10 bits/key",
            "bits per key at optimal k",
            "16-bit row, k=3",
            "the crawler",
            "deletion",
        ] {
            assert!(rows.iter().any(|r| r.topic == topic), "{topic}");
        }
        let ratio = rows
            .iter()
            .find(|r| r.topic == "deletion")
            .map(|r| r.measured);
        assert!(ratio.is_some_and(|r| (r - 4.0).abs() < 0.05));
    }
}
