//! `bloomlsm-bench`: the read-heavy benchmark of bloomlsm against RocksDB,
//! both engines in the same run with mirrored settings.

use std::path::PathBuf;

use anyhow::Result;
use bloomlsm_bench::engines::Mirror;
use bloomlsm_bench::run::{RunConfig, run};
use bloomlsm_bench::workload::Sizes;
use clap::Parser;

/// Read-heavy benchmark: bloomlsm vs bloomlsm without filters vs RocksDB.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Args {
    /// Keys loaded by `fill`.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Operations per read workload (readrandom, readmissing, mixed).
    #[arg(long, default_value_t = 1_000_000)]
    ops: u64,
    /// Key length in bytes.
    #[arg(long, default_value_t = 16)]
    key_bytes: usize,
    /// Value length in bytes.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Filter bits per key on both engines.
    #[arg(long, default_value_t = 10.0)]
    bits_per_key: f64,
    /// Block cache capacity in bytes on both engines.
    #[arg(long, default_value_t = 8 << 20)]
    block_cache_bytes: u64,
    /// Memtable / write buffer bytes on both engines.
    #[arg(long, default_value_t = 8 << 20)]
    memtable_bytes: usize,
    /// Byte budget of L1 on both engines (level n+1 gets 10x level n);
    /// smaller budgets make deeper trees.
    #[arg(long, default_value_t = 64 << 20)]
    l1_bytes: u64,
    /// Engines to run, in order: bloomlsm (blocked filters, uniform bits per
    /// key), bloomlsm-optimized (same memory spread over levels, Monkey),
    /// bloomlsm-standard (standard filters), bloomlsm-nofilter, rocksdb.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bloomlsm,bloomlsm-optimized,bloomlsm-nofilter,rocksdb"
    )]
    engines: Vec<String>,
    /// Filter policy of the `bloomlsm` engine: uniform (the same bits per
    /// key in every level) or optimized (Monkey: the same memory spread over
    /// levels by size). `bloomlsm-optimized` always runs optimized.
    #[arg(long, default_value = "uniform", value_parser = ["uniform", "optimized"])]
    filter_policy: String,
    /// Also sweep bits per key {0,2,4,6,8,10,14,20} on both engines.
    #[arg(long)]
    sweep: bool,
    /// Keys per sweep point.
    #[arg(long, default_value_t = 200_000)]
    sweep_keys: u64,
    /// URLs streamed by the crawler workload.
    #[arg(long, default_value_t = 200_000)]
    crawler_urls: u64,
    /// Shrink everything for a smoke run (seconds).
    #[arg(long)]
    quick: bool,
    /// Parent directory for the engines' temporary directories.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where report.md, report.json and the SVG plots go.
    #[arg(long, default_value = "target/bench-report")]
    out: PathBuf,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let (keys, ops, crawler, sweep_keys) = if a.quick {
        (20_000, 20_000, 5_000, 5_000)
    } else {
        (a.keys, a.ops, a.crawler_urls, a.sweep_keys)
    };
    let config = RunConfig {
        sizes: Sizes {
            keys,
            ops,
            key_bytes: a.key_bytes,
            value_bytes: a.value_bytes,
            scan_length: 50,
            crawler_urls: crawler,
            crawler_repeat_fraction: 0.3,
        },
        mirror: Mirror {
            bits_per_key: a.bits_per_key,
            block_cache_bytes: a.block_cache_bytes,
            block_size: 4096,
            memtable_bytes: a.memtable_bytes,
            target_file_bytes: 8 << 20,
            l1_bytes: a.l1_bytes,
        },
        engines: a.engines,
        sweep: a.sweep,
        sweep_bits: vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 14.0, 20.0],
        sweep_keys,
        filter_policy: a.filter_policy,
    };
    let report = run(&config, a.dir.as_deref())?;
    println!("{}", report.markdown());
    report.write(&a.out)?;
    eprintln!("report written to {}", a.out.display());
    Ok(())
}
