//! A fixed read workload on a store built once, for profiling the read
//! path at sizes past the CPU's caches (`perf record`, `valgrind
//! --tool=cachegrind`): the store in DIR is loaded with KEYS random keys
//! (16 bytes, 100-byte values, the benchmark's mirrored settings: 8 MiB
//! memtables and tables, 64 MiB L1, 8 MiB block cache, 10 bits per key)
//! unless it already holds them, then GETS absent and GETS present gets
//! are timed, with direct reads when `DIRECT=1` (`ONLY=absent` or
//! `ONLY=present` times one kind), from `THREADS` threads at once (1),
//! with at most `MAX_OPEN_FILES` table files open (`Options::max_open_files`;
//! unset: every table's file open).
//!
//! `cargo run --release -p bloomlsm --example read_profile -- DIR KEYS [GETS]`

use std::time::Instant;

/// SplitMix64, the benchmark's key permutation.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

const MODULUS: u64 = 10_000_000_000_000_000;

/// Present keys are even numbers, absent ones odd: never equal, and
/// interleaved in key order, so only filters rule absent ones out.
fn key(i: u64, present: bool) -> Vec<u8> {
    let n = if present {
        mix(i) % MODULUS / 2 * 2
    } else {
        mix(i ^ 0x5555_5555) % MODULUS / 2 * 2 + 1
    };
    format!("{n:016}").into_bytes()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: read_profile DIR KEYS [GETS]";
    let dir = std::path::PathBuf::from(args.next().ok_or(usage)?);
    let keys: u64 = args.next().ok_or(usage)?.parse()?;
    let gets: u64 = args.next().map_or(Ok(200_000), |g| g.parse())?;
    let direct = std::env::var("DIRECT").is_ok_and(|v| v == "1");
    let threads: u64 = std::env::var("THREADS")
        .map_or(Ok(1), |t| t.parse())?
        .max(1);
    let max_open_files = match std::env::var("MAX_OPEN_FILES") {
        Ok(n) => Some(n.parse()?),
        Err(_) => None,
    };
    let options = bloomlsm::Options {
        max_open_files,
        block_cache_bytes: 8 << 20,
        block_size: 4096,
        memtable_bytes: 8 << 20,
        target_file_bytes: 8 << 20,
        l1_bytes: 64 << 20,
        sync: bloomlsm::SyncMode::Never,
        use_direct_reads: direct,
        ..bloomlsm::Options::default().with_bits_per_key(10.0)
    };
    let loaded_marker = dir.join(format!("read-profile-loaded-{keys}"));
    let db = bloomlsm::Db::open(&dir, options)?;
    if !loaded_marker.exists() {
        let t = Instant::now();
        let value = [7u8; 100];
        for i in 0..keys {
            db.put(&key(i, true), &value)?;
        }
        db.flush()?;
        db.wait_for_background_work()?;
        std::fs::write(&loaded_marker, b"")?;
        eprintln!("loaded {keys} keys in {:.1} s", t.elapsed().as_secs_f64());
    }
    let tables: Vec<u64> = db.stats().levels.iter().map(|l| l.tables).collect();
    eprintln!("tables per level: {tables:?}");
    let only = std::env::var("ONLY").unwrap_or_default();
    for present in [false, true] {
        if (only == "absent" && present) || (only == "present" && !present) {
            continue;
        }
        let t = Instant::now();
        let found: u64 = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|w| {
                    let db = &db;
                    scope.spawn(move || -> Result<u64, bloomlsm::Error> {
                        let mut found = 0u64;
                        for g in (w..gets).step_by(threads as usize) {
                            let i = mix(g ^ 0xabcd) % keys;
                            found += u64::from(db.get(&key(i, present))?.is_some());
                        }
                        Ok(found)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|h| h.join().expect("a reader thread panicked"))
                .sum::<Result<u64, _>>()
        })?;
        let seconds = t.elapsed().as_secs_f64();
        let ns = seconds * 1e9 / gets as f64;
        let what = if present { "present" } else { "absent" };
        println!(
            "{what} gets, {threads} threads: {ns:.0} ns each ({:.0} gets/s), {found} of {gets} found",
            gets as f64 / seconds
        );
        if max_open_files.is_some() {
            let stats = db.stats();
            eprintln!(
                "table files open {:?}, opened {} times",
                stats.open_table_files, stats.table_file_opens
            );
        }
    }
    db.close()?;
    Ok(())
}
