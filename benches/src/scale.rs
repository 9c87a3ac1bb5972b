//! Scale mode: fill, readrandom, readmissing and the crawler at each store
//! size on each engine, to show how every figure grows with the number of
//! keys. Each (size, engine) point runs in a child process of its own, so
//! its resident memory (`VmRSS`, `VmHWM`) is that engine's alone, at that
//! size alone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::device_probe;
use crate::procfs::{ProcMemory, release_free_memory};
use crate::progress::{eta, human_duration};
use crate::report::{EngineFacts, human, ratio};
use crate::run::{RunConfig, facts, open_engine};
use crate::workload::{self, Measurement};

/// What a child process runs: one engine at one size.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PointConfig {
    /// The run's settings, `sizes.keys` set to this point's size.
    pub run: RunConfig,
    /// The engine.
    pub engine: String,
    /// Parent directory of the store's temporary directory.
    pub dir: Option<PathBuf>,
}

/// Every figure of one engine at one size.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ScalePoint {
    /// Engine name.
    pub engine: String,
    /// Keys loaded.
    pub keys: u64,
    /// Table reads bypass the page cache.
    pub direct_io: bool,
    /// `fill` (its `seconds` include the settle).
    pub fill: Measurement,
    /// Present gets.
    pub readrandom: Measurement,
    /// Absent gets.
    pub readmissing: Measurement,
    /// The crawler, on the filled store.
    pub crawler: Measurement,
    /// Filter and index memory, amplification, after the fill.
    pub facts: EngineFacts,
    /// Resident memory of the child before the engine opened.
    pub memory_at_start: ProcMemory,
    /// After the fill settled.
    pub memory_after_fill: ProcMemory,
    /// After readrandom and readmissing.
    pub memory_after_reads: ProcMemory,
    /// Block cache plus three memtables: what the engine is configured to
    /// hold besides filters and indexes (ours keeps up to two frozen
    /// memtables; RocksDB two write buffers).
    pub configured_cache_bytes: u64,
}

impl ScalePoint {
    /// Filter plus index bytes after the fill.
    pub fn filter_index_bytes(&self) -> f64 {
        (self.facts.filter_bytes_per_key + self.facts.index_bytes_per_key) * self.keys as f64
    }

    /// Resident memory after the reads that filters, indexes and the
    /// configured caches do not explain (may be negative when caches are
    /// not full). Bounded memory means this stays flat as `keys` grows.
    pub fn unexplained_rss(&self) -> f64 {
        self.memory_after_reads.rss_bytes as f64
            - self.memory_at_start.rss_bytes as f64
            - self.filter_index_bytes()
            - self.configured_cache_bytes as f64
    }
}

/// Runs one point in this process (the child's side).
pub fn run_point(config: &PointConfig) -> Result<ScalePoint> {
    let s = &config.run.sizes;
    let m = &config.run.mirror;
    let temp = tempfile::tempdir_in(config.dir.clone().unwrap_or_else(std::env::temp_dir))
        .context("creating a temporary directory")?;
    let dir = temp.path().join(&config.engine);
    let memory_at_start = ProcMemory::now();
    let engine = open_engine(&config.engine, &dir, m, &config.run.filter_policy)?;
    let e = engine.as_ref();
    let fill = workload::fill(e, s)?;
    let facts = facts(e, s, m.bits_per_key)?;
    release_free_memory();
    let memory_after_fill = ProcMemory::now();
    let threads = 1;
    let device_before = device_probe::when_direct(m.direct_io, &dir, 11)?;
    let mut readrandom = workload::reads(e, s, "readrandom", 1.0, 1, threads)?;
    let readmissing = workload::reads(e, s, "readmissing", 0.0, 2, threads)?;
    let device_after = device_probe::when_direct(m.direct_io, &dir, 12)?;
    device_probe::note(&mut readrandom.notes, "before", device_before);
    device_probe::note(&mut readrandom.notes, "after", device_after);
    release_free_memory();
    let memory_after_reads = ProcMemory::now();
    let crawler = workload::crawler(e, s, m.bits_per_key)?;
    let mut crawler = crawler;
    let space = e.space()?;
    crawler
        .notes
        .push(("store_filter_bytes_after".into(), space.filter_bytes as f64));
    crawler
        .notes
        .push(("store_index_bytes_after".into(), space.index_bytes as f64));
    drop(engine);
    Ok(ScalePoint {
        engine: config.engine.clone(),
        keys: s.keys,
        direct_io: m.direct_io,
        fill,
        readrandom,
        readmissing,
        crawler,
        facts,
        memory_at_start,
        memory_after_fill,
        memory_after_reads,
        configured_cache_bytes: m.block_cache_bytes + 3 * m.memtable_bytes_in_effect() as u64,
    })
}

