//! Where an open's WAL replay ended before the end of its WAL files, and
//! why: the writes that open dropped (`Stats::wal_replay_cut`).

use std::path::PathBuf;

/// Why replay ended before the end of the WAL files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalCutCause {
    /// In a WAL whose records were each fsynced (or written by a build
    /// before WAL format version 2): a torn last record (a crash in the
    /// middle of an append), or zeros after the last record, with nothing
    /// of the log after it.
    TornTail,
    /// Damage in a WAL written without fsync (`SyncMode::Never`), a torn
    /// last record included, or a newer WAL continuing such a WAL after a
    /// gap: a power loss may lose any of its pages, and the log ends
    /// there, whatever follows.
    UnsyncedWal,
    /// Damage under `WalRecovery::PointInTime`.
    PointInTime,
}

/// Where replay ended, when it did not reach the end of the WAL files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalCut {
    /// The WAL holding the first byte not replayed.
    pub path: PathBuf,
    /// That byte's offset in it.
    pub offset: u64,
    /// Bytes of WAL files not replayed: the rest of that WAL, and every
    /// newer WAL past its header (the whole of a newer WAL whose header is
    /// damaged, which no longer says where its records start; none of a
    /// WAL whose header never became durable: a prefix of a header or up
    /// to 24 zeros, nor of a version 3 WAL of a header alone, damaged or
    /// not: neither held a record).
    /// 0 at the end of a newest WAL whose header says a clean close ended
    /// it with a close marker, cut cleanly before it under
    /// `WalRecovery::PointInTime`: what it lost is gone.
    pub bytes_not_replayed: u64,
    /// Why.
    pub cause: WalCutCause,
}
