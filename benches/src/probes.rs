//! Where the reads of absent gets come from, level by level: for each
//! level, its tables, keys and filter bytes, and how often an absent get
//! probed one of its filters and got a false positive. Both engines count
//! per level (ours in `Db::stats`, RocksDB in its per-level perf context),
//! so "runs probed per absent get" and each level's false positive rate
//! are measured, not assumed.

use anyhow::{Result, bail};

use crate::engines::Engine;
use crate::keys::absent_key;
use crate::workload::Sizes;

/// One level of an engine: what it holds now and cumulative counters of
/// the point reads that probed its filters.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LevelProbes {
    /// Level number (0: the overlapping tables).
    pub level: usize,
    /// Live tables.
    pub tables: u64,
    /// Keys of the live tables.
    pub keys: u64,
    /// Filter bytes of the live tables.
    pub filter_bytes: u64,
    /// Filter probes (every answer: negative, false or true positive).
    pub probes: u64,
    /// Probes that said "maybe" for a key the table does not hold.
    pub false_positives: u64,
    /// Data blocks read from files by point reads at this level.
    pub block_reads: u64,
}

/// One level's figures over a run of absent gets.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LevelRow {
    /// Level number.
    pub level: usize,
    /// Live tables.
    pub tables: u64,
    /// Keys of the live tables.
    pub keys: u64,
    /// Filter bits per key of the level (filter bytes x 8 / keys).
    pub bits_per_key: f64,
    /// Filter probes at this level per absent get: the share of absent
    /// gets whose key falls in a table's range here (L0: summed over its
    /// tables).
    pub probes_per_get: f64,
    /// False positives / probes.
    pub fpr: f64,
    /// Data blocks read at this level per absent get.
    pub reads_per_get: f64,
}

/// An engine's per-level profile of absent gets.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ProbeProfile {
    /// Engine name.
    pub engine: String,
    /// Absent gets issued.
    pub gets: u64,
    /// Levels with tables, shallowest first.
    pub levels: Vec<LevelRow>,
}

impl ProbeProfile {
    /// Filter probes per absent get, all levels.
    pub fn probes_per_get(&self) -> f64 {
        self.levels.iter().map(|l| l.probes_per_get).sum()
    }

    /// Data block reads per absent get, all levels.
    pub fn reads_per_get(&self) -> f64 {
        self.levels.iter().map(|l| l.reads_per_get).sum()
    }
}

/// Issues `gets` absent gets from this thread (keys of their own seed, so
/// not the timed workloads' keys) and returns each level's share of the
/// probes, false positives and reads.
pub fn profile(engine: &dyn Engine, s: &Sizes, gets: u64) -> Result<ProbeProfile> {
    engine.count_probes_on_this_thread(true);
    let before = engine.level_probes()?;
    for i in 0..gets {
        let k = absent_key(i ^ 0xab5e_0000_0000, s.key_bytes);
        if engine.get(&k)?.is_some() {
            bail!("{}: absent key returned a value", engine.name());
        }
    }
    let after = engine.level_probes()?;
    engine.count_probes_on_this_thread(false);
    let per_get = |n: u64| n as f64 / gets.max(1) as f64;
    let levels = after
        .iter()
        .filter(|l| l.tables > 0)
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.level == a.level)
                .copied()
                .unwrap_or_default();
            let probes = a.probes.saturating_sub(b.probes);
            let fps = a.false_positives.saturating_sub(b.false_positives);
            LevelRow {
                level: a.level,
                tables: a.tables,
                keys: a.keys,
                bits_per_key: a.filter_bytes as f64 * 8.0 / a.keys.max(1) as f64,
                probes_per_get: per_get(probes),
                fpr: if probes == 0 {
                    0.0
                } else {
                    fps as f64 / probes as f64
                },
                reads_per_get: per_get(a.block_reads.saturating_sub(b.block_reads)),
            }
        })
        .collect();
    Ok(ProbeProfile {
        engine: engine.name().to_string(),
        gets,
        levels,
    })
}

/// The profiles as one markdown table.
pub fn markdown(profiles: &[ProbeProfile]) -> String {
    if profiles.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n| engine | level | tables | keys | filter bits/key | probes per absent get | FPR | reads per absent get |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in profiles {
        for l in &p.levels {
            out += &format!(
                "| {} | L{} | {} | {} | {:.2} | {:.4} | {:.4}% | {:.5} |\n",
                p.engine,
                l.level,
                l.tables,
                l.keys,
                l.bits_per_key,
                l.probes_per_get,
                l.fpr * 100.0,
                l.reads_per_get
            );
        }
        out += &format!(
            "| {} | all ({} absent gets) | | | | {:.4} | | {:.5} |\n",
            p.engine,
            p.gets,
            p.probes_per_get(),
            p.reads_per_get()
        );
    }
    out
}
