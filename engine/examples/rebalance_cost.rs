//! What moving filter budgets cost in writes: loads a million random keys
//! (16 bytes, 100-byte values; the benchmark's mirrored settings: 8 MiB
//! memtables and tables, 64 MiB L1, 10 bits per key) with uniform and
//! with optimized filters, and prints the table bytes written and the
//! filters rebuilt by rebalancing before and after the settle
//! (`wait_for_background_work`, which brings every filter close to its
//! target).
//!
//! `cargo run --release -p bloomlsm --example rebalance_cost -- [KEYS]`

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keys: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |k| k.parse())?;
    let user_bytes = keys as f64 * 116.0;
    for optimized in [false, true] {
        let dir = tempfile::tempdir()?;
        let mut options = bloomlsm::Options {
            block_cache_bytes: 8 << 20,
            block_size: 4096,
            memtable_bytes: 8 << 20,
            target_file_bytes: 8 << 20,
            l1_bytes: 64 << 20,
            sync: bloomlsm::SyncMode::Never,
            ..bloomlsm::Options::default().with_bits_per_key(10.0)
        };
        if optimized {
            options.filter_policy = bloomlsm::FilterPolicy::Optimized { bits_per_key: 10.0 };
        }
        let db = bloomlsm::Db::open(dir.path(), options)?;
        let value = [7u8; 100];
        for i in 0..keys {
            let key = format!("{:016}", mix(i) % 10_000_000_000_000_000 / 2 * 2);
            db.put(key.as_bytes(), &value)?;
        }
        db.flush()?;
        let before = db.stats();
        db.wait_for_background_work()?;
        let after = db.stats();
        let policy = if optimized { "optimized" } else { "uniform" };
        println!(
            "{policy}: before the settle {:.1} MB written, {} filters rebuilt; after it {:.1} MB \
             (write amplification {:.2}), {} rebuilt; {} flushes, {} compactions",
            before.bytes_written as f64 / 1e6,
            before.filters_rebalanced,
            after.bytes_written as f64 / 1e6,
            after.bytes_written as f64 / user_bytes,
            after.filters_rebalanced,
            after.flushes,
            after.compactions,
        );
        db.close()?;
    }
    Ok(())
}
