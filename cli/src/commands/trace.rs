//! `trace`: one lookup's path, step by step, with each filter's verdict.

use std::path::Path;

use anyhow::Result;
use bloomlsm::{TraceResult, TraceSource, TraceStep};
use bloomlsm_sstable::{BlockSource, FilterVerdict};

use super::{Outcome, StoreFlags, open_to_study};
use crate::output::{Fields, Value, text};

/// The key, its value, what the filters saved, then every step taken.
pub fn run(db: &Path, store: StoreFlags, key: &str) -> Result<Outcome> {
    let db = open_to_study(db, store)?;
    super::note_wal_cut(&db, false);
    let (value, trace) = db.get_traced(key.as_bytes())?;
    db.close()?;
    let steps: Vec<Value> = trace.steps.iter().map(step).collect();
    let fields = Fields::new()
        .with("key", key)
        .with("value", value.map_or(Value::Missing, |v| text(&v)))
        .with("reads_saved", trace.reads_saved())
        .with("blocks_read_from_files", trace.blocks_read_from_files())
        .with(
            "trace",
            Fields::new()
                .with("key_hash", format!("{:#018x}", trace.key_hash))
                .with("snapshot_seq", trace.snapshot_seq)
                .with("steps", steps),
        );
    Ok(Value::from(fields).into())
}

fn step(s: &TraceStep) -> Value {
    let (source, level, table) = match &s.source {
        TraceSource::Memtable => ("memtable".to_string(), None, None),
        TraceSource::ImmutableMemtable(i) => (format!("frozen memtable {i}"), None, None),
        TraceSource::Table { level, .. } => (
            "table".to_string(),
            Some(*level),
            s.source.table_file_name(),
        ),
    };
    Fields::new()
        .with("source", source)
        .with("level", level)
        .with("table", table)
        .with("filter", s.filter.map(verdict_name))
        .with("block", s.block.map(block_name))
        .with("result", result_name(&s.result))
        .into()
}

/// The stats vocabulary: a negative is a read saved.
fn verdict_name(v: FilterVerdict) -> &'static str {
    match v {
        FilterVerdict::NotAsked => "not asked (out of range)",
        FilterVerdict::NoFilter => "no filter",
        FilterVerdict::Negative => "negative",
        FilterVerdict::TruePositive => "true positive",
        FilterVerdict::FalsePositive => "false positive",
    }
}

fn block_name(b: BlockSource) -> &'static str {
    match b {
        BlockSource::Cache => "cache",
        BlockSource::File => "file",
    }
}

fn result_name(r: &TraceResult) -> &'static str {
    match r {
        TraceResult::Missing => "missing",
        TraceResult::Value => "value",
        TraceResult::Deleted => "deleted",
    }
}
