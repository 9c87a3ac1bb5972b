//! Replaying the WALs of a store that was not flushed when it stopped.
//!
//! Writes are numbered without gaps, and each WAL continues where the
//! previous one ended, so what a store recovers must be a prefix of the
//! writes. Replay stops at the first damage ACROSS ALL WALs: in
//! point-in-time mode it ends there; in torn-tail mode damage is tolerated
//! only at the very end of the log (no intact record after it in this or
//! any newer WAL), and anything else is a corruption error naming the file
//! and offset. A record whose checksum holds but whose sequence numbers
//! are impossible (zero, past the largest, or not continuing the previous
//! record) is damage too.

use std::path::Path;

use bloomlsm_sstable::MAX_SEQUENCE;

use crate::batch::WriteBatch;
use crate::damage::WalDamage;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, names};
use crate::memtable::MemTable;
use crate::options::WalRecovery;
use crate::wal;

/// Replays the WALs `numbers` (ascending) into `mem`. Returns the last
/// sequence number replayed, if any.
pub(crate) fn replay_wals(
    fs: &dyn FileSystem,
    dir: &Path,
    numbers: &[u64],
    mode: WalRecovery,
    mem: &MemTable,
) -> Result<Option<u64>> {
    let mut next: Option<u64> = None;
    let mut last = None;
    for (i, &number) in numbers.iter().enumerate() {
        let path = names::wal(dir, number);
        let bytes = fs.read_all(&path)?;
        let replay = wal::replay(&path, &bytes, mode)?;
        for record in replay.records {
            let (first, batch) = match checked_batch(&record.payload, next) {
                Ok(b) => b,
                Err(_) if mode == WalRecovery::PointInTime => return Ok(last),
                Err(reason) => return Err(Error::corruption(path, record.offset, reason)),
            };
            let count = batch.len() as u64;
            for (j, (kind, key, value)) in batch.ops().enumerate() {
                mem.insert(key, first + j as u64, kind, value);
            }
            next = Some(first + count);
            last = Some(first + count - 1);
        }
        let Some(offset) = replay.damage else {
            continue;
        };
        if mode == WalRecovery::TolerateTornTail {
            for &newer in &numbers[i + 1..] {
                let newer_path = names::wal(dir, newer);
                let newer_bytes = fs.read_all(&newer_path)?;
                let found = wal::replay(&newer_path, &newer_bytes, WalRecovery::PointInTime)?;
                if !found.records.is_empty() {
                    return Err(Error::corruption(
                        path,
                        offset,
                        WalDamage::BeforeNewerWal { newer: newer_path },
                    ));
                }
            }
        }
        return Ok(last);
    }
    Ok(last)
}

/// Decodes a record as a batch whose sequence numbers could have been
/// written: at least one op, starting at `next` (when a record came
/// before), all within 1..=MAX_SEQUENCE.
fn checked_batch(payload: &[u8], next: Option<u64>) -> Result<(u64, WriteBatch), WalDamage> {
    let (first, batch) = WriteBatch::decode(payload)?;
    let count = batch.len() as u64;
    if count == 0 {
        return Err(WalDamage::EmptyBatch);
    }
    if first == 0 {
        return Err(WalDamage::ZeroSequence);
    }
    let fits = first
        .checked_add(count - 1)
        .is_some_and(|last| last <= MAX_SEQUENCE);
    if !fits {
        return Err(WalDamage::PastLargest { first, count });
    }
    if let Some(expected) = next
        && first != expected
    {
        return Err(WalDamage::Gap {
            expected,
            found: first,
        });
    }
    Ok((first, batch))
}
