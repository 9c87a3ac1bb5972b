//! The workloads, timed per operation, with every answer checked. Around
//! each phase the engine's read counters and the kernel's I/O counters
//! (`/proc/self/io`) are sampled, so every figure is per operation of that
//! phase alone.

use std::time::Instant;

use anyhow::{Result, bail};
use hdrhistogram::Histogram;

use crate::engines::{Engine, ReadCounters};
use crate::keys::{absent_key, present_key, url, value};
use crate::procfs::{ProcIo, ProcMemory, allocated_bytes, release_free_memory};
use crate::progress::Progress;

/// Sizes of a run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
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
    /// Puts per second `fill` is held to, the same for every engine (0: as
    /// fast as the engine takes them). An engine whose compactions fall
    /// behind an unpaced load ends it with levels over budget, which the
    /// settle clears: its tree, write amplification and runs probed then
    /// depend on how far behind it fell, not on its rules.
    #[serde(default)]
    pub fill_rate: u64,
    /// Every this many puts of `fill`, and after the load and the settle,
    /// print each engine's tree to stderr (`Engine::shape`); 0: never.
    #[serde(default)]
    pub shape_every: u64,
}

impl Sizes {
    /// Bytes of keys and values `fill` writes.
    pub fn user_bytes(&self) -> u64 {
        self.keys * (self.key_bytes + self.value_bytes) as u64
    }
}

/// Figures of one workload on one engine.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Measurement {
    /// Engine name.
    pub engine: String,
    /// Workload name.
    pub workload: String,
    /// Threads issuing operations.
    pub threads: usize,
    /// Operations timed.
    pub ops: u64,
    /// Wall-clock seconds of the phase (for `fill`, including the settle).
    pub seconds: f64,
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
    /// Bytes read from storage per operation (`read_bytes`, whole process).
    pub device_bytes_per_op: f64,
    /// Read system calls per operation (`syscr`, whole process).
    pub read_syscalls_per_op: f64,
    /// CPU microseconds (user and system, whole process) per operation:
    /// the phase's own work, whatever else the machine ran meanwhile.
    #[serde(default)]
    pub cpu_us_per_op: f64,
    /// Share of the machine's CPU time a hypervisor gave to something
    /// else during the phase (steal over all ticks of `/proc/stat`, every
    /// CPU, whatever ran): work this machine had but could not run.
    #[serde(default)]
    pub steal_share: f64,
    /// false positives / (false positives + negatives) in this workload.
    pub observed_fpr: f64,
    /// Gets that found nothing (absent keys).
    pub absent_gets: u64,
    /// Extra facts (crawler memory figures).
    pub notes: Vec<(String, f64)>,
}

impl Measurement {
    /// The value of note `name`, if recorded.
    pub fn note(&self, name: &str) -> Option<f64> {
        self.notes.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }
}

fn histogram() -> Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 60_000_000_000, 3)?)
}

/// Records the latency of `f` in `hist`, nanoseconds.
fn timed<T>(hist: &mut Histogram<u64>, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let t = Instant::now();
    let out = f()?;
    hist.saturating_record(t.elapsed().as_nanos().max(1) as u64);
    Ok(out)
}

/// The counters of a phase, taken at its start.
struct Phase {
    started: Instant,
    counters: ReadCounters,
    io: ProcIo,
    cpu_micros: u64,
    ticks: (u64, u64),
}

impl Phase {
    fn start(engine: &dyn Engine) -> Self {
        Self {
            counters: engine.counters(),
            io: ProcIo::now(),
            cpu_micros: crate::procfs::cpu_micros(),
            ticks: crate::procfs::cpu_ticks(),
            started: Instant::now(),
        }
    }

