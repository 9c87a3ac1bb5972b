//! Replaying the WALs of a store that was not flushed when it stopped.
//!
//! Writes are numbered without gaps, each WAL continues where the previous
//! one ended, and the oldest live WAL continues where the tables end, so
//! what a store recovers must be a prefix of the writes. Replay stops at
//! the first damage ACROSS ALL WALs: in point-in-time mode it ends there;
//! in torn-tail mode damage is tolerated only where a crash can leave it,
//! and anything else is a corruption error naming the file and offset.
//! Where a crash can leave damage depends on what the damaged WAL's writer
//! promised (its header, `wal/header.rs`):
//! - each record fsynced before the next (`SyncMode::Always`; also a
//!   version 1 WAL, which says nothing): only at the very end of the log,
//!   with no record of the log after it in this or any newer WAL;
//! - no fsync while the store ran (`SyncMode::Never`): anywhere. A power
//!   loss may keep any of the WAL's pages and lose others, in this WAL and
//!   the newer ones alike, and nothing after the damage was promised to
//!   survive one, so the log ends at the damage as in point-in-time mode.
//!   So does a newer WAL whose first record skips sequences (the older
//!   WAL's file cut at a record boundary, its last records lost whole).
//!
//! In a WAL whose header says each record was fsynced, a damaged record
//! whose header survived must also have nothing of the log past where its
//! length says it ends: a torn record there was the last one appended.
//! Nor may the write at the damage be at or below the manifest's last
//! sequence: every such write was visible, so fsynced, when the manifest
//! was written, and a crash mid-append tears only a write that never was.
//!
//! Damage is any byte range that is not an intact record, a checksummed
//! record whose sequence numbers cannot continue the log (zero, past the
//! largest, not continuing the record before, or for the first record not
//! where the tables and manifest say the log starts), and a WAL with no
//! record that is not the newest (a memtable is frozen only once it holds
//! a write, so only the active WAL may be empty; a power cut can empty an
//! older one).
//!
//! "A record of the log after the damage" is a record whose checksum
//! verifies under its WAL file's salt (version 3; `wal/header.rs`) with a
//! sequence number the log could hold there: exactly the successor of a
//! torn record whose header survived, else any sequence from the damaged
//! one on. Records of another log inside a torn value (another salt, or
//! none), or random bytes, are not taken for one; in a version 2 WAL (no
//! salt) another log's records at those sequences still are.
//!
//! A damaged header (`wal::format_of`: in a store whose WALs are all of
//! version 3, any file without the magic too) promises nothing, and with
//! bytes after it torn-tail mode refuses it (`WalDamage::DamagedHeader`).
//! Point-in-time mode needs no promise: when the WAL's first record
//! verifies under bytes 12..20, where a version 3 header keeps its salt,
//! it replays the records under that salt up to the first damage
//! (`wal::salvaged_records`). A clean close's header rewrite torn inside
//! its sector leaves such a header (`wal/seal.rs`), every record fsynced.

use std::path::{Path, PathBuf};

use bloomlsm_sstable::MAX_SEQUENCE;

use crate::batch::WriteBatch;
use crate::damage::WalDamage;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, names};
use crate::memtable::MemTable;
use crate::options::WalRecovery;
use crate::wal::{self, SeqFilter, WalFormat};
use crate::wal_cut::{WalCut, WalCutCause};

/// Where the log must start: the first record of the oldest live WAL has
/// a sequence in `lowest..=highest`. `lowest` is one past the largest
/// sequence any table holds (a compaction may have dropped the very
/// newest flushed entry, so the log may start later); `highest` is one
/// past the manifest's last sequence (every write before the oldest live
/// memtable's first was visible when the manifest was written).
/// `acknowledged`: the manifest's last sequence, every write up to which
/// was visible, so acknowledged, when the manifest was written (0 when
/// unknown). `salted`: every live WAL is of WAL format version 3 (the
/// store is new, or its manifest's store format version is 6 or more: a
/// read-write open flushes the WALs it replays and writes that manifest
/// after creating its own WAL, so older WALs fall below its WAL number),
/// so a WAL that does not begin with an intact header and holds bytes
/// other than zeros past a header's length lost a header that was
/// durable, and with it the salt its records' checksums need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogStart {
    pub(crate) lowest: u64,
    pub(crate) highest: u64,
    pub(crate) acknowledged: u64,
    pub(crate) salted: bool,
}

impl LogStart {
    /// Any start: for a WAL replayed on its own (fuzzing).
    pub(crate) const ANY: Self = Self {
        lowest: 1,
        highest: MAX_SEQUENCE,
        acknowledged: 0,
        salted: false,
    };
}

