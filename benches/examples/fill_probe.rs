//! Fill only, on bloomlsm and RocksDB with the benchmark's mirrored
//! settings (its defaults), and what each wrote: put and settle time, write
//! amplification, the tree, our flush and compaction counts, and RocksDB's
//! flush and compaction events from its LOG (entries and memory per flush).
//!
//! `cargo run --release -p bloomlsm-bench --example fill_probe -- KEYS [ENGINES]`
//! (KEYS default 1000000, ENGINES default `bloomlsm,rocksdb`).

use std::time::Instant;

use anyhow::{Context, Result};
use bloomlsm_bench::engines::{Bloom, Engine, Mirror};
use bloomlsm_bench::keys::{present_key, value};
use bloomlsm_bench::run::open_engine;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let keys: u64 = match args.next() {
        Some(n) => n.parse().context("KEYS must be a number")?,
        None => 1_000_000,
    };
    let engines: Vec<String> = args.next().map_or_else(
        || vec!["bloomlsm".into(), "rocksdb".into()],
        |s| s.split(',').map(String::from).collect(),
    );
    let (key_bytes, value_bytes) = (16, 100);
    let m = Mirror::bench_defaults();
    let temp = tempfile::tempdir_in("/var/tmp").context("creating a directory")?;
    for name in &engines {
        let dir = temp.path().join(name);
        let bloom = match name.as_str() {
            "bloomlsm" => Some(Bloom::open(
                name,
                &dir,
                &m,
                bloomlsm::FilterKind::Blocked,
                false,
            )?),
            _ => None,
        };
        let other = match bloom {
            Some(_) => None,
            None => Some(open_engine(name, &dir, &m, "uniform")?),
        };
        let e: &dyn Engine = match (&bloom, &other) {
            (Some(b), _) => b,
            (None, Some(o)) => o.as_ref(),
            (None, None) => unreachable!("one of them was opened"),
        };
        let start = Instant::now();
        for i in 0..keys {
            e.put(&present_key(i, key_bytes), &value(i, value_bytes))?;
        }
        let puts = start.elapsed();
        e.settle()?;
        let total = start.elapsed();
        let written = e.space()?.table_bytes_written;
        let user = keys * (key_bytes + value_bytes) as u64;
        println!(
            "{name}: keys {keys} puts {:.2}s settle {:.2}s fill ops/s {:.0} write amplification {:.3} ({written} bytes)",
            puts.as_secs_f64(),
            (total - puts).as_secs_f64(),
            keys as f64 / total.as_secs_f64(),
            written as f64 / user as f64,
        );
        println!("  tree: {}", e.levels()?);
        if let Some(b) = &bloom {
            let s = b.db().stats();
            for (level, l) in s.levels.iter().enumerate().filter(|(_, l)| l.tables > 0) {
                println!("  L{level}: {} tables, {} bytes", l.tables, l.file_bytes);
            }
            println!(
                "  flushes {} compactions {} trivial moves {} bytes compacted (read) {} write stalls {}",
                s.flushes, s.compactions, s.trivial_moves, s.bytes_compacted_read, s.write_stalls
            );
        }
        drop(bloom);
        drop(other);
        if let Ok(log) = std::fs::read_to_string(dir.join("LOG")) {
            for line in log.lines() {
                if line.contains("\"flush_started\"") || line.contains("\"compaction_finished\"") {
                    let at = line.find("\"event\"").unwrap_or(0);
                    println!("  {}", &line[at..]);
                }
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(())
}
