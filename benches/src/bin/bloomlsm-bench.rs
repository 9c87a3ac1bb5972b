//! `bloomlsm-bench`: the read-heavy benchmark of bloomlsm against RocksDB,
//! both engines in the same run with mirrored settings.

use std::path::PathBuf;

use anyhow::{Context, Result};
use bloomlsm_bench::engines::Mirror;
use bloomlsm_bench::run::{RunConfig, run};
use bloomlsm_bench::scale::{PointConfig, run_point, run_scale};
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
    /// Memtable / write buffer bytes on both engines, at least 64 KiB
    /// (RocksDB's minimum, which it applies to smaller sizes by itself).
    #[arg(long, default_value_t = 8 << 20)]
    memtable_bytes: usize,
    /// Byte budget of L1 on both engines (level n+1 gets 10x level n);
    /// smaller budgets make deeper trees.
    #[arg(long, default_value_t = 64 << 20)]
    l1_bytes: u64,
    /// Engines to run, in order: bloomlsm (blocked filters, uniform bits per
    /// key), bloomlsm-optimized (same memory spread over levels, Monkey),
    /// bloomlsm-standard (standard filters), bloomlsm-nofilter,
    /// bloomlsm-ribbon and bloomlsm-ribbon-optimized (Ribbon filters),
    /// rocksdb, rocksdb-ribbon (`set_ribbon_filter` at the same memory).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bloomlsm,bloomlsm-optimized,bloomlsm-nofilter,rocksdb"
    )]
    engines: Vec<String>,
    /// L0 tables at which writes slow down, set on both engines (0: each
    /// engine's own default, bloomlsm 8, RocksDB 20).
    #[arg(long, default_value_t = 0)]
    l0_slowdown_trigger: usize,
    /// L0 tables at which writes stop, set on both engines (0: each
    /// engine's own default, bloomlsm 12, RocksDB 36).
    #[arg(long, default_value_t = 0)]
    l0_stop_trigger: usize,
    /// Most table files open at once, on both engines (0: no bound, as
    /// `make bench` runs): past it a block-cache miss may reopen its
    /// table's file (ours: `Options::max_open_files`; RocksDB: its table
    /// cache holds as many).
    #[arg(long, default_value_t = 0)]
    max_open_files: usize,
    /// Puts per second `fill` is held to on every engine (0: unpaced). At a
    /// rate both engines' compactions keep up with, their trees are
    /// compared at the same shape; unpaced, an engine that falls behind
    /// ends the load with levels over budget and the settle clears them.
    #[arg(long, default_value_t = 0)]
    fill_rate: u64,
    /// Print each engine's tree to stderr every this many puts of `fill`,
    /// and after the load and the settle: per level, tables, MB and the
    /// share of the key space its tables span; after the load and the
    /// settle also every table (level, key range, entries); 0: never.
    #[arg(long, default_value_t = 0)]
    shape_every: u64,
    /// With --deep: the engines to run instead of the preset's six.
    #[arg(long, value_delimiter = ',')]
    deep_engines: Vec<String>,
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
    /// The deep configuration: 2,000,000 keys with 32-byte
    /// values, 64 KiB memtables, L1 of 128 KiB (size ratio 10), 512 KiB
    /// tables, no block cache, 500,000 operations per read workload, so the
    /// tree has L1 to L4; engines bloomlsm, bloomlsm-optimized,
    /// bloomlsm-ribbon, bloomlsm-ribbon-optimized, rocksdb, rocksdb-ribbon.
    /// Overrides --keys, --ops, --value-bytes, --memtable-bytes,
    /// --l1-bytes, --block-cache-bytes and --engines.
    #[arg(long)]
    deep: bool,
    /// The deep configuration (implies --deep) where both engines keep up:
    /// each engine loads unpaced and then held to this many puts a second,
    /// with absent gets sampled through the paced load; writes paced.md and
    /// paced.json (no other workloads run). Choose a rate under which
    /// `--shape-every` shows RocksDB's last level growing to the end.
    #[arg(long, default_value_t = 0)]
    deep_paced: u64,
    /// With --deep: the L1 budget instead of the preset's 128 KiB, on both
    /// engines (a smaller one makes a deeper tree: more levels of
    /// comparable weight for Monkey).
    #[arg(long, default_value_t = 0)]
    deep_l1_bytes: u64,
    /// Parent directory for the engines' temporary directories.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Table reads bypass the page cache on both engines (ours:
    /// `Options::use_direct_reads`; RocksDB: `set_use_direct_reads(true)`),
    /// so every block-cache miss is a device read.
    #[arg(long)]
    direct_io: bool,
    /// Reader threads for readrandom and readmissing; each count is run in
    /// turn, e.g. `1,2,4`.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    threads: Vec<usize>,
    /// Scale mode: for each number of keys (e.g. `1000000,10000000`), fill,
    /// readrandom, readmissing and the crawler on each engine, one child
    /// process per point; writes scale.md, scale.json, scale.svg.
    #[arg(long, value_delimiter = ',')]
    scale: Vec<u64>,
    /// Scale mode: crawler URLs streamed per loaded key.
    #[arg(long, default_value_t = 0.6)]
    scale_crawler_per_key: f64,
    /// Internal: run one scale point described by this JSON file.
    #[arg(long, hide = true)]
    scale_point: Option<PathBuf>,
    /// Where report.md, report.json and the SVG plots go.
    #[arg(long, default_value = "target/bench-report")]
    out: PathBuf,
}

