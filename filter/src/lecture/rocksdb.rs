//! What RocksDB states about its cache-local Bloom filter (FastLocalBloom,
//! `format_version` 5 and later), kept as data for the comparisons of
//! [`super::blocked_k_curve`] and the tests. Facts, not code of RocksDB's:
//! its k thresholds and the two false positive rates it quotes.
//!
//! FastLocalBloom puts a key in one 512-bit cache line and sets k bits
//! there, drawn with replacement (a 32-bit hash multiplied by the golden
//! ratio for each probe, top 9 bits as the position): the same model as
//! our blocked filter, so its expected rate at k is
//! [`crate::math::blocked_false_positive_rate_exact`] at k.

/// RocksDB's choice of k (`FastLocalBloomImpl::ChooseNumProbes`): entry i
/// is the largest bits per key, in thousandths, that uses k = i + 1
/// (RocksDB picked them from tests of its implementation); above the last,
/// k = (millibits - 1) / 2000 - 1 up to 50,000 millibits, then 24.
pub const ROCKSDB_K_THRESHOLDS_MILLIBITS: [u32; 12] = [
    2080, 3580, 5100, 6640, 8300, 10070, 11720, 14001, 16050, 18300, 22001, 25501,
];

/// The k RocksDB's FastLocalBloom uses at `bits_per_key` (RocksDB rounds
/// bits per key to thousandths the same way).
pub fn rocksdb_num_hashes(bits_per_key: f64) -> u32 {
    let millibits = if bits_per_key > 0.0 {
        (bits_per_key * 1000.0).round().min(f64::from(u32::MAX)) as u32
    } else {
        0
    };
    match ROCKSDB_K_THRESHOLDS_MILLIBITS
        .iter()
        .position(|&t| millibits <= t)
    {
        Some(i) => i as u32 + 1,
        None if millibits > 50_000 => 24,
        None => (millibits - 1) / 2000 - 1,
    }
}

/// The false positive rates RocksDB quotes for FastLocalBloom: (bits per
/// key, k, rate). 0.957% at 10 bits per key and k = 6 is from the notes of
/// its implementation (util/bloom_impl.h); 0.0843% at 16 bits per key and
/// k = 9 from a comment in its Bloom tests (util/bloom_test.cc). The second
/// agrees with the exact model (0.0844%); the first is 1% below it (0.9665%,
/// and our re-implementation of RocksDB's probes measures 0.966% on a
/// million keys), so it cannot be the rate of exactly 10.0 bits per key.
pub const PUBLISHED_FPR: [(f64, u32, f64); 2] = [(10.0, 6, 0.009_57), (16.0, 9, 0.000_843)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_as_rocksdb_applies_them() {
        assert_eq!(rocksdb_num_hashes(2.08), 1);
        assert_eq!(rocksdb_num_hashes(2.081), 2);
        assert_eq!(rocksdb_num_hashes(10.0), 6);
        assert_eq!(rocksdb_num_hashes(10.071), 7);
        assert_eq!(rocksdb_num_hashes(14.0), 8);
        assert_eq!(rocksdb_num_hashes(16.0), 9);
        assert_eq!(rocksdb_num_hashes(20.0), 11);
        assert_eq!(rocksdb_num_hashes(28.0), 12);
        assert_eq!(rocksdb_num_hashes(28.001), 13);
        assert_eq!(rocksdb_num_hashes(50.0), 23);
        assert_eq!(rocksdb_num_hashes(60.0), 24);
        assert_eq!(rocksdb_num_hashes(0.0), 1);
    }
}
