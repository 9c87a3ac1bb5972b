//! `--deep-paced RATE`: the deep configuration measured where both engines
//! keep up with the load. Unpaced, RocksDB's one compaction thread falls
//! behind (its last level starves, L5 ends larger than L6) and the settle
//! clears the backlog, so a settled figure measures how far it fell behind
//! and which L0 tables the last flush left. Here each engine loads twice:
//! unpaced (the settled figure `--deep` reports) and held to RATE puts a
//! second, where 2,000 absent gets every 1/40 of the load count the runs
//! they probe and the blocks they read. The report gives, per engine, the
//! second half's mean and range beside both settled figures, the trees at
//! the middle and end of each load (whether the last level kept growing),
//! and Monkey's optimum for each settled tree.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use bloomlsm::FilterKind;
use bloomlsm_filter::planning::{self, RunShape};

use crate::engines::{Engine, TableDump};
use crate::keys::absent_key;
use crate::probes::{self, ProbeProfile};
use crate::run::{RunConfig, open_engine};
use crate::workload::{self, Sizes};

/// Sample points through a paced load.
pub const LOAD_SAMPLES: u64 = 40;
/// Absent gets per sample point.
pub const SAMPLE_GETS: u64 = 2_000;
/// A load kept up when, at its end, no level between L1 and the last holds
/// more than this share of the last level's bytes (at size ratio 10 a tree
/// at budget holds 0.1; a starved last level gives 1 or more).
pub const KEPT_UP_UPPER_SHARE: f64 = 0.25;

/// The tree at one moment: its deepest level, that level's bytes, and the
/// bytes of the largest level between L1 and the one above the deepest.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TreeAt {
    /// Keys loaded.
    pub puts: u64,
    /// Deepest level with tables.
    pub last_level: usize,
    /// Bytes of the deepest level.
    pub last_bytes: u64,
    /// Bytes of the largest level from L1 to the deepest's parent.
    pub upper_bytes: u64,
}

impl TreeAt {
    /// The tree of `tables` after `puts` keys.
    pub fn of(puts: u64, tables: &[TableDump]) -> Self {
        let last_level = tables.iter().map(|t| t.level).max().unwrap_or(0);
        let bytes = |l: usize| -> u64 {
            tables
                .iter()
                .filter(|t| t.level == l)
                .map(|t| t.bytes)
                .sum()
        };
        Self {
            puts,
            last_level,
            last_bytes: bytes(last_level),
            upper_bytes: (1..last_level).map(bytes).max().unwrap_or(0),
        }
    }

    /// Largest upper level's bytes / the last level's.
    pub fn upper_share(&self) -> f64 {
        self.upper_bytes as f64 / self.last_bytes.max(1) as f64
    }
}

/// One sample point of a paced load.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct LoadSample {
    /// Keys loaded.
    pub puts: u64,
    /// Filter probes per absent get (runs probed).
    pub probes_per_get: f64,
    /// Data blocks read per absent get.
    pub reads_per_get: f64,
}

/// An engine after a load and its settle.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Settled {
    /// Puts per second of the load (the settle not included).
    pub puts_per_sec: f64,
    /// Table bytes written by flushes and compactions / user bytes.
    pub write_amplification: f64,
    /// Filter bytes per key.
    pub filter_bytes_per_key: f64,
    /// The tree at the middle and at the end of the load.
    pub mid_load: TreeAt,
    /// The tree at the end of the load.
    pub end_load: TreeAt,
    /// The settled tree in one line (`Engine::shape`).
    pub shape: String,
    /// Absent gets after the settle, per level.
    pub profile: ProbeProfile,
    /// Monkey's closed form 1 - e^H / L on the settled runs.
    pub monkey_closed_form: f64,
    /// The same on the filter's curve (`planning::monkey_predicted_reduction_on_curve`).
    pub monkey_on_curve: f64,
    /// Monkey's optimum with each run weighed by the absent gets that
    /// probed it ([`probe_weighted_optimum`]): its reads / uniform's.
    pub monkey_weighted_share: f64,
}

/// One engine's two loads.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EngineRun {
    /// Engine name.
    pub engine: String,
    /// The unpaced load, settled.
    pub unpaced: Settled,
    /// The paced load's sample points.
    pub load: Vec<LoadSample>,
    /// The paced load, settled.
    pub paced: Settled,
}

impl EngineRun {
    /// Samples of the second half of the paced load.
    fn second_half(&self, keys: u64) -> impl Iterator<Item = &LoadSample> {
        self.load.iter().filter(move |s| s.puts > keys / 2)
    }