/// Everything a scale run produced.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ScaleReport {
    /// Settings shared by every point.
    pub config: RunConfig,
    /// Crawler URLs per loaded key.
    pub crawler_per_key: f64,
    /// Every point, sizes ascending, engines in order.
    pub points: Vec<ScalePoint>,
}

/// Runs every (size, engine) point in a child process of `exe`, sizes
/// ascending, printing progress and an estimate of the time left.
pub fn run_scale(
    exe: &Path,
    base: &RunConfig,
    sizes: &[u64],
    crawler_per_key: f64,
    dir: Option<&Path>,
    out: &Path,
) -> Result<ScaleReport> {
    let mut points = Vec::new();
    let steps: Vec<(u64, &String)> = sizes
        .iter()
        .flat_map(|&n| base.engines.iter().map(move |e| (n, e)))
        .collect();
    // Work grows with the keys loaded: time left is estimated per key.
    let mut total_keys: f64 = steps.iter().map(|(n, _)| *n as f64).sum();
    let started = Instant::now();
    let mut done_keys = 0.0;
    for (i, (keys, engine)) in steps.iter().enumerate() {
        let left = eta(started.elapsed(), done_keys, total_keys).map_or_else(
            || "unknown until the first point ends".into(),
            human_duration,
        );
        eprintln!(
            "[scale] point {}/{}: {engine} at {} keys; elapsed {}, eta {left}",
            i + 1,
            steps.len(),
            human(*keys as f64),
            human_duration(started.elapsed())
        );
        let mut run = base.clone();
        run.sizes.keys = *keys;
        run.sizes.crawler_urls = (*keys as f64 * crawler_per_key) as u64;
        run.engines = vec![(*engine).clone()];
        let point_dir = out.join(format!("{keys}-{engine}"));
        std::fs::create_dir_all(&point_dir)
            .with_context(|| format!("creating {}", point_dir.display()))?;
        let config_path = point_dir.join("point-config.json");
        let config = PointConfig {
            run,
            engine: (*engine).clone(),
            dir: dir.map(Path::to_path_buf),
        };
        let config_text = serde_json::to_string_pretty(&config)?;
        let result_path = point_dir.join("point.json");
        // A point already run with exactly these settings (an earlier run
        // into the same directory) is reused: a long run can be resumed or
        // extended by a larger size.
        let reusable = result_path.exists()
            && std::fs::read_to_string(&config_path).is_ok_and(|t| t == config_text);
        if reusable {
            eprintln!("[scale] reusing {}", result_path.display());
            total_keys -= *keys as f64;
        } else {
            std::fs::remove_file(&result_path).ok();
            std::fs::write(&config_path, &config_text)
                .context("writing the point's configuration")?;
            let status = Command::new(exe)
                .arg("--scale-point")
                .arg(&config_path)
                .status()
                .context("starting a scale point")?;
            if !status.success() {
                bail!("scale point {engine} at {keys} keys failed: {status}");
            }
        }
        let text = std::fs::read_to_string(&result_path).context("reading the point's result")?;
        points.push(serde_json::from_str(&text).context("parsing the point's result")?);
        if !reusable {
            done_keys += *keys as f64;
        }
    }
    eprintln!("[scale] done in {}", human_duration(started.elapsed()));
    Ok(ScaleReport {
        config: base.clone(),
        crawler_per_key,
        points,
    })
}

fn mb(b: f64) -> String {
    format!("{:.1}", b / 1e6)
}

impl ScaleReport {
    /// The points of `engine`, sizes ascending.
    pub fn of(&self, engine: &str) -> Vec<&ScalePoint> {
        self.points.iter().filter(|p| p.engine == engine).collect()
    }

    /// The point of `engine` at `keys`.
    fn at(&self, engine: &str, keys: u64) -> Option<&ScalePoint> {
        self.points
            .iter()
            .find(|p| p.engine == engine && p.keys == keys)
    }

