//! What is wrong with a damaged store file: the typed reason carried by
//! [`crate::Error::Corruption`] (its `source`), beside the file and offset.

use std::path::PathBuf;

use crate::batch::BatchError;

/// Why a manifest, WAL or table was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Damage {
    /// The manifest does not decode, or names an impossible state.
    #[error(transparent)]
    Manifest(#[from] ManifestDamage),
    /// A WAL record is damaged where a torn tail cannot explain it.
    #[error(transparent)]
    Wal(#[from] WalDamage),
    /// A table's size differs from the size its manifest record gives.
    #[error("table is {found} bytes; the manifest recorded {recorded}")]
    TableSize {
        /// Bytes of the file.
        found: u64,
        /// Bytes the manifest recorded.
        recorded: u64,
    },
    /// A table's own properties disagree with its manifest record on a key
    /// or sequence range or the entry count. The read path trusts the
    /// record (a level's search finds a table by its recorded range and
    /// does not check the key again), so such a table would miss keys.
    #[error("table's {field} is {found}; the manifest recorded {recorded}")]
    TableRecord {
        /// Which figure differs.
        field: TableRecordField,
        /// The table's own (from its properties block), printed.
        found: String,
        /// The manifest's, printed.
        recorded: String,
    },
    /// A table's filter block is damaged and the store was opened with
    /// `CorruptFilterPolicy::Fail` (a filter block whose read failed is
    /// [`crate::Error::Io`] of the read's kind instead).
    #[error(transparent)]
    Filter(bloomlsm_sstable::FilterLoadError),
    /// The manifest's tables break the order the read path relies on.
    #[error(transparent)]
    TreeOrder(TreeOrderError),
}

/// A figure a manifest record gives for its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableRecordField {
    /// The smallest user key.
    SmallestKey,
    /// The largest user key.
    LargestKey,
    /// The smallest sequence number.
    SmallestSeq,
    /// The largest sequence number.
    LargestSeq,
    /// The number of entries.
    Entries,
}

impl std::fmt::Display for TableRecordField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::SmallestKey => "smallest key",
            Self::LargestKey => "largest key",
            Self::SmallestSeq => "smallest sequence",
            Self::LargestSeq => "largest sequence",
            Self::Entries => "entry count",
        })
    }
}

/// How a set of tables breaks the order the read path relies on: L0
/// newest first by disjoint sequence ranges, every deeper level sorted with
/// no two tables sharing a key.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum TreeOrderError {
    /// Two adjacent L0 tables whose sequence ranges overlap or are not
    /// newest first.
    #[error(
        "L0 tables {newer} (seq {newer_seqs:?}) and {older} (seq {older_seqs:?}) \
         are out of order or overlap"
    )]
    L0Sequences {
        /// The table searched first.
        newer: u64,
        /// Its sequence range.
        newer_seqs: std::ops::RangeInclusive<u64>,
        /// The table searched after it.
        older: u64,
        /// Its sequence range.
        older_seqs: std::ops::RangeInclusive<u64>,
    },
    /// Two adjacent tables of a sorted level that share a key or are out
    /// of key order.
    #[error("L{level} tables {first} and {second} overlap or are out of order")]
    LevelKeys {
        /// The level.
        level: usize,
        /// The table before.
        first: u64,
        /// The table after it.
        second: u64,
    },
    /// A table at a level the tree does not have.
    #[error("table {number} at level {level}, past the tree's {levels} levels")]
    NoSuchLevel {
        /// Its file number.
        number: u64,
        /// Its level.
        level: usize,
        /// Levels of the tree.
        levels: usize,
    },
    /// An edit removes a table the version does not hold: its inputs were
    /// replaced already (a copy or an output installed twice).
    #[error("an edit removes table {number}, which is not live")]
    RemovedNotLive {
        /// Its file number.
        number: u64,
    },
}

/// Why a manifest was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestDamage {
    /// Fewer bytes than a header.
    #[error("shorter than a manifest header")]
    TooShort,
    /// The first 8 bytes are not the manifest magic.
    #[error("bad manifest magic {found:#018x}")]
    BadMagic {
        /// What was there.
        found: u64,
    },
    /// The payload's length differs from the header's.
    #[error("payload of {actual} bytes; the header says {header}")]
    Length {
        /// Length in the header.
        header: usize,
        /// Bytes after the header.
        actual: usize,
    },
    /// The checksum over version, length and payload does not match.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The stored crc32.
        stored: u32,
        /// The computed crc32.
        computed: u32,
    },
    /// The checksummed payload does not decode.
    #[error("payload does not decode")]
    Undecodable,
    /// The last sequence number is beyond the largest one.
    #[error("last sequence {0} exceeds the largest sequence (2^56 - 1)")]
    LastSequence(u64),
    /// The next file number is implausibly large.
    #[error("next file number {0} is implausibly large")]
    FileNumber(u64),
    /// A table record that no store writes.
    #[error(
        "table {number}: sequences {smallest}..={largest} (beyond the last sequence?), \
         keys out of order, or a number at or above the next file number"
    )]
    Table {
        /// Its file number.
        number: u64,
        /// Its smallest sequence.
        smallest: u64,
        /// Its largest sequence.
        largest: u64,
    },
    /// Two table records name one file. Opened, each would be a table of
    /// its own over the same file, and a compaction replacing one would
    /// delete the file the other still names.
    #[error("table {number} is named by two records")]
    DuplicateTable {
        /// The file number named twice.
        number: u64,
    },
    /// The oldest live WAL's number is at or past the next file number,
    /// which every WAL number was handed out below: opened, no WAL on
    /// disk would be replayed, and each would be removed as flushed.
    #[error("WAL number {wal} is at or past the next file number {next}")]
    WalNumber {
        /// The manifest's oldest live WAL number.
        wal: u64,
        /// The manifest's next file number.
        next: u64,
    },
}

