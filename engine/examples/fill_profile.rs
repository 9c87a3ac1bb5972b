//! A fixed write workload for profiling (`valgrind --tool=callgrind`):
//! 300k random puts of 16-byte keys and 100-byte values, then waits for
//! flushes and compactions to settle.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("bloomlsm-fill-profile-{}", std::process::id()));
    let options = bloomlsm::Options {
        memtable_bytes: 2 << 20,
        l1_bytes: 8 << 20,
        target_file_bytes: 2 << 20,
        ..bloomlsm::Options::default()
    };
    let db = bloomlsm::Db::open(&dir, options)?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let value = [7u8; 100];
    for _ in 0..300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        db.put(
            format!("{:016}", x % 10_000_000_000_000_000).as_bytes(),
            &value,
        )?;
    }
    db.flush()?;
    db.wait_for_background_work()?;
    let stats = db.stats();
    println!(
        "{} flushes, {} compactions, {} bytes written",
        stats.flushes, stats.compactions, stats.bytes_written
    );
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