    /// Mean, least and most reads per absent get over the second half of
    /// the paced load, and the mean runs probed.
    pub fn second_half_reads(&self, keys: u64) -> (f64, f64, f64, f64) {
        let (mut n, mut sum, mut probes) = (0.0, 0.0, 0.0);
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for s in self.second_half(keys) {
            n += 1.0;
            sum += s.reads_per_get;
            probes += s.probes_per_get;
            lo = lo.min(s.reads_per_get);
            hi = hi.max(s.reads_per_get);
        }
        if n == 0.0 {
            return (0.0, 0.0, 0.0, 0.0);
        }
        (sum / n, lo, hi, probes / n)
    }
}

/// The whole paced comparison.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PacedReport {
    /// Puts per second of the paced loads.
    pub fill_rate: u64,
    /// Keys loaded.
    pub keys: u64,
    /// Absent gets of each settled profile.
    pub settled_gets: u64,
    /// Filter bits per key.
    pub bits_per_key: f64,
    /// L1 budget of both engines (the preset's 128 KiB unless
    /// `--deep-l1-bytes`).
    #[serde(default)]
    pub l1_bytes: u64,
    /// Every engine, in order.
    pub engines: Vec<EngineRun>,
}

/// The RocksDB engine an engine is compared with: the same filter kind.
fn rocks_of(engine: &str) -> &'static str {
    if engine.contains("ribbon") {
        "rocksdb-ribbon"
    } else {
        "rocksdb"
    }
}

fn ratio(a: f64, b: Option<f64>) -> String {
    match b {
        Some(b) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

impl PacedReport {
    fn find(&self, engine: &str) -> Option<&EngineRun> {
        self.engines.iter().find(|e| e.engine == engine)
    }

    /// The report as markdown.
    pub fn markdown(&self) -> String {
        let keys = self.keys;
        let mut out = format!(
            "# Deep configuration, paced at {} puts/s against unpaced\n\n{} keys, L1 budget {} KiB, {} filter bits/key; {} absent gets per settled profile, {} per sample at each 1/{} of the paced load (the second half's mean, least and most); ratios against RocksDB with the same filter kind.\n\n",
            self.fill_rate,
            keys,
            self.l1_bytes >> 10,
            self.bits_per_key,
            self.settled_gets,
            SAMPLE_GETS,
            LOAD_SAMPLES
        );
        out += "| engine | paced, 2nd half of the load: reads per absent get, mean [least, most] | vs RocksDB | runs probed | paced, settled: reads per absent get | vs RocksDB | runs probed | write amplification | unpaced, settled: reads per absent get | vs RocksDB | runs probed | write amplification |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for e in &self.engines {
            let r = self.find(rocks_of(&e.engine));
            let (mean, lo, hi, probes) = e.second_half_reads(keys);
            let (p, u) = (&e.paced, &e.unpaced);
            out += &format!(
                "| {} | {mean:.5} [{lo:.5}, {hi:.5}] | {} | {probes:.2} | {:.5} | {} | {:.2} | {:.2} | {:.5} | {} | {:.2} | {:.2} |\n",
                e.engine,
                ratio(mean, r.map(|r| r.second_half_reads(keys).0)),
                p.profile.reads_per_get(),
                ratio(
                    p.profile.reads_per_get(),
                    r.map(|r| r.paced.profile.reads_per_get())
                ),
                p.profile.probes_per_get(),
                p.write_amplification,
                u.profile.reads_per_get(),
                ratio(
                    u.profile.reads_per_get(),
                    r.map(|r| r.unpaced.profile.reads_per_get())
                ),
                u.profile.probes_per_get(),
                u.write_amplification,
            );
        }
        out += &format!(
            "\nWhether each load kept up: the deepest level's MB at the middle and end of the load, and the largest level between L1 and it as a share of it at the end (kept up: at most {KEPT_UP_UPPER_SHARE}; a tree at budget holds 0.1).\n\n| engine | paced puts/s | paced: last level MB, middle -> end | largest upper / last | kept up | unpaced puts/s | unpaced: last level MB, middle -> end | largest upper / last | kept up |\n|---|---:|---|---:|---|---:|---|---:|---|\n"
        );
        let mb = |b: u64| b as f64 / 1048576.0;
        for e in &self.engines {
            let (p, u) = (&e.paced, &e.unpaced);
            let kept = |s: &Settled| {
                if s.end_load.upper_share() <= KEPT_UP_UPPER_SHARE {
                    "yes"
                } else {
                    "**no**"
                }
            };
            out += &format!(
                "| {} | {:.0} | L{} {:.1} -> L{} {:.1} | {:.2} | {} | {:.0} | L{} {:.1} -> L{} {:.1} | {:.2} | {} |\n",
                e.engine,
                p.puts_per_sec,
                p.mid_load.last_level,
                mb(p.mid_load.last_bytes),
                p.end_load.last_level,
                mb(p.end_load.last_bytes),
                p.end_load.upper_share(),
                kept(p),
                u.puts_per_sec,
                u.mid_load.last_level,
                mb(u.mid_load.last_bytes),
                u.end_load.last_level,
                mb(u.end_load.last_bytes),
                u.end_load.upper_share(),
                kept(u),
            );
        }
        out += "\nMonkey on each settled tree: the closed form 1 - e^H/L and the prediction on the filter's curve (every run probed by every absent get), and the optimum with each run weighed by the absent gets that probed it (its reads / uniform's on the same tree); \"optimum vs RocksDB\" is that optimum's reads on this tree at RocksDB's per-probe rate over RocksDB's reads (the weighted share x this tree's runs probed / RocksDB's): how low an optimized filter can go against RocksDB on this tree.\n\n| engine | load | closed form | on the curve | weighted optimum / uniform | optimum vs RocksDB | settled tree |\n|---|---|---:|---:|---:|---:|---|\n";
        for e in &self.engines {
            let r = self.find(rocks_of(&e.engine));
            for (load, s, rs) in [
                ("paced", &e.paced, r.map(|r| &r.paced)),
                ("unpaced", &e.unpaced, r.map(|r| &r.unpaced)),
            ] {
                out += &format!(
                    "| {} | {load} | {:.1}% | {:.1}% | {:.3} | {} | {} |\n",
                    e.engine,
                    s.monkey_closed_form * 100.0,
                    s.monkey_on_curve * 100.0,
                    s.monkey_weighted_share,
                    ratio(
                        s.monkey_weighted_share * s.profile.probes_per_get(),
                        rs.map(|r| r.profile.probes_per_get())
                    ),
                    s.shape
                );
            }
        }
        for e in &self.engines {
            out += &format!("\n{} paced, settled:\n", e.engine);
            out += &probes::markdown(std::slice::from_ref(&e.paced.profile));
            out += &format!("\n{} unpaced, settled:\n", e.engine);
            out += &probes::markdown(std::slice::from_ref(&e.unpaced.profile));
        }
        out
    }

    /// Writes paced.md and paced.json into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("paced.md"), self.markdown()).context("writing paced.md")?;
        std::fs::write(dir.join("paced.json"), serde_json::to_string_pretty(self)?)
            .context("writing paced.json")?;
        Ok(())
    }
}

