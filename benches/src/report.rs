//! Markdown and JSON output of a run, and the files its plots go to.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::plots;
use crate::workload::Measurement;

/// Per-engine facts measured once after the fill.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EngineFacts {
    /// Engine name.
    pub engine: String,
    /// Filter bytes per loaded key.
    pub filter_bytes_per_key: f64,
    /// Index bytes per loaded key.
    pub index_bytes_per_key: f64,
    /// Bytes on disk after the fill.
    pub disk_bytes: u64,
    /// Table bytes written by flushes and compactions / user bytes loaded.
    pub write_amplification: f64,
    /// Bytes on disk / user bytes loaded.
    pub space_amplification: f64,
    /// The tree after the fill, per level.
    #[serde(default)]
    pub levels: String,
    /// Bytes written, read and moved per level by the fill
    /// (`Engine::compaction_stats`).
    #[serde(default)]
    pub compaction_stats: String,
    /// Monkey's predicted reduction of the summed false positive rates
    /// for this engine's runs after the fill (0 where runs are unknown).
    #[serde(default)]
    pub monkey_predicted_reduction: f64,
    /// The same prediction on the filter's own rate curve for each run's
    /// table size (`planning::monkey_predicted_reduction_on_curve`).
    #[serde(default)]
    pub monkey_predicted_on_curve: f64,
}

/// One point of the bits-per-key sweep.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SweepPoint {
    /// Engine name.
    pub engine: String,
    /// Bits per key.
    pub bits_per_key: f64,
    /// Data blocks read per absent get.
    pub reads_per_absent_get: f64,
    /// Filter bytes per key.
    pub filter_bytes_per_key: f64,
    /// The lecture's optimal-k rate at these bits per key.
    pub formula_fpr: f64,
}

/// Everything a run produced.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// The exact configuration.
    pub config: serde_json::Value,
    /// Every workload on every engine.
    pub measurements: Vec<Measurement>,
    /// Per-engine facts.
    pub facts: Vec<EngineFacts>,
    /// The sweep, when run.
    pub sweep: Vec<SweepPoint>,
    /// Per-level profiles of absent gets, one per engine.
    #[serde(default)]
    pub probes: Vec<crate::probes::ProbeProfile>,
}

/// The distinct items, in the order first seen.
pub fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// `a / b` as `1.23x`, `-` when `b` is zero.
pub fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 || !a.is_finite() || !b.is_finite() {
        "-".into()
    } else {
        format!("{:.2}x", a / b)
    }
}

/// A count with a K / M / G suffix: `1.6M`, `250K`, `980`.
pub fn human(v: f64) -> String {
    let a = v.abs();
    let (div, suffix) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "K")
    } else {
        (1.0, "")
    };
    let x = v / div;
    if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}{suffix}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}{suffix}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}{suffix}")
    } else {
        // Two significant digits, without trailing zeros: 0.005, 0.012, 0.5.
        let decimals = (-x.abs().log10()).floor() as usize + 2;
        let text = format!("{x:.decimals$}");
        text.trim_end_matches('0').to_string()
    }
}

/// The label of a measurement's workload: `readrandom`, `readrandom x4`.
pub fn workload_label(m: &Measurement) -> String {
    if m.threads > 1 {
        format!("{} x{}", m.workload, m.threads)
    } else {
        m.workload.clone()
    }
}

impl Report {
    /// RocksDB's measurement of the same workload and thread count.
    pub fn rocksdb_of(&self, m: &Measurement) -> Option<&Measurement> {
        self.measurements
            .iter()
            .find(|r| r.engine == "rocksdb" && r.workload == m.workload && r.threads == m.threads)
    }

