//! The deep configuration's tree while it loads, on any engines: every
//! 1/40 of the load, 2,000 absent gets and the filter probes each level
//! took per get (how many runs an absent get meets at that moment), then
//! the averages over the second half of the load and after the settle
//! (there also the reads per absent get, as the benchmark measures them), and
//! each engine's compaction summary (ours: per-level counters; RocksDB:
//! the input files of each compaction, from its LOG).
//!
//! `cargo run --release -p bloomlsm-bench --example deep_shape -- KEYS ENGINES`
//! (KEYS default 2000000, ENGINES default `bloomlsm,rocksdb`); the
//! environment may change the deep configuration's `MEMTABLE_BYTES`
//! (64 KiB, RocksDB's smallest), `TARGET_FILE_BYTES` (512 KiB) and `L1_BYTES` (128 KiB), and
//! `FILL_RATE` holds the load to that many puts a second (0, the default:
//! unpaced), as `bloomlsm-bench --fill-rate` does; `DIR` is the parent of
//! the stores' directory (default `/var/tmp`).

use anyhow::{Context, Result};
use bloomlsm_bench::engines::{Engine, Mirror};
use bloomlsm_bench::keys::{absent_key, present_key, value};
use bloomlsm_bench::run::open_engine;

const KEY_BYTES: usize = 16;
const VALUE_BYTES: usize = 32;
const SAMPLE_GETS: u64 = 2_000;
const SETTLED_GETS: u64 = 500_000;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let keys: u64 = match args.next() {
        Some(n) => n.parse().context("KEYS must be a number")?,
        None => 2_000_000,
    };
    let engines: Vec<String> = args.next().map_or_else(
        || vec!["bloomlsm".into(), "rocksdb".into()],
        |s| s.split(',').map(String::from).collect(),
    );
    let size = |name: &str, default: usize| -> Result<usize> {
        std::env::var(name).map_or(Ok(default), |v| {
            v.parse()
                .with_context(|| format!("{name} must be a number of bytes"))
        })
    };
    let m = Mirror {
        block_cache_bytes: 0,
        memtable_bytes: size("MEMTABLE_BYTES", 64 << 10)?,
        target_file_bytes: size("TARGET_FILE_BYTES", 512 << 10)? as u64,
        l1_bytes: size("L1_BYTES", 128 << 10)? as u64,
        entry_bytes: KEY_BYTES + VALUE_BYTES,
        ..Mirror::bench_defaults()
    };
    let pace = size("FILL_RATE", 0)? as u64;
    let temp = tempfile::tempdir_in(std::env::var("DIR").unwrap_or_else(|_| "/var/tmp".into()))
        .context("creating a directory")?;
    for name in &engines {
        let dir = temp.path().join(name);
        let e = open_engine(name, &dir, &m, "uniform")?;
        let start = std::time::Instant::now();
        let step = (keys / 40).max(1);
        let mut sums: Vec<f64> = Vec::new();
        let mut samples = 0u64;
        let mut reads = 0.0;
        let mut absent = 0u64;
        for i in 0..keys {
            if pace > 0 && i % 256 == 0 {
                let due = std::time::Duration::from_secs_f64(i as f64 / pace as f64);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            e.put(&present_key(i, KEY_BYTES), &value(i, VALUE_BYTES))?;
            if (i + 1) % step == 0 {
                let per_level = sample(e.as_ref(), &mut absent)?;
                let line: Vec<String> = per_level
                    .iter()
                    .filter(|(_, tables, _, _)| *tables > 0)
                    .map(|(l, t, p, _)| format!("L{l}:{t}/{p:.2}"))
                    .collect();
                let total: f64 = per_level.iter().map(|x| x.2).sum();
                println!("{name} {:>9} {} total {total:.2}", i + 1, line.join(" "));
                if i + 1 > keys / 2 {
                    for (l, _, p, r) in &per_level {
                        if sums.len() <= *l {
                            sums.resize(l + 1, 0.0);
                        }
                        sums[*l] += p;
                        reads += r;
                    }
                    samples += 1;
                }
            }
        }
        let loaded = start.elapsed();
        e.settle()?;
        let settle = start.elapsed() - loaded;
        let settled = sample(e.as_ref(), &mut absent)?;
        let mean: Vec<String> = sums
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0.0)
            .map(|(l, s)| format!("L{l}:{:.2}", s / samples as f64))
            .collect();
        println!(
            "{name}: second-half mean probes per absent get {} total {:.2}; reads per absent get {:.5}",
            mean.join(" "),
            sums.iter().sum::<f64>() / samples.max(1) as f64,
            reads / samples.max(1) as f64
        );
        let line: Vec<String> = settled
            .iter()
            .filter(|(_, tables, _, _)| *tables > 0)
            .map(|(l, t, p, _)| format!("L{l}:{t}/{p:.2}"))
            .collect();
        let total: f64 = settled.iter().map(|x| x.2).sum();
        let sizes = bloomlsm_bench::workload::Sizes {
            keys,
            ops: 0,
            key_bytes: KEY_BYTES,
            value_bytes: VALUE_BYTES,
            scan_length: 0,
            crawler_urls: 0,
            crawler_repeat_fraction: 0.0,
            fill_rate: 0,
            shape_every: 0,
        };
        let profile = bloomlsm_bench::probes::profile(e.as_ref(), &sizes, SETTLED_GETS)?;
        let space = e.space()?;
        println!(
            "{name}: after the settle, {SETTLED_GETS} absent gets: {:.3} probes and {:.5} reads per get; filter bytes/key {:.3}",
            profile.probes_per_get(),
            profile.reads_per_get(),
            space.filter_bytes as f64 / keys as f64
        );
        let written = space.table_bytes_written;
        let user = keys * (KEY_BYTES + VALUE_BYTES) as u64;
        println!(
            "{name}: settled {} total {total:.2}; write amplification {:.2}; load {:.1} s, settle {:.1} s",
            line.join(" "),
            written as f64 / user as f64,
            loaded.as_secs_f64(),
            settle.as_secs_f64()
        );
        drop(e);
        if let Ok(log) = std::fs::read_to_string(dir.join("LOG")) {
            rocks_compactions(&log);
        }
    }
    Ok(())
}