/// Why WAL replay refused a store.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalDamage {
    /// A damaged record with an intact one after it in the same WAL, in a
    /// WAL whose writer fsynced each record (or that does not say).
    #[error(
        "damaged WAL record followed by intact records \
         (WalRecovery::PointInTime recovers the writes before it)"
    )]
    BeforeIntact,
    /// So much damage that telling a torn tail would cost more than a
    /// linear budget of checksumming (damage crafted to be quadratic).
    #[error("damaged WAL record; too much damage to tell a torn tail")]
    Undecidable,
    /// A damaged record at the end of a WAL that is not the newest one
    /// holding records.
    #[error(
        "damaged WAL record, and the newer WAL {} holds intact records \
         (WalRecovery::PointInTime recovers the writes before it)",
        .newer.display()
    )]
    BeforeNewerWal {
        /// The newer WAL.
        newer: PathBuf,
    },
    /// A WAL whose header is damaged (or of a version this build does not
    /// know, or, in a store whose WALs are all of version 3, missing: zeros
    /// or other bytes where the magic is) with bytes other than zeros
    /// after it: a
    /// header is fsynced before any record is appended, so no crash
    /// leaves it damaged with records after it, and in a salted WAL
    /// (version 3) the records cannot be checked without it. (A device
    /// that tears a clean close's header rewrite inside its sector leaves
    /// one, its records all fsynced: refused here, what the header
    /// promised unknown; `WalRecovery::PointInTime` replays its records
    /// under the salt both headers hold, `wal::salvaged_records`.)
    #[error(
        "damaged WAL header with bytes after it \
         (WalRecovery::PointInTime recovers the writes before it, and this \
         WAL's records if the salt in its header verifies them)"
    )]
    DamagedHeader,
    /// A checksummed record that is not a batch.
    #[error("record is not a batch: {0}")]
    Batch(#[from] BatchError),
    /// A batch with no operation where the log does not go on: a write
    /// never logs one, and a clean close's marker (`wal/seal.rs`) is at
    /// the sequence the log goes on at.
    #[error("empty batch that is not a close marker (a write never logs one)")]
    EmptyBatch,
    /// Damage at the end of a WAL whose header says a clean close ended it
    /// with a close marker (`wal/seal.rs`): the marker and the writes
    /// before it were fsynced, so this is no torn tail.
    #[error(
        "damaged end of a WAL a clean close sealed with a close marker \
         (WalRecovery::PointInTime recovers the writes before it)"
    )]
    ClosedWalEnd,
    /// Damage at the end of a WAL whose header says each record was
    /// fsynced, where the log must go on with a write at or below the
    /// manifest's last sequence: that write was visible when the manifest
    /// was written, so fsynced, and a crash mid-append cannot have torn it.
    #[error(
        "damaged WAL record where the log goes on at sequence {expected}, at or below the \
         manifest's last sequence {last}: an fsynced write is lost \
         (WalRecovery::PointInTime recovers the writes before it)"
    )]
    AcknowledgedLost {
        /// The sequence the damaged record would have started at.
        expected: u64,
        /// The manifest's last sequence.
        last: u64,
    },
    /// A batch at sequence 0 (sequences start at 1).
    #[error("batch starts at sequence 0 (sequences start at 1)")]
    ZeroSequence,
    /// A batch whose sequences run past the largest one.
    #[error("batch of {count} ops at sequence {first} runs past the largest sequence (2^56 - 1)")]
    PastLargest {
        /// Its first sequence.
        first: u64,
        /// Its operations.
        count: u64,
    },
    /// The first record of the log is not where the tables and the
    /// manifest say the log starts (it re-uses sequences the tables hold,
    /// or writes before it are missing).
    #[error(
        "the log starts at sequence {first}; the tables and manifest say it starts in \
         {lowest}..={highest}"
    )]
    StartOutOfRange {
        /// The first record's first sequence.
        first: u64,
        /// One past the largest sequence in a table.
        lowest: u64,
        /// One past the manifest's last sequence.
        highest: u64,
    },
    /// A batch that does not continue the record before it.
    #[error(
        "batch starts at sequence {found}, the previous record ended before {expected}: \
         writes are missing"
    )]
    Gap {
        /// The sequence the previous record ends before.
        expected: u64,
        /// The batch's first sequence.
        found: u64,
    },
}
