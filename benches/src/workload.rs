//! The workloads, timed per operation, with every answer checked.

use std::time::Instant;

use anyhow::{Result, bail};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engines::{Engine, ReadCounters};
use crate::keys::{absent_key, present_key, url, value};

/// Sizes of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sizes {
    /// Keys loaded by `fill`.
    pub keys: u64,
    /// Operations per read workload.
    pub ops: u64,
    /// Key length.
    pub key_bytes: usize,
    /// Value length.
    pub value_bytes: usize,
    /// Pairs read per scan.
    pub scan_length: usize,
    /// URLs streamed by the crawler workload.
    pub crawler_urls: u64,
    /// Fraction of crawler URLs that repeat an earlier one.
    pub crawler_repeat_fraction: f64,
}

/// Figures of one workload on one engine.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    /// Engine name.
    pub engine: String,
    /// Workload name.
    pub workload: String,
    /// Operations timed.
    pub ops: u64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Latency percentiles, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Data blocks read from files per operation.
    pub block_reads_per_op: f64,
    /// false positives / (false positives + negatives) in this workload.
    pub observed_fpr: f64,
    /// Gets that found nothing (absent keys).
    pub absent_gets: u64,
    /// Extra facts (crawler memory figures).
    pub notes: Vec<(String, f64)>,
}

fn progress(len: u64, label: String) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{prefix:>28} [{bar:30}] {pos}/{len} {per_sec}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label);
    bar
}

struct Timer {
    hist: Histogram<u64>,
    started: Instant,
    counters: ReadCounters,
}

impl Timer {
    fn start(engine: &dyn Engine) -> Result<Self> {
        Ok(Self {
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3)?,
            started: Instant::now(),
            counters: engine.counters(),
        })
    }

    fn time<T>(&mut self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let t = Instant::now();
        let out = f()?;
        self.hist
            .saturating_record(t.elapsed().as_nanos().max(1) as u64);
        Ok(out)
    }

    fn finish(self, engine: &dyn Engine, workload: &str, absent_gets: u64) -> Measurement {
        let elapsed = self.started.elapsed().as_secs_f64();
        let ops = self.hist.len();
        let after = engine.counters();
        let reads = after.data_block_reads - self.counters.data_block_reads;
        let fp = after.filter_false_positives - self.counters.filter_false_positives;
        let neg = after.filter_negatives - self.counters.filter_negatives;
        let us = |q: f64| self.hist.value_at_quantile(q) as f64 / 1000.0;
        Measurement {
            engine: engine.name().to_string(),
            workload: workload.to_string(),
            ops,
            ops_per_sec: ops as f64 / elapsed.max(1e-9),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            block_reads_per_op: reads as f64 / ops.max(1) as f64,
            observed_fpr: if fp + neg == 0 {
                0.0
            } else {
                fp as f64 / (fp + neg) as f64
            },
            absent_gets,
            notes: Vec::new(),
        }
    }
}

/// Loads `keys` keys in a random order, then lets background work settle.
pub fn fill(engine: &dyn Engine, s: &Sizes) -> Result<Measurement> {
    let bar = progress(s.keys, format!("{} fill", engine.name()));
    let mut timer = Timer::start(engine)?;
    for i in 0..s.keys {
        let (k, v) = (present_key(i, s.key_bytes), value(i, s.value_bytes));
        timer.time(|| engine.put(&k, &v))?;
        if i % 4096 == 0 {
            bar.set_position(i);
        }
    }
    engine.settle()?;
    bar.finish_and_clear();
    Ok(timer.finish(engine, "fill", 0))
}

/// `ops` gets; a fraction `present` of them for keys that exist.
pub fn reads(
    engine: &dyn Engine,
    s: &Sizes,
    name: &str,
    present: f64,
    seed: u64,
) -> Result<Measurement> {
    let bar = progress(s.ops, format!("{} {name}", engine.name()));
    let mut timer = Timer::start(engine)?;
    let mut absent_gets = 0;
    for op in 0..s.ops {
        let r = crate::keys::mix(op ^ seed);
        let want_present = (r % 1_000_000) as f64 / 1_000_000.0 < present;
        let i = (r >> 20) % s.keys;
        if want_present {
            let k = present_key(i, s.key_bytes);
            let got = timer.time(|| engine.get(&k))?;
            if got.as_deref() != Some(value(i, s.value_bytes).as_slice()) {
                bail!(
                    "{}: wrong answer for present key {i} in {name}",
                    engine.name()
                );
            }
        } else {
            let k = absent_key(op ^ seed, s.key_bytes);
            let got = timer.time(|| engine.get(&k))?;
            if got.is_some() {
                bail!("{}: absent key returned a value in {name}", engine.name());
            }
            absent_gets += 1;
        }
        if op % 4096 == 0 {
            bar.set_position(op);
        }
    }
    bar.finish_and_clear();
    Ok(timer.finish(engine, name, absent_gets))
}

/// Short range scans from random present keys.
pub fn scans(engine: &dyn Engine, s: &Sizes) -> Result<Measurement> {
    let count = (s.ops / 100).max(100);
    let mut timer = Timer::start(engine)?;
    for op in 0..count {
        let start = present_key(crate::keys::mix(op) % s.keys, s.key_bytes);
        let n = timer.time(|| engine.scan(&start, s.scan_length))?;
        if n == 0 {
            bail!(
                "{}: a scan from a present key returned nothing",
                engine.name()
            );
        }
    }
    Ok(timer.finish(engine, "scan", 0))
}

/// The lecture's crawler: a stream of URLs, some repeating; each is looked
/// up and inserted when new. Also the memory an exact set of the URLs takes.
pub fn crawler(engine: &dyn Engine, s: &Sizes, bits_per_key: f64) -> Result<Measurement> {
    let mut timer = Timer::start(engine)?;
    let mut exact: ahash::HashSet<Vec<u8>> = ahash::HashSet::default();
    let mut fresh = 0u64;
    let mut absent_gets = 0;
    for op in 0..s.crawler_urls {
        let r = crate::keys::mix(op ^ 0xc0ffee);
        let repeat = op > 0 && (r % 1000) as f64 / 1000.0 < s.crawler_repeat_fraction;
        let id = if repeat { (r >> 10) % op.max(1) } else { op };
        let u = url(id);
        let seen = timer.time(|| engine.get(&u))?;
        if seen.is_some() != exact.contains(&u) {
            bail!(
                "{}: crawler lookup disagrees with the exact set",
                engine.name()
            );
        }
        if seen.is_none() {
            absent_gets += 1;
            fresh += 1;
            engine.put(&u, b"")?;
            exact.insert(u);
        }
    }
    let mut m = timer.finish(engine, "crawler", absent_gets);
    let url_bytes: usize = exact.iter().map(|u| u.len()).sum();
    let exact_set_bytes =
        (url_bytes + exact.capacity() * (std::mem::size_of::<Vec<u8>>() + 8)) as f64;
    let filter_bytes = fresh as f64 * bits_per_key / 8.0;
    let fpr = bloomlsm_filter::math::optimal_false_positive_rate(bits_per_key);
    m.notes = vec![
        ("distinct_urls".into(), fresh as f64),
        ("exact_set_bytes".into(), exact_set_bytes),
        ("filter_alone_bytes".into(), filter_bytes),
        ("filter_wrongly_seen_per_billion".into(), fpr * 1e9),
    ];
    Ok(m)
}
