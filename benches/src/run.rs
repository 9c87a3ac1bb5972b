//! A whole benchmark run: every engine through every workload, in turn.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bloomlsm::FilterKind;
use bloomlsm_filter::planning;

use crate::device_probe;
use crate::engines::{Bloom, Engine, Mirror, Rocks};
use crate::report::{EngineFacts, Report, SweepPoint};
use crate::workload::{self, Sizes};

/// What to run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunConfig {
    /// Sizes of the workloads.
    pub sizes: Sizes,
    /// Settings mirrored on both engines.
    pub mirror: Mirror,
    /// Engines, in order.
    pub engines: Vec<String>,
    /// Reader threads of `readrandom` and `readmissing`: each count is run
    /// in turn (1 is always run, as the base of the other workloads).
    pub threads: Vec<usize>,
    /// Run the bits-per-key sweep too.
    pub sweep: bool,
    /// Bits per key of the sweep.
    pub sweep_bits: Vec<f64>,
    /// Keys loaded per sweep point.
    pub sweep_keys: u64,
    /// Filter policy of the `bloomlsm` engine: "uniform" or "optimized".
    pub filter_policy: String,
}

/// Opens engine `name` in `dir`.
pub fn open_engine(
    name: &str,
    dir: &Path,
    mirror: &Mirror,
    policy: &str,
) -> Result<Box<dyn Engine>> {
    Ok(match name {
        "bloomlsm" => {
            let optimized = match policy {
                "uniform" => false,
                "optimized" => true,
                other => anyhow::bail!("unknown filter policy {other:?} (uniform, optimized)"),
            };
            Box::new(Bloom::open(
                name,
                dir,
                mirror,
                FilterKind::Blocked,
                optimized,
            )?)
        }
        "bloomlsm-optimized" => {
            Box::new(Bloom::open(name, dir, mirror, FilterKind::Blocked, true)?)
        }
        "bloomlsm-standard" => {
            Box::new(Bloom::open(name, dir, mirror, FilterKind::Standard, false)?)
        }
        "bloomlsm-nofilter" => {
            let off = Mirror {
                bits_per_key: 0.0,
                ..mirror.clone()
            };
            Box::new(Bloom::open(name, dir, &off, FilterKind::Blocked, false)?)
        }
        "bloomlsm-ribbon" => Box::new(Bloom::open(name, dir, mirror, FilterKind::Ribbon, false)?),
        "bloomlsm-ribbon-optimized" => {
            Box::new(Bloom::open(name, dir, mirror, FilterKind::Ribbon, true)?)
        }
        "rocksdb" => Box::new(Rocks::open(name, dir, mirror, false)?),
        "rocksdb-ribbon" => Box::new(Rocks::open(name, dir, mirror, true)?),
        other => anyhow::bail!(
            "unknown engine {other:?} (bloomlsm, bloomlsm-optimized, bloomlsm-standard, bloomlsm-nofilter, bloomlsm-ribbon, bloomlsm-ribbon-optimized, rocksdb, rocksdb-ribbon)"
        ),
    })
}

/// Facts about `e` measured once after the fill.
pub fn facts(e: &dyn Engine, s: &Sizes, bits_per_key: f64) -> Result<EngineFacts> {
    let space = e.space()?;
    let runs = e.runs();
    let disk_bytes = e.disk_bytes()?;
    let per_key = |b: u64| b as f64 / s.keys.max(1) as f64;
    let user = s.user_bytes().max(1) as f64;
    Ok(EngineFacts {
        engine: e.name().to_string(),
        filter_bytes_per_key: per_key(space.filter_bytes),
        index_bytes_per_key: per_key(space.index_bytes),
        disk_bytes,
        write_amplification: space.table_bytes_written as f64 / user,
        space_amplification: disk_bytes as f64 / user,
        levels: e.levels()?,
        compaction_stats: e.compaction_stats()?,
        monkey_predicted_reduction: bloomlsm_filter::math::monkey_predicted_reduction(
            &runs.iter().map(|r| r.keys).collect::<Vec<u64>>(),
        ),
        monkey_predicted_on_curve: e.filter_kind().map_or(0.0, |kind| {
            planning::monkey_predicted_reduction_on_curve(kind, &runs, bits_per_key)
        }),
    })
}

/// Runs every engine through every workload, one engine at a time.
pub fn run(config: &RunConfig, base: Option<&Path>) -> Result<Report> {
    let temp = tempfile::tempdir_in(base.unwrap_or(&std::env::temp_dir()))
        .context("creating a temporary directory")?;
    let s = &config.sizes;
    let mut measurements = Vec::new();
    let mut facts_all = Vec::new();
    let mut probes = Vec::new();
    let more_threads: Vec<usize> = config.threads.iter().copied().filter(|&t| t > 1).collect();
    for name in &config.engines {
        let dir: PathBuf = temp.path().join(name);
        let engine = open_engine(name, &dir, &config.mirror, &config.filter_policy)?;
        let e = engine.as_ref();
        measurements.push(workload::fill(e, s)?);
        facts_all.push(facts(e, s, config.mirror.bits_per_key)?);
        for (workload, present, seed) in [("readrandom", 1.0, 1), ("readmissing", 0.0, 2)] {
            let device = device_probe::when_direct(config.mirror.direct_io, &dir, seed)?;
            let mut one_thread = workload::reads(e, s, workload, present, seed, 1)?;
            device_probe::note(&mut one_thread.notes, "before", device);
            measurements.push(one_thread);
            for &t in &more_threads {
                measurements.push(workload::reads(e, s, workload, present, seed, t)?);
            }
        }
        probes.push(crate::probes::profile(e, s, s.ops)?);
        measurements.push(workload::reads(e, s, "mixed", 0.1, 3, 1)?);
        measurements.push(workload::scans(e, s)?);
        measurements.push(workload::crawler(e, s, config.mirror.bits_per_key)?);
        drop(engine);
        std::fs::remove_dir_all(&dir).ok();
    }
    let mut sweep = Vec::new();
    if config.sweep {
        let sizes = Sizes {
            keys: config.sweep_keys,
            ops: config.sweep_keys.min(s.ops),
            ..s.clone()
        };
        for &bits in &config.sweep_bits {
            for name in ["bloomlsm", "rocksdb"] {
                let dir = temp.path().join(format!("sweep-{name}-{bits}"));
                let mirror = Mirror {
                    bits_per_key: bits,
                    ..config.mirror.clone()
                };
                let engine = open_engine(name, &dir, &mirror, &config.filter_policy)?;
                workload::fill(engine.as_ref(), &sizes)?;
                let m = workload::reads(engine.as_ref(), &sizes, "readmissing", 0.0, 9, 1)?;
                sweep.push(SweepPoint {
                    engine: name.to_string(),
                    bits_per_key: bits,
                    reads_per_absent_get: m.block_reads_per_op,
                    filter_bytes_per_key: engine.filter_bytes()? as f64 / sizes.keys as f64,
                    formula_fpr: bloomlsm_filter::math::optimal_false_positive_rate(bits),
                });
                drop(engine);
                std::fs::remove_dir_all(&dir).ok();
            }
        }
    }
    Ok(Report {
        config: serde_json::to_value(config)?,
        measurements,
        facts: facts_all,
        sweep,
        probes,
    })
}
