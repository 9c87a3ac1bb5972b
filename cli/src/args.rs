//! The command line (clap derive): every command, its arguments and help.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Exit status, listed in `--help`.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  `get`: the key is not found (never written, or deleted)
  2  an error or bad arguments (one line on stderr, starting `error: `;
     for bad arguments it ends with the command's usage)";

/// A count that must not be zero: a filter of no keys or a rate measured
/// with no probe prints figures that mean nothing.
fn at_least_one() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..)
}

/// Inspect and use bloomlsm stores and tables.
#[derive(Parser, Debug)]
// A negative number is a value here too (`--max-open-files -1` before the
// command is refused by its bound, as after it), not an unknown flag.
#[command(
    name = "bloomlsm",
    version,
    after_help = EXIT_STATUS_HELP,
    allow_negative_numbers = true
)]
pub struct Cli {
    /// Print JSON instead of aligned text (same fields, same order).
    #[arg(long, global = true)]
    pub json: bool,
    /// What opening a store does with a damaged WAL record before the
    /// log's tail. `tolerate-torn-tail` (the default) refuses the store
    /// when the WAL was written with each record fsynced; `point-in-time`
    /// recovers every write before the damage and drops the rest (`stats`
    /// reports where, as `wal_replay_cut`). The study commands open
    /// read-only, so they drop nothing on disk; `put` and `delete` make
    /// the recovery permanent.
    #[arg(long, global = true, value_enum, default_value_t = WalRecoveryArg::TolerateTornTail)]
    pub wal_recovery: WalRecoveryArg,
    /// Levels of the tree for `put` and `delete` (`Options::num_levels`,
    /// default 7): a store made with more levels must be written with as
    /// many, as its tables sit below L6. The study commands read any store
    /// without it.
    #[arg(long, global = true, default_value_t = bloomlsm::Options::default().num_levels as u64,
          value_parser = clap::value_parser!(u64).range(2..=bloomlsm::MAX_LEVELS as u64))]
    pub num_levels: u64,
    /// Read table blocks with `O_DIRECT` (`Options::use_direct_reads`),
    /// past the operating system's page cache: every block-cache miss the
    /// study commands count (`stats --absent-gets`, `trace`) is then a
    /// read from the device. Refused, naming the path, where the file
    /// system refuses direct I/O (tmpfs).
    #[arg(long, global = true)]
    pub direct_reads: bool,
    /// Most table files open at once (`Options::max_open_files`, at least
    /// 1; default: no bound, every table keeps its file open). Past it a
    /// read that misses the block cache may reopen its table's file.
    #[arg(long, global = true, value_parser = at_least_one())]
    pub max_open_files: Option<u64>,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// `bloomlsm::WalRecovery`, by its name on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalRecoveryArg {
    /// `WalRecovery::TolerateTornTail`.
    TolerateTornTail,
    /// `WalRecovery::PointInTime`.
    PointInTime,
}

impl From<WalRecoveryArg> for bloomlsm::WalRecovery {
    fn from(arg: WalRecoveryArg) -> Self {
        match arg {
            WalRecoveryArg::TolerateTornTail => Self::TolerateTornTail,
            WalRecoveryArg::PointInTime => Self::PointInTime,
        }
    }
}

