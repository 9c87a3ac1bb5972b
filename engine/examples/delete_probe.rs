//! What deletion-triggered compaction (`Options::deletion_compaction_ratio`)
//! buys and costs on a store of some size: KEYS keys (16 bytes, 100-byte
//! values, in random order) are loaded into a fresh store under DIR with
//! 1 MiB memtables and tables, a 4 MiB L1 and 10 bits per key; then 40% of
//! the key space is deleted as 8 ranges of consecutive keys (the store
//! shrinks, so no level goes over its budget), the store is flushed and
//! settled (never a full `compact()`), and gets of 20,000 deleted keys and
//! 20,000 present ones are traced. Once per ratio (off, 0.5, 0.2): data
//! blocks read per get, tombstones left in the tree, table bytes written
//! over the load per user byte, table bytes on disk, and the picks made.
//!
//! `cargo run --release -p bloomlsm --example delete_probe -- DIR KEYS`

/// Keys in key order are `i`'s decimal digits: key `i` sorts before key
/// `i + 1`, so a range of numbers is a range of keys.
fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

/// SplitMix64: the load's order.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Whether key `i` of `keys` is deleted: 8 ranges of a twentieth of the
/// key space each, spread over it.
fn deleted(i: u64, keys: u64) -> bool {
    let twentieth = (keys / 20).max(1);
    let slot = i / twentieth;
    slot % 5 < 2 && slot < 20
}

fn blocks_per_get(
    db: &bloomlsm::Db,
    keys: impl Iterator<Item = u64>,
) -> Result<f64, bloomlsm::Error> {
    let (mut gets, mut blocks) = (0u64, 0u64);
    for i in keys {
        let (_, trace) = db.get_traced(&key(i))?;
        blocks += trace.steps.iter().filter(|s| s.block.is_some()).count() as u64;
        gets += 1;
    }
    Ok(blocks as f64 / gets.max(1) as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: delete_probe DIR KEYS";
    let root = std::path::PathBuf::from(args.next().ok_or(usage)?);
    let keys: u64 = args.next().ok_or(usage)?.parse()?;
    println!(
        "| ratio | blocks per get, deleted keys | blocks per get, present keys | tombstones left | table MB | write amplification | picks | tables per level |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for ratio in [None, Some(0.5), Some(0.2)] {
        let dir = root.join(format!("delete-probe-{ratio:?}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        let options = bloomlsm::Options {
            memtable_bytes: 1 << 20,
            target_file_bytes: 1 << 20,
            l1_bytes: 4 << 20,
            deletion_compaction_ratio: ratio,
            ..bloomlsm::Options::default().with_bits_per_key(10.0)
        };
        let db = bloomlsm::Db::open(&dir, options)?;
        let value = [7u8; 100];
        let mut order: Vec<u64> = (0..keys).collect();
        order.sort_by_key(|&i| mix(i));
        for &i in &order {
            db.put(&key(i), &value)?;
        }
        let mut user_bytes = keys * (16 + 100);
        for i in (0..keys).filter(|&i| deleted(i, keys)) {
            db.delete(&key(i))?;
            user_bytes += 16;
        }
        db.flush()?;
        db.wait_for_background_work()?;
        let sample = |want_deleted: bool| {
            (0..keys)
                .map(|n| mix(n ^ 0xdead) % keys)
                .filter(move |&i| deleted(i, keys) == want_deleted)
                .take(20_000)
        };
        let on_deleted = blocks_per_get(&db, sample(true))?;
        let on_present = blocks_per_get(&db, sample(false))?;
        let s = db.stats();
        println!(
            "| {} | {on_deleted:.3} | {on_present:.3} | {} | {:.1} | {:.2} | {} | {:?} |",
            ratio.map_or("off".to_string(), |r| r.to_string()),
            s.total.tombstones,
            s.total.file_bytes as f64 / 1e6,
            s.bytes_written as f64 / user_bytes as f64,
            s.deletion_compactions,
            s.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
        );
        db.close()?;
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