/// Monkey's optimum on runs probed unequally: the least sum_i w_i a
/// e^(-s b_i) over b_i >= 0 with sum n_i b_i = N b, divided by the same
/// sum at b_i = b (uniform), for runs of n_i keys each probed by a share
/// w_i of absent gets (`runs`: (n_i, w_i)) and a rate falling by e^-s per
/// bit (`slope`). By Lagrange the rate of run i is proportional to
/// n_i / w_i; a run whose bits would be negative gets none (a run nobody
/// probes needs no filter) and the others share its bits. With every w_i
/// equal this is the closed form e^H / L.
pub fn probe_weighted_optimum(runs: &[(f64, f64)], bits_per_key: f64, slope: f64) -> f64 {
    let runs: Vec<(f64, f64)> = runs.iter().copied().filter(|r| r.0 > 0.0).collect();
    let total: f64 = runs.iter().map(|r| r.0).sum();
    let uniform: f64 = runs.iter().map(|r| r.1).sum::<f64>() * (-slope * bits_per_key).exp();
    if runs.is_empty() || uniform <= 0.0 {
        return 1.0;
    }
    let mut active: Vec<bool> = runs.iter().map(|r| r.1 > 0.0).collect();
    let mut bits = vec![0.0; runs.len()];
    loop {
        let (mut n, mut sum) = (0.0, 0.0);
        for (r, _) in runs.iter().zip(&active).filter(|(_, a)| **a) {
            n += r.0;
            sum += r.0 * (r.1 / r.0).ln();
        }
        if n == 0.0 {
            break;
        }
        // b_i = (ln(w_i / n_i) + c) / s with sum n_i b_i = N b.
        let c = (slope * total * bits_per_key - sum) / n;
        let mut dropped = false;
        for (i, r) in runs.iter().enumerate() {
            if !active[i] {
                bits[i] = 0.0;
                continue;
            }
            bits[i] = ((r.1 / r.0).ln() + c) / slope;
            if bits[i] < 0.0 {
                active[i] = false;
                dropped = true;
            }
        }
        if !dropped {
            break;
        }
    }
    let optimum: f64 = runs
        .iter()
        .zip(&bits)
        .map(|(r, b)| r.1 * (-slope * b).exp())
        .sum();
    optimum / uniform
}