/// One command per module of `commands/`. Each takes a negative number as
/// a value (`--fpr -1` is refused by its bounds, `get DB -1` reads the key
/// `-1`), not as an unknown flag.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// One table file: its filter's FPR three ways, properties and footer.
    ///
    /// The false positive rate by the filter's formula (the lecture's for a
    /// standard filter), estimated from the
    /// fraction of bits set, and measured by probing keys not in the table.
    #[command(allow_negative_numbers = true)]
    Inspect {
        /// A `.sst` file.
        table: PathBuf,
        /// Absent keys to probe for the measured FPR (at least 1).
        #[arg(long, default_value_t = 100_000, value_parser = at_least_one())]
        probes: u64,
        /// Also read every entry back: each data block's checksum (and a
        /// filter block that is damaged, which plain `inspect` shows as
        /// `unusable`, is an error), the order of the entries, the
        /// properties' counts and ranges, and every key against the filter
        /// (false negatives counted; any is damage: the report is printed,
        /// then an error line, exit status 2).
        #[arg(long)]
        verify: bool,
    },
    /// What the filters save: totals, then one row per level.
    ///
    /// Tables, entries, filter memory and theoretical FPR per level; with
    /// `--absent-gets N`, first runs N gets of absent keys, so the reads
    /// saved, observed FPR and data-block reads per get mean something.
    /// Each absent key sorts right after a stored key drawn from every
    /// table in proportion to its entries, so every level meets them,
    /// except tables of one key: no absent key is in their range, so their
    /// filters are never asked (a level of only such tables shows no probe).
    /// A rate with nothing measured (no filter answered, no get ran) prints
    /// `-` (JSON null), not 0, and so does `theoretical_fpr` where no table
    /// has a usable filter. `data_blocks_read` counts data blocks read
    /// from table files (block cache misses), as `trace`'s
    /// `blocks_read_from_files`; `reads_saved` counts filter negatives.
    #[command(allow_negative_numbers = true)]
    Stats {
        /// The store directory.
        db: PathBuf,
        /// Absent-key gets to run before reporting the counters.
        #[arg(long, default_value_t = 0)]
        absent_gets: u64,
    },
    /// Reads a key: its value, or `not found` and exit status 1.
    ///
    /// A key that was never written and a deleted key are both `not found`,
    /// so a script can test `bloomlsm get DB KEY >/dev/null`. Errors exit
    /// with 2.
    #[command(after_help = EXIT_STATUS_HELP, allow_negative_numbers = true)]
    Get {
        /// The store directory.
        db: PathBuf,
        /// The key (UTF-8 text).
        key: String,
    },
    /// Writes KEY VALUE pairs, as one atomic batch per call.
    ///
    /// A call is one write-ahead-log record, which the next `put` or
    /// `delete` on the store writes out as one small L0 table (`get`,
    /// `scan`, `stats` and `trace` open the store read-only and read it
    /// from the log): give many pairs to one call rather than one call per
    /// pair.
    #[command(allow_negative_numbers = true)]
    Put {
        /// The store directory (created if missing).
        db: PathBuf,
        /// KEY VALUE, repeated: `put DB a 1 b 2` writes a=1 and b=2.
        #[arg(value_names = ["KEY", "VALUE"], required = true, num_args = 2..)]
        pairs: Vec<String>,
    },
    /// Deletes keys, as one atomic batch per call.
    ///
    /// Writes a tombstone per key given, and prints how many
    /// (`tombstones_written`): deleting an absent key is not an error, and
    /// writes one all the same.
    /// Like `put`, a call ends up as one small L0 table.
    #[command(allow_negative_numbers = true)]
    Delete {
        /// The store directory.
        db: PathBuf,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Lists pairs in key order, from `--from` (inclusive) to `--to` (exclusive).
    ///
    /// Keys compare bytewise. A `--from` that sorts after `--to` is refused
    /// (exit status 2); equal bounds are an empty range.
    #[command(allow_negative_numbers = true)]
    Scan {
        /// The store directory.
        db: PathBuf,
        /// First key. A key may start with `-` (`--from -x`): the word after
        /// `--from` is its value, whatever it is.
        #[arg(long, allow_hyphen_values = true)]
        from: Option<String>,
        /// Key to stop before (may start with `-`, as `--from`).
        #[arg(long, allow_hyphen_values = true)]
        to: Option<String>,
        /// Most pairs to print (at least 1; a note on stderr says when the
        /// range holds more).
        #[arg(long, default_value_t = 100, value_parser = at_least_one())]
        limit: u64,
    },
    /// One lookup's path: every memtable and table, each filter's verdict.
    ///
    /// Each step says where it looked, what the table's filter said
    /// (negative = a read saved), which block was read (from the cache or
    /// the file) and what it found. Exits with 0 whether or not the key is
    /// found.
    #[command(allow_negative_numbers = true)]
    Trace {
        /// The store directory.
        db: PathBuf,
        /// The key.
        key: String,
    },
    /// Sizes a filter for N items, beside an exact set of the same keys.
    ///
    /// m, k, bytes and false positive rate from a target FPR, bits per key
    /// or a memory budget. `expected_false_positives` is how many of N new
    /// (absent) items the filter would wrongly call present. `bits_per_key`
    /// counts every bit of the filter (`filter_bytes` times 8, over N); the
    /// Ribbon filter's `solution_bits_per_key` leaves its fixed header out.
    ///
    /// The lecture's crawler: `bloomlsm size --items 1000000000 --bits-per-key 10 --key-bytes 64`
    /// (1.25 GB of filter, 0.82% wrongly "seen", against 64 GB for the exact set).
    #[command(allow_negative_numbers = true)]
    Size {
        /// Number of items.
        #[arg(long)]
        items: u64,
        /// Target false positive rate, a fraction (0.01 is 1%): more than 0,
        /// less than 1.
        #[arg(long, conflicts_with_all = ["bits_per_key", "memory"])]
        fpr: Option<f64>,
        /// Filter bits per item (more than 0).
        #[arg(long, conflicts_with = "memory")]
        bits_per_key: Option<f64>,
        /// Memory budget in bytes.
        #[arg(long)]
        memory: Option<u64>,
        /// Bytes per key for the exact-set comparison.
        #[arg(long, default_value_t = 64)]
        key_bytes: u64,
    },
    /// The lecture's numbers beside formulas and measured filters.
    #[command(allow_negative_numbers = true)]
    Lecture {
        /// Keys per measured filter (at least 1).
        #[arg(long, default_value_t = 200_000, value_parser = at_least_one())]
        items: u64,
        /// Absent probes per measured filter (at least 1).
        #[arg(long, default_value_t = 2_000_000, value_parser = at_least_one())]
        probes: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn put_takes_pairs() {
        let cli = Cli::try_parse_from(["bloomlsm", "put", "db", "a", "1", "b", "2"]).unwrap();
        let Command::Put { pairs, .. } = cli.command else {
            panic!("not put")
        };
        assert_eq!(pairs, ["a", "1", "b", "2"]);
        assert!(Cli::try_parse_from(["bloomlsm", "put", "db", "a"]).is_err());
    }
}