/// Per level: (level, tables, filter probes per absent get, data block
/// reads per absent get).
fn sample(e: &dyn Engine, absent: &mut u64) -> Result<Vec<(usize, u64, f64, f64)>> {
    e.count_probes_on_this_thread(true);
    let before = e.level_probes()?;
    for _ in 0..SAMPLE_GETS {
        e.get(&absent_key(*absent, KEY_BYTES))?;
        *absent += 1;
    }
    let after = e.level_probes()?;
    e.count_probes_on_this_thread(false);
    Ok(after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.level == a.level)
                .copied()
                .unwrap_or_default();
            let per_get = |n: u64, m: u64| n.saturating_sub(m) as f64 / SAMPLE_GETS as f64;
            (
                a.level,
                a.tables,
                per_get(a.probes, b.probes),
                per_get(a.block_reads, b.block_reads),
            )
        })
        .collect())
}

/// RocksDB's compactions by (input level, output level): count, mean
/// input files from each level, mean input bytes.
fn rocks_compactions(log: &str) {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<(u64, u64), [f64; 4]> = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("\"compaction_started\"")) {
        let at = line.find('{').unwrap_or(0);
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line[at..]) else {
            continue;
        };
        let files: Vec<(u64, usize)> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, val)| {
                let l = k.strip_prefix("files_L")?.parse().ok()?;
                Some((l, val.as_array()?.len()))
            })
            .collect();
        let (Some(first), Some(last)) = (files.first(), files.last()) else {
            continue;
        };
        let out = v["output_level"].as_u64().unwrap_or(last.0);
        let e = by.entry((first.0, out)).or_default();
        e[0] += 1.0;
        e[1] += first.1 as f64;
        e[2] += if files.len() > 1 { last.1 as f64 } else { 0.0 };
        e[3] += v["input_data_size"].as_f64().unwrap_or(0.0);
    }
    for ((from, to), e) in by {
        println!(
            "  rocksdb L{from}->L{to}: {} compactions, {:.2} files from L{from}, {:.2} from L{to}, {:.0} KB in",
            e[0],
            e[1] / e[0],
            e[2] / e[0],
            e[3] / e[0] / 1024.0
        );
    }
}
