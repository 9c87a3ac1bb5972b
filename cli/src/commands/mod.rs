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

use anyhow::{Result, anyhow, bail};
use bloomlsm::{Db, Options, WalRecovery};

use crate::args::{Cli, Command};
use crate::output::{Fields, Value};

/// How the command ended, when it did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// The command did what was asked.
    Success,
    /// `get` asked for a key that has no value (exit status 1).
    NotFound,
    /// What was asked about is damaged (`inspect --verify` of a filter
    /// that rules out keys its table holds): the report is printed, so its
    /// figures are seen, then this error line, and the exit status is 2.
    Damaged(String),
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
    let store = StoreFlags::from_cli(cli)?;
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
        } => scan::run(
            db,
            store,
            from.as_deref(),
            to.as_deref(),
            // More than memory could hold pairs of is no limit at all.
            usize::try_from(*limit).unwrap_or(usize::MAX),
        ),
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
    /// `--direct-reads`.
    pub use_direct_reads: bool,
    /// `--max-open-files`.
    pub max_open_files: Option<usize>,
}

impl StoreFlags {
    /// The global flags of `cli`.
    fn from_cli(cli: &Cli) -> Result<Self> {
        Ok(Self {
            wal_recovery: cli.wal_recovery.into(),
            num_levels: usize::try_from(cli.num_levels)?,
            use_direct_reads: cli.direct_reads,
            max_open_files: cli.max_open_files.map(usize::try_from).transpose()?,
        })
    }

    fn options(self) -> Options {
        Options {
            wal_recovery: self.wal_recovery,
            num_levels: self.num_levels,
            use_direct_reads: self.use_direct_reads,
            max_open_files: self.max_open_files,
            ..Options::default()
        }
    }
}

/// Opens a store for writing (`put`), creating it when missing; says on
/// stderr when the open dropped writes its WAL replay could not reach.
fn open_for_writing(path: &Path, store: StoreFlags) -> Result<Db> {
    let db = Db::open(path, store.options())?;
    note_wal_cut(&db, true);
    Ok(db)
}

/// A note on stderr (stdout stays the answer) when opening `db` stopped
/// its WAL replay short (`Stats::wal_replay_cut`): which WAL, from where,
/// why, what was not replayed, and whether it is gone on disk (`dropped`:
/// a read-write open) or only unread (a read-only open). A cut of 0 bytes
/// is noted too: it is the end of a WAL a clean close sealed, cut before
/// its close marker under point-in-time recovery, whose lost end (the
/// marker, and maybe writes) left no byte to count.
fn note_wal_cut(db: &Db, dropped: bool) {
    let Some(cut) = db.stats().wal_replay_cut else {
        return;
    };
    // Which open would make the loss permanent: one under the same
    // recovery mode. Past damage only point-in-time reads past, a plain
    // put or delete refuses the store and drops nothing.
    let next = if cut.cause == bloomlsm::WalCutCause::PointInTime {
        "the next put or delete under --wal-recovery point-in-time"
    } else {
        "the next put or delete"
    };
    let (lost, fate) = if cut.bytes_not_replayed == 0 {
        (
            "the WAL's end is missing (the close marker its clean close wrote, and maybe writes before it; no byte of them is left)".to_string(),
            if dropped {
                "this open made the loss permanent".to_string()
            } else {
                format!("{next} makes the loss permanent")
            },
        )
    } else {
        (
            format!("{} bytes not replayed", cut.bytes_not_replayed),
            if dropped {
                "this open dropped them for good".to_string()
            } else {
                format!("unread, not dropped: {next} drops them for good")
            },
        )
    };
    to_stderr(&format!(
        "note: WAL replay stopped at offset {} of {} ({}): {lost}, {fate}",
        cut.offset,
        cut.path.display(),
        stats::cut_cause(cut.cause),
    ));
}

/// `line` and a newline on stderr. A stderr no one reads (a closed pipe)
/// is no reason to fail or panic (`eprintln!` would): the command keeps
/// its exit status.
pub fn to_stderr(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Closes `db` after its batch was written: a failure then says what
/// became of the batch. When writes had stopped (a background flush or
/// compaction failed), the close still fsynced every WAL, so the batch is
/// durable; any other failure is the close's own fsync, so the batch may
/// not survive a power loss (the CLI writes with `SyncMode::Never`).
fn close_after_write(db: Db) -> Result<()> {
    db.close().map_err(|e| match e {
        bloomlsm::Error::WritesStopped(_) => {
            anyhow!("the batch was written and synced, but the store had stopped writes: {e}")
        }
        e => anyhow!(
            "the batch was written, but closing the store failed, so it may not survive a power loss: {e}"
        ),
    })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

    use std::sync::Arc;

    use bloomlsm::fs::fault::FaultFs;
    use bloomlsm::{Db, Options};

    use super::{StoreFlags, close_after_write};

    /// A store whose writes stopped after the batch was written: the
    /// close's error says the batch is durable, and a reopen finds it.
    #[test]
    fn a_close_after_writes_stopped_says_the_batch_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let options = Options {
            background_work: false,
            ..Options::default()
        };
        let db = Db::open_with_fs(dir.path(), options.clone(), Arc::new(fs.clone())).unwrap();
        db.put(b"k", b"v").unwrap();
        fs.set_refuse_table_files(true);
        assert!(db.flush().is_err(), "the flush was to fail");
        let message = close_after_write(db).unwrap_err().to_string();
        assert!(
            message.starts_with("the batch was written and synced"),
            "{message}"
        );
        fs.set_refuse_table_files(false);
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    }

    /// A close whose own fsync fails: the batch may not be durable.
    #[test]
    fn a_close_whose_fsync_fails_says_the_batch_may_be_lost() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let db = Db::open_with_fs(dir.path(), Options::default(), Arc::new(fs.clone())).unwrap();
        db.put(b"k", b"v").unwrap();
        fs.fail_only_op(fs.ops());
        let message = close_after_write(db).unwrap_err().to_string();
        assert!(
            message.contains("may not survive a power loss"),
            "{message}"
        );
    }

    /// The global read flags reach the options every open uses, before or
    /// after the command; without them, the engine's defaults.
    #[test]
    fn the_read_flags_reach_the_store_options() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let cli = crate::args::Cli::try_parse_from(args).unwrap();
            StoreFlags::from_cli(&cli).unwrap().options()
        };
        let options = parse(&["bloomlsm", "--direct-reads", "stats", "d"]);
        assert!(options.use_direct_reads);
        assert_eq!(options.max_open_files, None);
        let options = parse(&["bloomlsm", "get", "d", "k", "--max-open-files", "3"]);
        assert!(!options.use_direct_reads);
        assert_eq!(options.max_open_files, Some(3));
        let defaults = Options::default();
        let options = parse(&["bloomlsm", "scan", "d"]);
        assert_eq!(options.use_direct_reads, defaults.use_direct_reads);
        assert_eq!(options.max_open_files, defaults.max_open_files);
        assert!(
            crate::args::Cli::try_parse_from(["bloomlsm", "--max-open-files", "0", "scan", "d"])
                .is_err()
        );
    }
}