/// The runs of `tables` an absent get may probe: each L0 table, each level
/// below.
pub fn runs_of_tables(tables: &[TableDump]) -> Vec<RunShape> {
    let mut runs: Vec<RunShape> = tables
        .iter()
        .filter(|t| t.level == 0)
        .map(|t| RunShape {
            keys: t.entries,
            table_keys: t.entries,
        })
        .collect();
    let deepest = tables.iter().map(|t| t.level).max().unwrap_or(0);
    for level in 1..=deepest {
        let (n, keys) = tables
            .iter()
            .filter(|t| t.level == level)
            .fold((0u64, 0u64), |(n, k), t| (n + 1, k + t.entries));
        if let Some(table_keys) = keys.checked_div(n) {
            runs.push(RunShape { keys, table_keys });
        }
    }
    runs
}

/// (keys, probes per absent get) of each run of a settled profile: an L0
/// level's tables as equal shares of it.
fn weighted_runs(p: &ProbeProfile) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for l in &p.levels {
        if l.level == 0 && l.tables > 1 {
            let t = l.tables as f64;
            for _ in 0..l.tables {
                out.push((l.keys as f64 / t, l.probes_per_get / t));
            }
        } else {
            out.push((l.keys as f64, l.probes_per_get));
        }
    }
    out
}

/// One sample: `SAMPLE_GETS` absent gets (keys of their own seed) on this
/// thread, the runs they probed and the blocks they read.
fn sample(e: &dyn Engine, puts: u64, next: &mut u64, key_bytes: usize) -> Result<LoadSample> {
    e.count_probes_on_this_thread(true);
    let before = e.level_probes()?;
    for _ in 0..SAMPLE_GETS {
        let k = absent_key(*next ^ 0x10ad_0000_0000, key_bytes);
        *next += 1;
        if e.get(&k)?.is_some() {
            bail!("{}: absent key returned a value", e.name());
        }
    }
    let after = e.level_probes()?;
    e.count_probes_on_this_thread(false);
    let sum = |v: &[probes::LevelProbes]| {
        v.iter()
            .fold((0u64, 0u64), |(p, r), l| (p + l.probes, r + l.block_reads))
    };
    let (a, b) = (sum(&after), sum(&before));
    let per_get = |n: u64, m: u64| n.saturating_sub(m) as f64 / SAMPLE_GETS as f64;
    Ok(LoadSample {
        puts,
        probes_per_get: per_get(a.0, b.0),
        reads_per_get: per_get(a.1, b.1),
    })
}

/// Loads `name` once (paced when `s.fill_rate` > 0, sampled then), settles,
/// profiles `s.ops` absent gets.
fn load_once(
    name: &str,
    dir: &Path,
    config: &RunConfig,
    s: &Sizes,
) -> Result<(Settled, Vec<LoadSample>)> {
    let engine = open_engine(name, dir, &config.mirror, &config.filter_policy)?;
    let e = engine.as_ref();
    let step = (s.keys / LOAD_SAMPLES).max(1);
    let (mut samples, mut next) = (Vec::new(), 0u64);
    let (mut mid, mut end) = (TreeAt::default(), TreeAt::default());
    let mut loaded_at = None;
    let started = std::time::Instant::now();
    workload::fill_with(e, s, &mut |puts| {
        if puts == s.keys / 2 {
            mid = TreeAt::of(puts, &e.tables());
        }
        if puts == s.keys {
            end = TreeAt::of(puts, &e.tables());
            loaded_at = Some(started.elapsed());
        }
        if s.fill_rate > 0 && puts % step == 0 {
            samples.push(sample(e, puts, &mut next, s.key_bytes)?);
        }
        Ok(())
    })?;
    let space = e.space()?;
    let profile = probes::profile(e, s, s.ops)?;
    let runs = match e.runs() {
        r if r.is_empty() => runs_of_tables(&e.tables()),
        r => r,
    };
    let kind = e.filter_kind().unwrap_or(if name.contains("ribbon") {
        FilterKind::Ribbon
    } else {
        FilterKind::Blocked
    });
    let bits = config.mirror.bits_per_key;
    let settled = Settled {
        puts_per_sec: s.keys as f64 / loaded_at.map_or(1e-9, |d| d.as_secs_f64().max(1e-9)),
        write_amplification: space.table_bytes_written as f64 / s.user_bytes().max(1) as f64,
        filter_bytes_per_key: space.filter_bytes as f64 / s.keys.max(1) as f64,
        mid_load: mid,
        end_load: end,
        shape: e.shape(),
        monkey_closed_form: bloomlsm_filter::math::monkey_predicted_reduction(
            &runs.iter().map(|r| r.keys).collect::<Vec<u64>>(),
        ),
        monkey_on_curve: planning::monkey_predicted_reduction_on_curve(kind, &runs, bits),
        monkey_weighted_share: probe_weighted_optimum(
            &weighted_runs(&profile),
            bits,
            planning::fpr_slope(kind, bits),
        ),
        profile,
    };
    drop(engine);
    std::fs::remove_dir_all(dir).ok();
    Ok((settled, samples))
}