/// One WAL's name and bytes.
pub(crate) struct WalBytes {
    pub(crate) path: PathBuf,
    pub(crate) bytes: Vec<u8>,
}

/// Replays the WALs `numbers` (ascending) into `mem`. Returns the last
/// sequence number replayed, if any.
pub(crate) fn replay_wals(
    fs: &dyn FileSystem,
    dir: &Path,
    numbers: &[u64],
    mode: WalRecovery,
    start: LogStart,
    mem: &MemTable,
) -> Result<Replayed> {
    let mut logs = Vec::with_capacity(numbers.len());
    for &number in numbers {
        let path = names::wal(dir, number);
        let bytes = fs.read_all(&path)?;
        logs.push(WalBytes { path, bytes });
    }
    replay_logs(&logs, mode, start, mem)
}

/// What a replay recovered: the last sequence replayed, if any, where it
/// ended before the end of the WAL files, if it did, and the WALs whose
/// damaged header a point-in-time replay read past (`salvaged`, oldest
/// first: their records verified under the salt the header kept).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub(crate) last: Option<u64>,
    pub(crate) cut: Option<WalCut>,
    pub(crate) salvaged: Vec<PathBuf>,
}

/// The cut at offset `at` of `logs[i]`, or `None` when no byte of a
/// record is past it (an empty older WAL followed by empty WALs, or WALs
/// whose header never became durable, cut inside it or reading as zeros:
/// every write was replayed), or when the bytes past it are only a torn
/// or damaged close marker (which holds no write).
fn cut(logs: &[WalBytes], i: usize, at: u64, cause: WalCutCause) -> Option<WalCut> {
    // A header never made durable (a WAL whose creation a power loss
    // interrupted, or whose header's fsync failed) held no record, so
    // none of its bytes is a write not replayed: it counts as an empty
    // file, which is damage only as an older WAL before a newer WAL's
    // records (refused, or cut there, as for an empty older WAL).
    // So does a version 3 WAL of a header alone whose header a torn seal
    // rewrite damaged (`wal::header::header_only`).
    let unreplayed = |bytes: &[u8], from: u64| {
        if wal::header::never_durable(bytes) || wal::header::header_only(bytes) {
            0
        } else {
            (bytes.len() as u64).saturating_sub(from)
        }
    };
    let rest = unreplayed(&logs[i].bytes, at);
    let newer: u64 = logs[i + 1..]
        .iter()
        .map(|l| unreplayed(&l.bytes, wal::records_start(&l.bytes) as u64))
        .sum();
    // A torn or damaged close marker, the end of the log, held no write.
    let marker_only = newer == 0 && wal::is_damaged_marker(&logs[i].bytes, at as usize);
    let bytes_not_replayed = rest + newer;
    (bytes_not_replayed > 0 && !marker_only).then(|| WalCut {
        path: logs[i].path.clone(),
        offset: at,
        bytes_not_replayed,
        cause,
    })
}

/// The cut of a newest WAL whose header says a close marker ended it,
/// cut cleanly before that marker: its lost end, of which no byte is
/// left to count.
fn lost_end_cut(log: &WalBytes) -> WalCut {
    WalCut {
        path: log.path.clone(),
        offset: log.bytes.len() as u64,
        bytes_not_replayed: 0,
        cause: WalCutCause::PointInTime,
    }
}