fn main() -> Result<()> {
    let mut a = Args::parse();
    let mut target_file_bytes = 8 << 20;
    a.deep |= a.deep_paced > 0;
    if a.deep {
        a.keys = 2_000_000;
        a.ops = 500_000;
        a.value_bytes = 32;
        // RocksDB's smallest write buffer (it raised the 32 KiB asked before
        // to this by itself, so the two engines did not run the same).
        a.memtable_bytes = 64 << 10;
        a.l1_bytes = if a.deep_l1_bytes > 0 {
            a.deep_l1_bytes
        } else {
            128 << 10
        };
        a.block_cache_bytes = 0;
        target_file_bytes = 512 << 10;
        a.engines = [
            "bloomlsm",
            "bloomlsm-optimized",
            "bloomlsm-ribbon",
            "bloomlsm-ribbon-optimized",
            "rocksdb",
            "rocksdb-ribbon",
        ]
        .map(String::from)
        .to_vec();
        if !a.deep_engines.is_empty() {
            a.engines = a.deep_engines.clone();
        }
    }
    if let Some(path) = &a.scale_point {
        let text = std::fs::read_to_string(path).context("reading the point's configuration")?;
        let config: PointConfig = serde_json::from_str(&text)?;
        let point = run_point(&config)?;
        let out = path.with_file_name("point.json");
        std::fs::write(&out, serde_json::to_string_pretty(&point)?)
            .with_context(|| format!("writing {}", out.display()))?;
        return Ok(());
    }
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
            fill_rate: a.fill_rate,
            shape_every: a.shape_every,
        },
        mirror: Mirror {
            bits_per_key: a.bits_per_key,
            block_cache_bytes: a.block_cache_bytes,
            block_size: 4096,
            memtable_bytes: a.memtable_bytes,
            target_file_bytes,
            l1_bytes: a.l1_bytes,
            direct_io: a.direct_io,
            entry_bytes: a.key_bytes + a.value_bytes,
            l0_slowdown_trigger: a.l0_slowdown_trigger,
            l0_stop_trigger: a.l0_stop_trigger,
            max_open_files: a.max_open_files,
        },
        engines: a.engines,
        threads: a.threads,
        sweep: a.sweep,
        sweep_bits: vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 14.0, 20.0],
        sweep_keys,
        filter_policy: a.filter_policy,
    };
    if !a.scale.is_empty() {
        let exe = std::env::current_exe().context("finding the benchmark binary")?;
        let report = run_scale(
            &exe,
            &config,
            &a.scale,
            a.scale_crawler_per_key,
            a.dir.as_deref(),
            &a.out,
        )?;
        println!("{}", report.markdown());
        report.write(&a.out)?;
        eprintln!("scale report written to {}", a.out.display());
        return Ok(());
    }
    if a.deep_paced > 0 {
        let report = bloomlsm_bench::paced::run(&config, a.deep_paced, a.dir.as_deref())?;
        println!("{}", report.markdown());
        report.write(&a.out)?;
        eprintln!("paced report written to {}", a.out.display());
        return Ok(());
    }
    let report = run(&config, a.dir.as_deref())?;
    println!("{}", report.markdown());
    report.write(&a.out)?;
    eprintln!("report written to {}", a.out.display());
    Ok(())
}