    /// The Markdown tables: every figure and ours / RocksDB's.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| workload | engine | ops/s | p50 us | p99 us | p99.9 us | block reads/op | device bytes/op | read syscalls/op | observed FPR | ops/s vs rocksdb | reads/op vs rocksdb |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for m in self.measurements.iter().filter(|m| m.threads == 1) {
            let r = self.rocksdb_of(m);
            out += &format!(
                "| {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.4} | {:.0} | {:.3} | {:.4}% | {} | {} |\n",
                m.workload,
                m.engine,
                m.ops_per_sec,
                m.p50_us,
                m.p99_us,
                m.p999_us,
                m.block_reads_per_op,
                m.device_bytes_per_op,
                m.read_syscalls_per_op,
                m.observed_fpr * 100.0,
                r.map_or("-".into(), |r| ratio(m.ops_per_sec, r.ops_per_sec)),
                r.map_or("-".into(), |r| ratio(
                    m.block_reads_per_op,
                    r.block_reads_per_op
                )),
            );
        }
        out += &self.threads_markdown();
        out += "\n| engine | filter bytes/key | index bytes/key | bytes on disk | write amplification | space amplification |\n|---|---:|---:|---:|---:|---:|\n";
        for f in &self.facts {
            out += &format!(
                "| {} | {:.3} | {:.3} | {} | {:.2} | {:.3} |\n",
                f.engine,
                f.filter_bytes_per_key,
                f.index_bytes_per_key,
                f.disk_bytes,
                f.write_amplification,
                f.space_amplification
            );
        }
        out += &self.monkey_markdown();
        out += &crate::probes::markdown(&self.probes);
        for m in self.measurements.iter().filter(|m| !m.notes.is_empty()) {
            out += &format!("\n{} on {}:", m.workload, m.engine);
            for (k, v) in &m.notes {
                // Latencies are microseconds (`_us`); the rest counts.
                if k.ends_with("_us") || k.contains("_us_") {
                    out += &format!(" {k}={v:.1}");
                } else {
                    out += &format!(" {k}={v:.0}");
                }
            }
            out += "\n";
        }
        if !self.sweep.is_empty() {
            out += "\n| bits/key | engine | reads per absent get | filter bytes/key | formula FPR |\n|---:|---|---:|---:|---:|\n";
            for p in &self.sweep {
                out += &format!(
                    "| {} | {} | {:.5} | {:.3} | {:.5} |\n",
                    p.bits_per_key,
                    p.engine,
                    p.reads_per_absent_get,
                    p.filter_bytes_per_key,
                    p.formula_fpr
                );
            }
        }
        out
    }

    /// Uniform against optimized filters at equal memory: reads per absent
    /// get of each pair that ran, the measured reduction beside Monkey's
    /// prediction for the uniform engine's runs, and every engine's tree.
    fn monkey_markdown(&self) -> String {
        let absent = |engine: &str| {
            self.measurements
                .iter()
                .find(|m| m.engine == engine && m.workload == "readmissing" && m.threads == 1)
                .map(|m| m.block_reads_per_op)
        };
        let facts = |engine: &str| self.facts.iter().find(|f| f.engine == engine);
        let mut out = String::new();
        for (uniform, optimized) in [
            ("bloomlsm", "bloomlsm-optimized"),
            ("bloomlsm-ribbon", "bloomlsm-ribbon-optimized"),
        ] {
            let (Some(ru), Some(ro), Some(fu), Some(fo)) = (
                absent(uniform),
                absent(optimized),
                facts(uniform),
                facts(optimized),
            ) else {
                continue;
            };
            if out.is_empty() {
                out += "\n| uniform | optimized | reads per absent get (uniform / optimized) | filter bytes/key (uniform / optimized) | measured reduction | closed form 1 - e^H / L | predicted on the filter's curve | measured / predicted on the curve |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
            }
            let measured = if ru > 0.0 { 1.0 - ro / ru } else { 0.0 };
            let predicted = fu.monkey_predicted_on_curve;
            out += &format!(
                "| {uniform} | {optimized} | {ru:.5} / {ro:.5} | {:.3} / {:.3} | {:.1}% | {:.1}% | {:.1}% | {} |\n",
                fu.filter_bytes_per_key,
                fo.filter_bytes_per_key,
                measured * 100.0,
                fu.monkey_predicted_reduction * 100.0,
                predicted * 100.0,
                ratio(measured, predicted)
            );
        }
        if self.facts.iter().any(|f| !f.levels.is_empty()) {
            out += "\n| engine | tree after the fill |\n|---|---|\n";
            for f in &self.facts {
                out += &format!("| {} | {} |\n", f.engine, f.levels);
            }
        }
        for f in self.facts.iter().filter(|f| !f.compaction_stats.is_empty()) {
            out += &format!(
                "\nCompaction by level, {}:\n\n```\n{}```\n",
                f.engine, f.compaction_stats
            );
        }
        out
    }

    /// Throughput by reader threads, when more than one count was run.
    fn threads_markdown(&self) -> String {
        let counts: Vec<usize> = {
            let mut c: Vec<usize> = self.measurements.iter().map(|m| m.threads).collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        if counts.len() < 2 {
            return String::new();
        }
        let mut by: BTreeMap<(&str, &str), BTreeMap<usize, &Measurement>> = BTreeMap::new();
        for m in &self.measurements {
            by.entry((m.workload.as_str(), m.engine.as_str()))
                .or_default()
                .insert(m.threads, m);
        }
        let mut out = String::from("\n| workload | engine |");
        for t in &counts {
            out += &format!(" {t} thread{} ops/s |", if *t == 1 { "" } else { "s" });
        }
        for heading in ["vs rocksdb at", "CPU us/op at", "steal at"] {
            for t in &counts {
                out += &format!(" {heading} {t} |");
            }
        }
        out += "\n|---|---|";
        out += &"---:|".repeat(4 * counts.len());
        out += "\n";
        let workloads = distinct(
            self.measurements
                .iter()
                .filter(|m| m.threads > 1)
                .map(|m| m.workload.as_str()),
        );
        let engines = distinct(self.measurements.iter().map(|m| m.engine.as_str()));
        for w in &workloads {
            for e in &engines {
                let Some(row) = by.get(&(*w, *e)) else {
                    continue;
                };
                let rocks = by.get(&(*w, "rocksdb"));
                out += &format!("| {w} | {e} |");
                let cells = |f: &dyn Fn(&Measurement) -> String| -> String {
                    counts
                        .iter()
                        .map(|t| row.get(t).map_or(" - |".into(), |m| format!(" {} |", f(m))))
                        .collect()
                };
                out += &cells(&|m| format!("{:.0}", m.ops_per_sec));
                out += &cells(&|m| {
                    rocks
                        .and_then(|r| r.get(&m.threads))
                        .map_or("-".into(), |r| ratio(m.ops_per_sec, r.ops_per_sec))
                });
                out += &cells(&|m| format!("{:.2}", m.cpu_us_per_op));
                out += &cells(&|m| format!("{:.1}%", m.steal_share * 100.0));
                out += "\n";
            }
        }
        out
    }

    /// Writes report.md, report.json and the plots under `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("report.md"), self.markdown()).context("writing report.md")?;
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(self)?)
            .context("writing report.json")?;
        plots::throughput(self, &dir.join("throughput.svg"))?;
        if !self.sweep.is_empty() {
            plots::sweep(self, &dir.join("sweep.svg"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units_read_as_people_write_them() {
        assert_eq!(human(1_600_000.0), "1.60M");
        assert_eq!(human(250_000.0), "250K");
        assert_eq!(human(56_832.0), "56.8K");
        assert_eq!(human(980.0), "980");
        assert_eq!(human(2e9), "2G");
        assert_eq!(human(0.5), "0.5");
        assert_eq!(human(0.25), "0.25");
        assert_eq!(human(0.005), "0.005");
        assert_eq!(human(0.0123), "0.012");
        assert_eq!(human(1.5), "1.50");
        assert_eq!(ratio(3.0, 2.0), "1.50x");
        assert_eq!(ratio(3.0, 0.0), "-");
    }
}