/// Every engine of `config` loaded unpaced, then at `fill_rate`.
pub fn run(config: &RunConfig, fill_rate: u64, base: Option<&Path>) -> Result<PacedReport> {
    if fill_rate == 0 {
        bail!("--deep-paced needs a rate above 0");
    }
    let temp = tempfile::tempdir_in(base.unwrap_or(&std::env::temp_dir()))
        .context("creating a temporary directory")?;
    let unpaced = Sizes {
        fill_rate: 0,
        ..config.sizes.clone()
    };
    let paced = Sizes {
        fill_rate,
        ..config.sizes.clone()
    };
    let mut engines = Vec::new();
    for name in &config.engines {
        let dir: PathBuf = temp.path().join(name);
        let (u, _) = load_once(name, &dir, config, &unpaced)?;
        let (p, load) = load_once(name, &dir, config, &paced)?;
        eprintln!(
            "{name}: unpaced settled {:.5}, paced settled {:.5}",
            u.profile.reads_per_get(),
            p.profile.reads_per_get()
        );
        engines.push(EngineRun {
            engine: name.clone(),
            unpaced: u,
            load,
            paced: p,
        });
    }
    Ok(PacedReport {
        fill_rate,
        keys: config.sizes.keys,
        settled_gets: config.sizes.ops,
        bits_per_key: config.mirror.bits_per_key,
        l1_bytes: config.mirror.l1_bytes,
        engines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_give_the_closed_form() {
        let keys = [1_000.0, 10_000.0, 100_000.0, 1_000_000.0];
        let runs: Vec<(f64, f64)> = keys.iter().map(|&n| (n, 1.0)).collect();
        let closed =
            bloomlsm_filter::math::monkey_predicted_reduction(&[1_000, 10_000, 100_000, 1_000_000]);
        let share = probe_weighted_optimum(&runs, 10.0, 0.66);
        assert!((share - (1.0 - closed)).abs() < 1e-9, "{share} {closed}");
    }

    #[test]
    fn a_run_nobody_probes_gives_its_bits_to_the_others() {
        // Two equal runs, one never probed: the other gets 2b bits.
        let share = probe_weighted_optimum(&[(100.0, 1.0), (100.0, 0.0)], 10.0, 0.5);
        let expected = (-0.5f64 * 20.0).exp() / (-0.5f64 * 10.0).exp();
        assert!((share - expected).abs() < 1e-12, "{share} {expected}");
    }

    #[test]
    fn one_run_is_uniform() {
        assert!((probe_weighted_optimum(&[(5.0, 0.7)], 10.0, 0.66) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_run_whose_bits_would_be_negative_gets_none() {
        // A tiny share of gets probe the big run: it gets no filter, and the
        // allocation never spends more than the budget.
        let share = probe_weighted_optimum(&[(1.0, 1.0), (1_000_000.0, 1e-9)], 2.0, 0.66);
        assert!(share > 0.0 && share < 1.0, "{share}");
    }

    #[test]
    fn tree_shares_count_the_largest_upper_level() {
        let t = |level, bytes| TableDump {
            level,
            smallest: Vec::new(),
            largest: Vec::new(),
            entries: 1,
            bytes,
        };
        let tree = TreeAt::of(7, &[t(0, 500), t(1, 10), t(2, 30), t(2, 40), t(3, 100)]);
        assert_eq!(
            (tree.last_level, tree.last_bytes, tree.upper_bytes),
            (3, 100, 70)
        );
        assert!((tree.upper_share() - 0.7).abs() < 1e-12);
    }
}
