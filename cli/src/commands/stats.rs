//! `stats`: what the filters saved, in total and per level.

use std::path::Path;

use anyhow::Result;
use bloomlsm::{Db, LevelStats, WalCut, WalCutCause};

use super::{Outcome, StoreFlags, open_to_study};
use crate::output::{Fields, Value};

/// Most stored keys that seed the absent keys (each absent key sorts right
/// after one, so it falls inside the tables' key ranges).
const MAX_SEED_KEYS: u64 = 100_000;

/// The store (and the absent gets asked for), the totals, then one row
/// per non-empty level.
pub fn run(path: &Path, store: StoreFlags, absent_gets: u64) -> Result<Outcome> {
    let seeds = if absent_gets > 0 {
        let db = open_to_study(path, store)?;
        let seeds = seed_keys(&db, path, absent_gets)?;
        db.close()?;
        seeds
    } else {
        Vec::new()
    };
    // Opened again after the seeding scan, with a cold block cache: the
    // scan's blocks would otherwise turn every false positive into a
    // cache hit and the data block reads into zero.
    let db = open_to_study(path, store)?;
    let absent_gets_run = run_absent_gets(&db, &seeds, absent_gets)?;
    let s = db.stats();
    db.close()?;
    let levels: Vec<Value> = s
        .levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.tables > 0)
        .map(|(i, l)| level_row(i, l))
        .collect();
    let mut fields = Fields::new().with("store", path.display().to_string());
    if absent_gets > 0 {
        fields.push("absent_gets_run", absent_gets_run);
    }
    let fields = fields
        .with("gets", s.gets)
        .with("table_probes", s.total.table_probes)
        .with("reads_saved", s.total.filter_negatives)
        .with("false_positives", s.total.filter_false_positives)
        .with("probes_without_filter", s.total.probes_without_filter)
        .with("observed_fpr", s.total.observed_fpr)
        .with("theoretical_fpr", s.total.theoretical_fpr)
        .with("data_blocks_read_per_get", s.data_blocks_read_per_get)
        .with(
            "tables_without_usable_filter",
            s.total.tables_without_usable_filter,
        )
        .with("filter_read_retries", s.total.filter_read_retries)
        .with("levels", levels)
        .with("wal_replay_cut", s.wal_replay_cut.as_ref().map(wal_cut_row));
    Ok(Value::from(fields).into())
}

/// Where the open's WAL replay stopped short, and why (null when it
/// replayed every WAL whole).
fn wal_cut_row(c: &WalCut) -> Fields {
    Fields::new()
        .with("wal", c.path.display().to_string())
        .with("offset", c.offset)
        .with("bytes_not_replayed", c.bytes_not_replayed)
        .with("cause", cut_cause(c.cause))
}

/// Why a WAL replay stopped short, in words.
pub(super) fn cut_cause(cause: WalCutCause) -> &'static str {
    match cause {
        WalCutCause::TornTail => "torn tail",
        WalCutCause::UnsyncedWal => "damage in a WAL written without fsync",
        WalCutCause::PointInTime => "damage, point-in-time recovery",
        _ => "other",
    }
}

/// Stored keys spread over every table: each table of the manifest gives a
/// share of the seeds in proportion to its entries, the first keys of the
/// store in its key range. So every level's tables meet absent keys, not
/// only those holding the store's smallest keys. A table none of whose
/// keys is live (tombstones, overwritten versions) gives its smallest key.
/// A store of no table (every write still in the WAL) gives its smallest
/// keys. A table of one key meets no absent key (none is in its range).
fn seed_keys(db: &Db, path: &Path, absent_gets: u64) -> Result<Vec<Vec<u8>>> {
    let wanted = absent_gets.min(MAX_SEED_KEYS);
    // Read under the study open's lock: no writer can change the manifest.
    let tables = bloomlsm::table_records(path)?;
    let entries: u64 = tables.iter().map(|t| t.entries).sum();
    let mut stored = Vec::new();
    for table in &tables {
        let share =
            (u128::from(wanted) * u128::from(table.entries)).div_ceil(u128::from(entries.max(1)));
        let range = table.smallest_key.as_slice()..=table.largest_key.as_slice();
        let before = stored.len();
        for item in db.scan(range)?.take(share as usize) {
            stored.push(item?.0);
        }
        if stored.len() == before {
            stored.push(table.smallest_key.clone());
        }
    }
    if stored.is_empty() {
        for item in db.scan::<&[u8], _>(..)?.take(wanted as usize) {
            stored.push(item?.0);
        }
    }
    Ok(stored)
}

/// `absent_gets` gets of keys that sort right after a seed (none without
/// seeds); returns how many ran.
fn run_absent_gets(db: &Db, seeds: &[Vec<u8>], absent_gets: u64) -> Result<u64> {
    if seeds.is_empty() {
        return Ok(0);
    }
    for i in 0..absent_gets {
        let mut key = seeds[(i as usize) % seeds.len()].clone();
        key.extend_from_slice(format!("\u{0}absent{i}").as_bytes());
        db.get(&key)?;
    }
    Ok(absent_gets)
}

fn level_row(level: usize, l: &LevelStats) -> Value {
    Fields::new()
        .with("level", level)
        .with("tables", l.tables)
        .with("entries", l.entries)
        .with("tombstones", l.tombstones)
        .with("filter_bytes", l.filter_bytes)
        .with("bits_per_key", l.bits_per_key)
        .with("theoretical_fpr", l.theoretical_fpr)
        .with("table_probes", l.table_probes)
        .with("reads_saved", l.filter_negatives)
        .with("false_positives", l.filter_false_positives)
        .with("probes_without_filter", l.probes_without_filter)
        .with("observed_fpr", l.observed_fpr)
        .with("data_blocks_read", l.data_blocks_read)
        .into()
}