/// [`replay_wals`] over WALs already read, oldest first.
pub(crate) fn replay_logs(
    logs: &[WalBytes],
    mode: WalRecovery,
    start: LogStart,
    mem: &MemTable,
) -> Result<Replayed> {
    let mut next: Option<u64> = None;
    let mut last = None;
    let mut salvaged_wals = Vec::new();
    // Whether the WAL before this one fsynced each record (and itself
    // before this one's first record).
    let mut older_durable = true;
    // Every WAL up to the newest one that ends in an intact close marker
    // was fsynced whole before the marker was written (`wal/seal.rs`), so
    // it is read strictly whatever its header says (a file system without
    // `overwrite`, or a power loss before the header's rewrite, leaves it
    // saying "unsynced").
    let closed_through = logs
        .iter()
        .rposition(|l| wal::ends_with_close_marker(&l.bytes, start.lowest));
    for (i, log) in logs.iter().enumerate() {
        let mut replay = wal::records(&log.bytes);
        // A header a torn seal rewrite damaged, its salt intact
        // (`wal::salvaged_records`): at a point in time its records are
        // read under that salt, as the log's.
        if mode == WalRecovery::PointInTime
            && replay.damage == Some(0)
            && let Some(salvaged) = wal::salvaged_records(&log.bytes, start.salted)
        {
            replay = salvaged;
            salvaged_wals.push(log.path.clone());
        }
        let closed = closed_through.is_some_and(|c| i <= c);
        let durable = closed || replay.format.each_record_durable();
        let replayed_any = !replay.records.is_empty();
        // Whether the last record replayed is a close marker.
        let mut ends_in_marker = false;
        let ended = |last, at, cause| {
            Ok(Replayed {
                last,
                cut: cut(logs, i, at, cause),
                salvaged: salvaged_wals.clone(),
            })
        };
        for (k, record) in replay.records.into_iter().enumerate() {
            let (first, batch) = match checked_batch(&record.payload, next, start) {
                Ok(b) => b,
                Err(_) if mode == WalRecovery::PointInTime => {
                    return ended(last, record.offset, WalCutCause::PointInTime);
                }
                // The older WAL, never fsynced, lost its last records
                // whole (its file cut at a record boundary) while this
                // one's first reached the disk: the log ends before it.
                Err(WalDamage::Gap { expected, found })
                    if k == 0 && !older_durable && found > expected =>
                {
                    return ended(last, record.offset, WalCutCause::UnsyncedWal);
                }
                Err(reason) => return Err(Error::corruption(&log.path, record.offset, reason)),
            };
            let count = batch.len() as u64;
            for (j, (kind, key, value)) in batch.ops().enumerate() {
                mem.insert(key, first + j as u64, kind, value);
            }
            next = Some(first + count);
            ends_in_marker = count == 0;
            if count > 0 {
                last = Some(first + count - 1);
            }
        }
        let newest = i + 1 == logs.len();
        let records_start = replay.format.records_start() as u64;
        let damage = replay
            .damage
            .or((!newest && !replayed_any).then_some(records_start));
        let Some(at) = damage else {
            // A WAL whose header says it ends with a close marker, cut
            // cleanly before it: its end, marker and maybe writes, is lost.
            if replay.format.is_closed() && !ends_in_marker {
                let end = log.bytes.len() as u64;
                if mode == WalRecovery::TolerateTornTail {
                    return Err(Error::corruption(&log.path, end, WalDamage::ClosedWalEnd));
                }
                // Point in time: a newer WAL's first record says whether
                // writes were lost (a gap); in the newest nothing does, so
                // the log ends here, reported though no byte of it is left.
                if newest {
                    return Ok(Replayed {
                        last,
                        cut: Some(lost_end_cut(log)),
                        salvaged: salvaged_wals,
                    });
                }
            }
            older_durable = durable;
            continue;
        };
        let cause = if mode == WalRecovery::PointInTime {
            WalCutCause::PointInTime
        } else if durable {
            let synced = closed
                || matches!(
                    replay.format,
                    WalFormat::Headed { synced: true, .. } | WalFormat::Closed { .. }
                );
            check_torn_tail(
                logs,
                i,
                at,
                next.unwrap_or(start.lowest),
                synced,
                start.salted,
            )?;
            // A write at or below the manifest's last sequence was visible
            // when the manifest was written: in a WAL that fsyncs each
            // record before it is visible, no crash tears it. (Unknown when
            // no record came before: the log may start past `lowest`.)
            if let Some(expected) = next.filter(|&e| synced && e <= start.acknowledged) {
                return Err(Error::corruption(
                    &log.path,
                    at,
                    WalDamage::AcknowledgedLost {
                        expected,
                        last: start.acknowledged,
                    },
                ));
            }
            // A WAL whose header says it ends with a close marker: damage
            // at its end is no torn tail, but for a damaged marker, which
            // held no write.
            if replay.format.is_closed() && !wal::is_damaged_marker(&log.bytes, at as usize) {
                return Err(Error::corruption(&log.path, at, WalDamage::ClosedWalEnd));
            }
            WalCutCause::TornTail
        } else {
            WalCutCause::UnsyncedWal
        };
        return ended(last, at, cause);
    }
    Ok(Replayed {
        last,
        cut: None,
        salvaged: salvaged_wals,
    })
}

