//! Sizing RocksDB's Ribbon filter to a memory budget.
//!
//! `NewRibbonFilterPolicy` takes "Bloom-equivalent" bits per key: each
//! table's Ribbon filter is sized for the false positive rate a
//! FastLocalBloom filter of that many bits per key would have, so its bytes
//! follow from the rate and the table's key count, not from the argument
//! directly (and small filters fall back to Bloom when Bloom is smaller).
//! To compare at equal memory the benchmark asks RocksDB itself: it
//! flushes tables of the expected size into a scratch store at a candidate
//! Bloom-equivalent and bisects until the filters take the wanted bits per
//! key. (A fixed factor such as 0.7 is only right at one rate and size.)

use std::path::Path;

use anyhow::{Context, Result};

/// Tables flushed per candidate (their filters' rounding averages out).
const TABLES: u64 = 4;
/// Bisection steps: the interval shrinks to (3 - 1) x b / 2^STEPS.
const STEPS: u32 = 14;

/// Bits per key the Ribbon filters of `TABLES` tables of `keys_per_table`
/// keys take at Bloom-equivalent `bloom_bits`, measured by RocksDB's own
/// table properties (filter block size).
fn ribbon_bits_per_key(dir: &Path, bloom_bits: f64, keys_per_table: u64) -> Result<f64> {
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_ribbon_filter(bloom_bits);
    table.set_format_version(5);
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.set_block_based_table_factory(&table);
    options.set_compression_type(rocksdb::DBCompressionType::None);
    options.set_write_buffer_size(256 << 20);
    options.set_disable_auto_compactions(true);
    std::fs::remove_dir_all(dir).ok();
    let db = rocksdb::DB::open(&options, dir).context("opening the scratch RocksDB")?;
    let mut write = rocksdb::WriteOptions::default();
    write.disable_wal(true);
    for t in 0..TABLES {
        for i in 0..keys_per_table {
            let n = crate::keys::mix(t * keys_per_table + i);
            db.put_opt(n.to_be_bytes(), [], &write)?;
        }
        db.flush()?;
    }
    let props = db
        .property_value("rocksdb.aggregated-table-properties")?
        .unwrap_or_default();
    let bytes = crate::rocks_probes::parse_property(&props, "filter block size").unwrap_or(0);
    drop(db);
    std::fs::remove_dir_all(dir).ok();
    Ok(bytes as f64 * 8.0 / (TABLES * keys_per_table) as f64)
}

/// The Bloom-equivalent bits per key at which RocksDB's Ribbon filters of
/// tables of `keys_per_table` keys take `bits_per_key` bits per key,
/// found in a scratch store under `dir` (removed afterwards).
pub fn bloom_equivalent_for_memory(
    dir: &Path,
    bits_per_key: f64,
    keys_per_table: u64,
) -> Result<f64> {
    let keys_per_table = keys_per_table.max(1);
    // Ribbon takes at most as much as Bloom at the same rate, and about
    // 0.7 of it at common rates: the answer lies in [b, 3b].
    let (mut lo, mut hi) = (bits_per_key, 3.0 * bits_per_key);
    for _ in 0..STEPS {
        let mid = (lo + hi) / 2.0;
        if ribbon_bits_per_key(dir, mid, keys_per_table)? > bits_per_key {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(lo)
}
