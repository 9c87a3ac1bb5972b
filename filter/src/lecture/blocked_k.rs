//! The blocked filter's k at each bits per key, its expected and measured
//! false positive rate, beside RocksDB's choice of k and its expected rate.

use super::rocksdb::{PUBLISHED_FPR, rocksdb_num_hashes};
use super::{absent_rate, present_hashes};
use crate::blocked::{BLOCK_BITS, BlockedBloomFilter};
use crate::filter_trait::InsertFilter;
use crate::math;

/// One bits-per-key setting of the curve.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockedKRow {
    /// Bits per key.
    pub bits_per_key: f64,
    /// The k our blocked filter uses ([`math::blocked_num_hashes`]).
    pub k: u32,
    /// The standard filter's k, round((m/n) ln 2), for contrast.
    pub standard_k: u32,
    /// Our expected rate: [`math::blocked_false_positive_rate_exact`] at `k`.
    pub expected_fpr: f64,
    /// Our rate measured on a real filter.
    pub measured_fpr: f64,
    /// The k RocksDB's FastLocalBloom uses ([`rocksdb_num_hashes`]).
    pub rocksdb_k: u32,
    /// RocksDB's expected rate: the same model at `rocksdb_k`.
    pub rocksdb_expected_fpr: f64,
    /// The rate RocksDB quotes for this setting, where it quotes one.
    pub rocksdb_published_fpr: Option<f64>,
}

/// The curve for 4 to 20 bits per key: `items` keys per filter, `probes`
/// absent keys each (20 bits per key is about 0.02%: 10 million probes
/// measure it to 2.5%).
pub fn blocked_k_curve(items: u64, probes: u64) -> Vec<BlockedKRow> {
    let hashes = present_hashes(items);
    (4..=20)
        .map(|b| {
            let bits_per_key = f64::from(b);
            let mut filter = BlockedBloomFilter::with_bits_per_key(items, bits_per_key);
            for &h in &hashes {
                filter.insert_hash(h);
            }
            let k = math::blocked_num_hashes(bits_per_key);
            let rocksdb_k = rocksdb_num_hashes(bits_per_key);
            BlockedKRow {
                bits_per_key,
                k,
                standard_k: math::optimal_num_hashes(bits_per_key),
                expected_fpr: math::blocked_false_positive_rate_exact(bits_per_key, k, BLOCK_BITS),
                measured_fpr: absent_rate(&filter, probes),
                rocksdb_k,
                rocksdb_expected_fpr: math::blocked_false_positive_rate_exact(
                    bits_per_key,
                    rocksdb_k,
                    BLOCK_BITS,
                ),
                rocksdb_published_fpr: PUBLISHED_FPR
                    .iter()
                    .find(|p| p.0 == bits_per_key)
                    .map(|p| p.2),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_worse_than_rocksdb_in_expectation() {
        let rows = blocked_k_curve(20_000, 20_000);
        assert_eq!(rows.len(), 17);
        for r in &rows {
            assert!(r.expected_fpr <= r.rocksdb_expected_fpr, "{r:?}");
            assert!(r.k <= r.standard_k);
        }
        let ten = &rows[6];
        assert_eq!((ten.bits_per_key, ten.k, ten.rocksdb_k), (10.0, 6, 6));
        assert_eq!(ten.rocksdb_published_fpr, Some(0.009_57));
        // Where the choices differ (14 bits per key: 9 against RocksDB's 8).
        let fourteen = &rows[10];
        assert_eq!((fourteen.k, fourteen.rocksdb_k), (9, 8));
        assert!(fourteen.expected_fpr < fourteen.rocksdb_expected_fpr);
    }
}