/// Refuses damage at `at` of `logs[i]` unless it is the end of the log:
/// no record of the log (see the module comment) after it in that WAL or
/// in any newer one (nor right where the damaged record's header says it
/// ends). `expected` is the sequence the damaged record would have
/// started at. `synced`: the WAL's header says each record was fsynced
/// before the next, so the damaged record, if torn, was the last one
/// appended, and no record of the log can start past where its length
/// field says it ends (unless that field is torn too: not searched when
/// its bytes before a sector boundary inside it are zeros,
/// `wal::framed_end`). `salted`: `LogStart::salted`.
fn check_torn_tail(
    logs: &[WalBytes],
    i: usize,
    at: u64,
    expected: u64,
    synced: bool,
    salted: bool,
) -> Result<()> {
    let log = &logs[i];
    let at_usize = at as usize;
    // A header is fsynced before any record (`WalWriter::create`): a
    // damaged one with bytes other than zeros after it held records, whose
    // salt (version 3) may be what the damage took, so that no record
    // after it could be checked. In a store whose WALs are all of version
    // 3 a file without the magic is such a header too (`wal::format_of`);
    // in an older store it is of version 1, whose damage is read by the
    // search below as before (a first record whose first page a power
    // loss lost is a torn tail there). Zeros alone after it are cut as
    // before: nothing there to check.
    let header_len = wal::header::HEADER_LEN;
    let header_lost = wal::format_of(&log.bytes, salted) == WalFormat::DamagedHeader;
    let after = log.bytes.get(header_len..).unwrap_or_default();
    if header_lost && after.iter().any(|&b| b != 0) {
        return Err(Error::corruption(&log.path, at, WalDamage::DamagedHeader));
    }
    let filter = match wal::successor_of_torn(&log.bytes, at_usize, expected) {
        Some(successor) => SeqFilter::Exactly(successor),
        None => SeqFilter::From(expected),
    };
    if wal::record_at_framed_end(&log.bytes, at_usize, SeqFilter::From(expected)) {
        return Err(Error::corruption(&log.path, at, WalDamage::BeforeIntact));
    }
    let budget = wal::search_budget(&log.bytes);
    // Past the damaged record's framed end any later sequence is the log's:
    // a record whose header survived is followed there by records of the
    // log only if it was not the last appended (say a page of the file
    // lost in the middle took its end and its successor's header).
    let past_frame = synced
        .then(|| wal::framed_end(&log.bytes, at_usize))
        .flatten();
    let searches = [(at_usize + 1, filter)]
        .into_iter()
        .chain(past_frame.map(|end| (end, SeqFilter::From(expected))));
    for (from, filter) in searches {
        match wal::record_follows(&log.bytes, from, filter, budget) {
            Some(false) => {}
            Some(true) => return Err(Error::corruption(&log.path, at, WalDamage::BeforeIntact)),
            None => return Err(Error::corruption(&log.path, at, WalDamage::Undecidable)),
        }
    }
    for newer in &logs[i + 1..] {
        let budget = wal::search_budget(&newer.bytes);
        let from = wal::records_start(&newer.bytes);
        match wal::record_follows(&newer.bytes, from, SeqFilter::From(expected), budget) {
            Some(false) => {}
            Some(true) => {
                return Err(Error::corruption(
                    &log.path,
                    at,
                    WalDamage::BeforeNewerWal {
                        newer: newer.path.clone(),
                    },
                ));
            }
            None => return Err(Error::corruption(&newer.path, 0, WalDamage::Undecidable)),
        }
    }
    Ok(())
}

/// Decodes a record as a batch whose sequence numbers could have been
/// written: at least one op, starting at `next` (when a record came
/// before) or where the log starts (the first record), all within
/// 1..=MAX_SEQUENCE.
fn checked_batch(
    payload: &[u8],
    next: Option<u64>,
    start: LogStart,
) -> Result<(u64, WriteBatch), WalDamage> {
    let (first, batch) = WriteBatch::decode(payload)?;
    let count = batch.len() as u64;
    if first == 0 {
        return Err(WalDamage::ZeroSequence);
    }
    if count == 0 {
        // A close marker (`wal/seal.rs`): an empty batch at the sequence
        // the log goes on at, holding no write. Anywhere else an empty
        // batch is damage (a write never logs one).
        let continues = match next {
            Some(expected) => first == expected,
            None => (start.lowest..=start.highest).contains(&first),
        };
        return if continues {
            Ok((first, batch))
        } else {
            Err(WalDamage::EmptyBatch)
        };
    }
    let fits = first
        .checked_add(count - 1)
        .is_some_and(|last| last <= MAX_SEQUENCE);
    if !fits {
        return Err(WalDamage::PastLargest { first, count });
    }
    match next {
        Some(expected) if first != expected => Err(WalDamage::Gap {
            expected,
            found: first,
        }),
        None if !(start.lowest..=start.highest).contains(&first) => {
            Err(WalDamage::StartOutOfRange {
                first,
                lowest: start.lowest,
                highest: start.highest,
            })
        }
        _ => Ok((first, batch)),
    }
}

#[cfg(test)]
mod acknowledged_tests;
#[cfg(test)]
mod closed_tests;
#[cfg(test)]
mod embedded_tests;
#[cfg(test)]
mod header_tests;
#[cfg(test)]
mod marker_tests;
#[cfg(test)]
mod review26_tests;
#[cfg(test)]
mod review27_tests;
#[cfg(test)]
mod review28_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod torn_seal_tests;
#[cfg(test)]
mod unwritten_header_tests;
