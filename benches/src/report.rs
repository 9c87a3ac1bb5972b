//! Markdown, JSON and SVG output of a run.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;

use crate::workload::Measurement;

/// Per-engine facts measured once after the fill.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EngineFacts {
    /// Engine name.
    pub engine: String,
    /// Filter bytes per loaded key.
    pub filter_bytes_per_key: f64,
    /// Bytes on disk after the fill.
    pub disk_bytes: u64,
}

/// One point of the bits-per-key sweep.
#[derive(Clone, Debug, serde::Serialize)]
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
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// The exact configuration.
    pub config: serde_json::Value,
    /// Every workload on every engine.
    pub measurements: Vec<Measurement>,
    /// Per-engine facts.
    pub facts: Vec<EngineFacts>,
    /// The sweep, when run.
    pub sweep: Vec<SweepPoint>,
}

/// The distinct items, in the order first seen.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "-".into()
    } else {
        format!("{:.2}x", a / b)
    }
}

impl Report {
    /// The Markdown table: every figure and ours / RocksDB's.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| workload | engine | ops/s | p50 us | p99 us | p99.9 us | block reads/op | observed FPR | ops/s vs rocksdb | reads/op vs rocksdb |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let rocks: BTreeMap<&str, &Measurement> = self
            .measurements
            .iter()
            .filter(|m| m.engine == "rocksdb")
            .map(|m| (m.workload.as_str(), m))
            .collect();
        for m in &self.measurements {
            let r = rocks.get(m.workload.as_str());
            out += &format!(
                "| {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.4} | {:.4}% | {} | {} |\n",
                m.workload,
                m.engine,
                m.ops_per_sec,
                m.p50_us,
                m.p99_us,
                m.p999_us,
                m.block_reads_per_op,
                m.observed_fpr * 100.0,
                r.map_or("-".into(), |r| ratio(m.ops_per_sec, r.ops_per_sec)),
                r.map_or("-".into(), |r| ratio(
                    m.block_reads_per_op,
                    r.block_reads_per_op
                )),
            );
        }
        out += "\n| engine | filter bytes/key | bytes on disk |\n|---|---:|---:|\n";
        for f in &self.facts {
            out += &format!(
                "| {} | {:.3} | {} |\n",
                f.engine, f.filter_bytes_per_key, f.disk_bytes
            );
        }
        for m in self.measurements.iter().filter(|m| !m.notes.is_empty()) {
            out += &format!("\ncrawler on {}:", m.engine);
            for (k, v) in &m.notes {
                out += &format!(" {k}={v:.0}");
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

    /// Writes report.md, report.json and the plots under `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("report.md"), self.markdown()).context("writing report.md")?;
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(self)?)
            .context("writing report.json")?;
        self.plot_throughput(&dir.join("throughput.svg"))?;
        if !self.sweep.is_empty() {
            self.plot_sweep(&dir.join("sweep.svg"))?;
        }
        Ok(())
    }

    fn plot_throughput(&self, path: &Path) -> Result<()> {
        let workloads = distinct(self.measurements.iter().map(|m| m.workload.as_str()));
        let engines = distinct(self.measurements.iter().map(|m| m.engine.as_str()));
        let max = self
            .measurements
            .iter()
            .map(|m| m.ops_per_sec)
            .fold(1.0, f64::max);
        let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let n = (workloads.len() * (engines.len() + 1)) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "ops/s per workload (bloomlsm vs RocksDB)",
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n, 0.0..max * 1.1)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("workload groups: ".to_string() + &workloads.join(", "))
            .y_desc("ops/s")
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (e, engine) in engines.iter().enumerate() {
            let color = Palette99::pick(e).to_rgba();
            let bars = workloads.iter().enumerate().filter_map(|(w, workload)| {
                let m = self
                    .measurements
                    .iter()
                    .find(|m| m.engine == *engine && m.workload == *workload)?;
                let x = (w * (engines.len() + 1) + e) as f64;
                Some(Rectangle::new(
                    [(x, 0.0), (x + 0.9, m.ops_per_sec)],
                    color.filled(),
                ))
            });
            chart
                .draw_series(bars)
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(*engine)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }

    fn plot_sweep(&self, path: &Path) -> Result<()> {
        let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "data-block reads per absent get vs bits per key",
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..21.0, (1e-5f64..2.0).log_scale())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc("bits per key")
            .y_desc("reads per absent get")
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let formula = (1..=200).map(|i| {
            let b = i as f64 / 10.0;
            (
                b,
                bloomlsm_filter::math::optimal_false_positive_rate(b).max(1e-5),
            )
        });
        chart
            .draw_series(LineSeries::new(formula, BLACK))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label("lecture: 0.6185^(bits/key)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        let engines = distinct(self.sweep.iter().map(|p| p.engine.as_str()));
        for (i, engine) in engines.iter().enumerate() {
            let color = Palette99::pick(i + 1).to_rgba();
            let points: Vec<(f64, f64)> = self
                .sweep
                .iter()
                .filter(|p| p.engine == *engine)
                .map(|p| (p.bits_per_key, p.reads_per_absent_get.max(1e-5)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(*engine)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
}
