//! One module per command. Each returns what to print and whether the
//! answer was found; errors are `anyhow` errors printed on one line.

mod delete;
mod get;
mod inspect;
mod lecture;
mod put;
mod scan;
mod size;
mod stats;
mod trace;
mod verify;

use std::path::Path;

use anyhow::{Result, bail};
use bloomlsm::{Db, Options, WalRecovery};

use crate::args::{Cli, Command};
use crate::output::{Fields, Value};

/// How the command ended, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The command did what was asked.
    Success,
    /// `get` asked for a key that has no value (exit status 1).
    NotFound,
}

/// What a command prints and how it exits.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The fields to print, in reading order.
    pub value: Value,
    /// Success, or a key that was not found.
    pub status: Status,
}

impl From<Value> for Outcome {
    fn from(value: Value) -> Self {
        Self {
            value,
            status: Status::Success,
        }
    }
}

/// Runs one command.
pub fn run(cli: &Cli) -> Result<Outcome> {
    let store = StoreFlags {
        wal_recovery: cli.wal_recovery.into(),
        num_levels: usize::try_from(cli.num_levels)?,
    };
    match &cli.command {
        Command::Inspect {
            table,
            probes,
            verify,
        } => inspect::run(table, *probes, *verify),
        Command::Stats { db, absent_gets } => stats::run(db, store, *absent_gets),
        Command::Get { db, key } => get::run(db, store, key),
        Command::Put { db, pairs } => put::run(db, store, pairs),
        Command::Delete { db, keys } => delete::run(db, store, keys),
        Command::Scan {
            db,
            from,
            to,
            limit,
        } => scan::run(db, store, from.as_deref(), to.as_deref(), *limit),
        Command::Trace { db, key } => trace::run(db, store, key),
        Command::Size {
            items,
            fpr,
            bits_per_key,
            memory,
            key_bytes,
        } => size::run(*items, *fpr, *bits_per_key, *memory, *key_bytes),
        Command::Lecture { items, probes } => Ok(lecture::run(*items, *probes)),
    }
}

/// The store options the command line sets (global flags); every other
/// option is the default.
#[derive(Clone, Copy, Debug)]
pub struct StoreFlags {
    /// `--wal-recovery`.
    pub wal_recovery: WalRecovery,
    /// `--num-levels` (the study commands open with the most there are).
    pub num_levels: usize,
}

impl StoreFlags {
    fn options(self) -> Options {
        Options {
            wal_recovery: self.wal_recovery,
            num_levels: self.num_levels,
            ..Options::default()
        }
    }
}

/// Opens a store for writing (`put`), creating it when missing.
fn open_for_writing(path: &Path, store: StoreFlags) -> Result<Db> {
    Ok(Db::open(path, store.options())?)
}

/// Opens a store that already exists, for writing (`delete`): it refuses
/// to create one where a path was mistyped.
fn open_existing(path: &Path, store: StoreFlags) -> Result<Db> {
    if !path.join("MANIFEST").exists() {
        bail!("{} is not a bloomlsm store (no MANIFEST)", path.display());
    }
    open_for_writing(path, store)
}

/// Opens a store that already exists, read-only, for the commands that
/// study it (`get`, `scan`, `stats`, `trace`): the WAL is replayed into
/// memory, no file of the store is written, renamed or removed, and no
/// flush or compaction runs (under default options, not the store's, it
/// would reshape the tree being studied). Refused while a writer holds
/// the store, and a path without a MANIFEST is refused, not created.
/// Opened with the most levels a store may have, not the default 7: a
/// read-only open compacts nothing, so the number of levels only bounds
/// which levels it can hold, and a store made with more levels opens too.
fn open_to_study(path: &Path, store: StoreFlags) -> Result<Db> {
    let options = Options {
        num_levels: bloomlsm::MAX_LEVELS,
        ..store.options()
    };
    Ok(Db::open_read_only(path, options)?)
}

/// A written batch in a few lines however large it is: how many keys, and
/// the smallest and largest of them.
fn batch_summary<'a>(count_name: &'static str, keys: impl Iterator<Item = &'a String>) -> Fields {
    let keys: Vec<&String> = keys.collect();
    Fields::new()
        .with(count_name, keys.len())
        .with("smallest_key", keys.iter().min().map(|k| k.as_str()))
        .with("largest_key", keys.iter().max().map(|k| k.as_str()))
}