    /// The Markdown tables of the run.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| keys | engine | fill s | fill ops/s | readrandom ops/s | readmissing ops/s | p99 present us | p99 absent us | block reads / present get | block reads / absent get | device bytes / present get | device bytes / absent get | read syscalls / present get | filter bytes/key | index bytes/key | write amp | space amp | VmRSS after reads MB | VmHWM MB | RSS beyond filters+indexes+caches MB |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.points {
            out += &format!(
                "| {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.3} | {:.4} | {:.0} | {:.0} | {:.2} | {:.3} | {:.3} | {:.2} | {:.3} | {} | {} | {} |\n",
                p.keys,
                p.engine,
                p.fill.seconds,
                p.fill.ops_per_sec,
                p.readrandom.ops_per_sec,
                p.readmissing.ops_per_sec,
                p.readrandom.p99_us,
                p.readmissing.p99_us,
                p.readrandom.block_reads_per_op,
                p.readmissing.block_reads_per_op,
                p.readrandom.device_bytes_per_op,
                p.readmissing.device_bytes_per_op,
                p.readrandom.read_syscalls_per_op,
                p.facts.filter_bytes_per_key,
                p.facts.index_bytes_per_key,
                p.facts.write_amplification,
                p.facts.space_amplification,
                mb(p.memory_after_reads.rss_bytes as f64),
                mb(p.memory_after_reads
                    .peak_rss_bytes
                    .max(p.memory_after_fill.peak_rss_bytes) as f64),
                mb(p.unexplained_rss()),
            );
        }
        out += "\n| keys | engine | fill | readrandom | readmissing | write amp | (ours / RocksDB) |\n|---:|---|---:|---:|---:|---:|---|\n";
        for p in self.points.iter().filter(|p| p.engine != "rocksdb") {
            if let Some(r) = self.at("rocksdb", p.keys) {
                out += &format!(
                    "| {} | {} | {} | {} | {} | {} | |\n",
                    p.keys,
                    p.engine,
                    ratio(p.fill.ops_per_sec, r.fill.ops_per_sec),
                    ratio(p.readrandom.ops_per_sec, r.readrandom.ops_per_sec),
                    ratio(p.readmissing.ops_per_sec, r.readmissing.ops_per_sec),
                    ratio(p.facts.write_amplification, r.facts.write_amplification),
                );
            }
        }
        if self
            .points
            .iter()
            .any(|p| p.readrandom.note("device_p50_us_before").is_some())
        {
            out += "\n| keys | engine | device read p50 / p99 / mean us, before reads | after reads | present get p50 us | get p50 beyond the device's (before) |\n|---:|---|---:|---:|---:|---:|\n";
            for p in &self.points {
                let n = |k: &str| p.readrandom.note(k).unwrap_or(f64::NAN);
                out += &format!(
                    "| {} | {} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} / {:.1} | {:.1} | {:.1} |\n",
                    p.keys,
                    p.engine,
                    n("device_p50_us_before"),
                    n("device_p99_us_before"),
                    n("device_mean_us_before"),
                    n("device_p50_us_after"),
                    n("device_p99_us_after"),
                    n("device_mean_us_after"),
                    p.readrandom.p50_us,
                    p.readrandom.p50_us - n("device_p50_us_before"),
                );
            }
        }
        out += "\n| keys | engine | URLs streamed | distinct | crawler ops/s | exact set MB (measured) | exact set bytes/URL | filter alone MB (10 bits/URL) | store filters after MB | VmRSS with exact set MB |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for p in &self.points {
            let n = |k: &str| p.crawler.note(k).unwrap_or(f64::NAN);
            out += &format!(
                "| {} | {} | {:.0} | {:.0} | {:.0} | {} | {:.1} | {} | {} | {} |\n",
                p.keys,
                p.engine,
                n("urls_streamed"),
                n("distinct_urls"),
                p.crawler.ops_per_sec,
                mb(n("exact_set_bytes")),
                n("exact_set_bytes") / n("distinct_urls"),
                mb(n("filter_alone_bytes")),
                mb(n("store_filter_bytes_after")),
                mb(n("rss_with_exact_set_bytes")),
            );
        }
        out
    }

    /// Writes scale.md, scale.json and scale.svg under `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("scale.md"), self.markdown()).context("writing scale.md")?;
        std::fs::write(dir.join("scale.json"), serde_json::to_string_pretty(self)?)
            .context("writing scale.json")?;
        crate::plots::scale(self, &dir.join("scale.svg"))
    }
}