    fn finish(
        self,
        engine: &dyn Engine,
        workload: &str,
        threads: usize,
        hist: &Histogram<u64>,
        absent_gets: u64,
    ) -> Measurement {
        let seconds = self.started.elapsed().as_secs_f64();
        let io = ProcIo::now().since(self.io);
        let cpu_micros = crate::procfs::cpu_micros().saturating_sub(self.cpu_micros);
        let (steal, total) = crate::procfs::cpu_ticks();
        let steal = steal.saturating_sub(self.ticks.0);
        let total = total.saturating_sub(self.ticks.1);
        let ops = hist.len();
        let per_op = |n: u64| n as f64 / ops.max(1) as f64;
        let after = engine.counters();
        let fp = after.filter_false_positives - self.counters.filter_false_positives;
        let neg = after.filter_negatives - self.counters.filter_negatives;
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        Measurement {
            engine: engine.name().to_string(),
            workload: workload.to_string(),
            threads,
            ops,
            seconds,
            ops_per_sec: ops as f64 / seconds.max(1e-9),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            block_reads_per_op: per_op(after.data_block_reads - self.counters.data_block_reads),
            device_bytes_per_op: per_op(io.read_bytes),
            read_syscalls_per_op: per_op(io.read_syscalls),
            cpu_us_per_op: per_op(cpu_micros),
            steal_share: steal as f64 / total.max(1) as f64,
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
    fill_with(engine, s, &mut |_| Ok(()))
}

/// [`fill`], calling `after_put` with the number of keys loaded after every
/// put (outside the timed put; a paced load catches up after it).
pub fn fill_with(
    engine: &dyn Engine,
    s: &Sizes,
    after_put: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<Measurement> {
    let progress = Progress::new(format!("{} fill", engine.name()), s.keys);
    let phase = Phase::start(engine);
    let mut hist = histogram()?;
    let (pace, shape_every) = (s.fill_rate, s.shape_every);
    let started = std::time::Instant::now();
    for i in 0..s.keys {
        if pace > 0 && i % 256 == 0 {
            let due = std::time::Duration::from_secs_f64(i as f64 / pace as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        let (k, v) = (present_key(i, s.key_bytes), value(i, s.value_bytes));
        timed(&mut hist, || engine.put(&k, &v))?;
        if i % 4096 == 4095 {
            progress.inc(4096);
        }
        if shape_every > 0 && (i + 1) % shape_every == 0 {
            eprintln!("shape {} {}: {}", engine.name(), i + 1, engine.shape());
        }
        after_put(i + 1)?;
    }
    if shape_every > 0 {
        eprintln!("shape {} loaded: {}", engine.name(), engine.shape());
        eprint!(
            "{}",
            crate::engines::dump_tables(engine.name(), "loaded", &engine.tables())
        );
    }
    engine.settle()?;
    if shape_every > 0 {
        eprintln!("shape {} settled: {}", engine.name(), engine.shape());
        eprint!(
            "{}",
            crate::engines::dump_tables(engine.name(), "settled", &engine.tables())
        );
    }
    progress.finish();
    Ok(phase.finish(engine, "fill", 1, &hist, 0))
}

/// `ops` gets from `threads` threads at once, each taking every
/// `threads`-th operation; a fraction `present` of them for keys that
/// exist. Latencies of all threads go into one histogram.
pub fn reads(
    engine: &dyn Engine,
    s: &Sizes,
    name: &str,
    present: f64,
    seed: u64,
    threads: usize,
) -> Result<Measurement> {
    let threads = threads.max(1);
    let label = if threads == 1 {
        format!("{} {name}", engine.name())
    } else {
        format!("{} {name} x{threads}", engine.name())
    };
    let progress = Progress::new(label, s.ops);
    let phase = Phase::start(engine);
    let results: Vec<Result<(Histogram<u64>, u64)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let progress = &progress;
                scope.spawn(move || {
                    let mut hist = histogram()?;
                    let mut absent_gets = 0;
                    for (n, op) in (t as u64..s.ops).step_by(threads).enumerate() {
                        if read_one(engine, s, name, present, seed, op, &mut hist)? {
                            absent_gets += 1;
                        }
                        if n % 1024 == 1023 {
                            progress.inc(1024);
                        }
                    }
                    Ok((hist, absent_gets))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a reader thread panicked")))
            })
            .collect()
    });
    let mut hist = histogram()?;
    let mut absent_gets = 0;
    for r in results {
        let (h, a) = r?;
        hist.add(&h)?;
        absent_gets += a;
    }
    let m = phase.finish(engine, name, threads, &hist, absent_gets);
    progress.finish();
    Ok(m)
}

/// Operation `op` of a read workload; true when it asked for an absent key.
fn read_one(
    engine: &dyn Engine,
    s: &Sizes,
    name: &str,
    present: f64,
    seed: u64,
    op: u64,
    hist: &mut Histogram<u64>,
) -> Result<bool> {
    let r = crate::keys::mix(op ^ seed);
    let want_present = (r % 1_000_000) as f64 / 1_000_000.0 < present;
    if want_present {
        let i = (r >> 20) % s.keys;
        let k = present_key(i, s.key_bytes);
        let got = timed(hist, || engine.get(&k))?;
        if got.as_deref() != Some(value(i, s.value_bytes).as_slice()) {
            bail!(
                "{}: wrong answer for present key {i} in {name}",
                engine.name()
            );
        }
        Ok(false)
    } else {
        let k = absent_key(op ^ seed, s.key_bytes);
        let got = timed(hist, || engine.get(&k))?;
        if got.is_some() {
            bail!("{}: absent key returned a value in {name}", engine.name());
        }
        Ok(true)
    }
}

/// Short range scans from random present keys.
pub fn scans(engine: &dyn Engine, s: &Sizes) -> Result<Measurement> {
    let count = (s.ops / 100).max(100);
    let phase = Phase::start(engine);
    let mut hist = histogram()?;
    for op in 0..count {
        let start = present_key(crate::keys::mix(op) % s.keys, s.key_bytes);
        let n = timed(&mut hist, || engine.scan(&start, s.scan_length))?;
        if n == 0 {
            bail!(
                "{}: a scan from a present key returned nothing",
                engine.name()
            );
        }
    }
    Ok(phase.finish(engine, "scan", 1, &hist, 0))
}

/// The lecture's crawler: a stream of URLs, some repeating; each is looked
/// up and inserted when new. Every answer is checked against an exact set
/// of the URLs seen, whose memory is then measured: the allocator's bytes in
/// use just before and after the set is freed, once background work has
/// settled (so nothing else allocates meanwhile).
pub fn crawler(engine: &dyn Engine, s: &Sizes, bits_per_key: f64) -> Result<Measurement> {
    let progress = Progress::new(format!("{} crawler", engine.name()), s.crawler_urls);
    let phase = Phase::start(engine);
    let mut hist = histogram()?;
    let mut exact: ahash::HashSet<Vec<u8>> = ahash::HashSet::default();
    let mut fresh = 0u64;
    let mut absent_gets = 0;
    for op in 0..s.crawler_urls {
        let r = crate::keys::mix(op ^ 0xc0ffee);
        let repeat = op > 0 && (r % 1000) as f64 / 1000.0 < s.crawler_repeat_fraction;
        let id = if repeat { (r >> 10) % op.max(1) } else { op };
        let u = url(id);
        let seen = timed(&mut hist, || engine.get(&u))?;
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
        if op % 4096 == 4095 {
            progress.inc(4096);
        }
    }
    let mut m = phase.finish(engine, "crawler", 1, &hist, absent_gets);
    progress.finish();
    engine.settle()?;
    let url_bytes: usize = exact.iter().map(|u| u.len()).sum();
    let rss_with_exact_set = ProcMemory::now().rss_bytes;
    let before = allocated_bytes();
    drop(exact);
    let exact_set_bytes = match (before, allocated_bytes()) {
        (Some(b), Some(a)) => b.saturating_sub(a) as f64,
        _ => f64::NAN,
    };
    release_free_memory();
    let rss_without = ProcMemory::now().rss_bytes;
    let filter_bytes = fresh as f64 * bits_per_key / 8.0;
    let fpr = bloomlsm_filter::math::optimal_false_positive_rate(bits_per_key);
    m.notes = vec![
        ("urls_streamed".into(), s.crawler_urls as f64),
        ("distinct_urls".into(), fresh as f64),
        ("url_bytes".into(), url_bytes as f64),
        ("exact_set_bytes".into(), exact_set_bytes),
        ("rss_with_exact_set_bytes".into(), rss_with_exact_set as f64),
        ("rss_after_freeing_it_bytes".into(), rss_without as f64),
        ("filter_alone_bytes".into(), filter_bytes),
        ("filter_wrongly_seen_per_billion".into(), fpr * 1e9),
    ];
    Ok(m)
}
