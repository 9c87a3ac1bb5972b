//! Sealing at a clean close: once every live WAL has been fsynced, a WAL
//! whose header says "not synced" (`SyncMode::Never`) gets the header
//! that says "synced", so that recovery reads damage in it strictly.
//!
//! Why: after the close's fsyncs every record of the WAL is durable, so a
//! power loss can no longer leave damage followed by intact records in it;
//! such damage (a bit flipped on the device, say) is corruption, and a
//! relaxed reading would silently drop every write after it, for good at
//! the next read-write open. A store closed cleanly and then only opened
//! read-only keeps its WALs, and they keep this promise.
//!
//! The last record needs more than the flag: under it (it is
//! `SyncMode::Always`'s) damage with no record of the log after it is a
//! crash mid-append, a torn tail, and dropped. So a clean close first
//! appends a close marker to the newest WAL, in either sync mode: an
//! empty batch at the sequence the log goes on at, a checksummed record
//! that holds no write (a write never logs an empty batch). Damage in any
//! write of the log then has a record of the log after it, and a strict
//! reading refuses it. A damaged marker is the log's tail and drops
//! nothing (and is no cut when its length field survived,
//! `wal::is_damaged_marker`). A build from before the marker would not
//! take it for a torn tail: to it an intact record that is no batch of the
//! log is corruption. So stores this build writes are store format
//! version 3 or later (`manifest.rs`), which such a build refuses by
//! version.
//! After the marker's fsync the seal also rewrites the header of the WAL
//! holding it, in either sync mode, with the `CLOSED` flag
//! (`header.rs`): damage that takes the marker too (a zeroed last page)
//! leaves no record of the log after it, what a crash mid-append leaves,
//! and only the flag says the WAL ended in a marker (store format
//! version 4, which a build knowing version 3 refuses by version).
//! An intact marker at a WAL's end also makes replay read that WAL and
//! every older one strictly whatever their headers say
//! (`wal::ends_with_close_marker`): the header's rewrite may be missing
//! (no `overwrite`, or a power loss before it), the fsyncs are not.
//! Bytes inside a write's value that look like a marker vouch for nothing
//! (`ends_with_close_marker` takes a marker only at a record boundary and
//! at a sequence the log goes on at).
//!
//! Invariants:
//! - A WAL is sealed only when this close fsynced it and every fsync of
//!   the close succeeded, and only while the store is healthy: writes not
//!   stopped by an error (an append that failed may have left a torn
//!   record that was never fsynced whole), not read-only (no WAL), not a
//!   forked copy (which holds no lock on the store). The write lock is
//!   held throughout, and the store is already marked closed, so no
//!   record is appended after the seal.
//! - Only WALs still live are sealed: a frozen WAL whose memtable was
//!   flushed may already be deleted (or an orphan the next open removes).
//! - The marker is appended and fsynced before any header is rewritten,
//!   and only when a live WAL holds a write, so it always follows one; the
//!   `CLOSED` flag is set only on the WAL holding it, after its fsync.
//! - Every live WAL was started by [`WalWriter::create`], so it has a
//!   version 3 header, whose salt the rewrite keeps (every record's
//!   checksum covers it); a version 1 or 2 WAL of an older build is only
//!   ever replayed, never written, and is left as it is.
//! - The seal rewrites the 24 header bytes in place and fsyncs them. A
//!   power loss before that fsync leaves the old header or the new one
//!   (the header lies within one sector, which devices write whole), and
//!   either is true. A device that tore the sector anyway leaves a header
//!   that fails its checksum: recovery reads a damaged header strictly
//!   (`WalFormat::DamagedHeader`) and refuses the open rather than drop a
//!   write, which is safe because every record was fsynced first; a
//!   `WalRecovery::PointInTime` open replays every record under the salt
//!   the torn header still holds (`wal::salvaged_records`).

use std::io;

use super::{WalWriter, header};
use crate::batch::WriteBatch;
use crate::error::Result;
use crate::fs::FileSystem;
use crate::inner::{DbInner, WriteState};

impl WalWriter {
    /// Rewrites this WAL's header to say every record was fsynced.
    /// REQUIRES: every record appended was fsynced, and none will be
    /// appended after (see the module invariants).
    /// `marked`: its last record is the close marker, fsynced; the header
    /// then says so too (in either sync mode).
    fn seal(&mut self, fs: &dyn FileSystem, marked: bool) -> Result<()> {
        if self.synced && !marked {
            return Ok(());
        }
        // The salt the file was created with: its records' checksums
        // cover it, so the rewrite keeps it.
        let header = if marked {
            header::encode_closed(self.salt)
        } else {
            header::encode(true, self.salt)
        };
        match fs.overwrite(&self.path, 0, &header) {
            Ok(()) => {}
            // A file system that cannot overwrite in place: the header
            // keeps its weaker promise, which is still true.
            Err(e) if e.kind() == io::ErrorKind::Unsupported => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        self.synced = true;
        Ok(())
    }

    /// Appends and fsyncs the close marker: an empty batch at `next_seq`,
    /// the sequence the log goes on at (replay takes it as a record that
    /// holds no write, `replay::checked_batch`).
    fn append_close_marker(&mut self, next_seq: u64) -> Result<()> {
        let mut marker = WriteBatch::new();
        self.append(marker.encode(next_seq), true)
    }
}

impl DbInner {
    /// Marks the log closed and seals every live WAL (`frozen`, then the
    /// active one of `w`), oldest first. REQUIRES: the close holds the
    /// write lock (`w`) and `frozen_wals` (`frozen`), and has just fsynced
    /// every one of those WALs without an error. Does nothing unless the
    /// store is healthy.
    pub(crate) fn seal_live_wals(
        &self,
        w: &mut WriteState,
        frozen: &mut [(u64, WalWriter)],
    ) -> Result<()> {
        if !self.may_seal() {
            return Ok(());
        }
        let oldest_live = self.current.load().oldest_live_wal();
        let next_seq = w.next_seq;
        let mut live: Vec<&mut WalWriter> = frozen
            .iter_mut()
            .filter(|(n, _)| *n >= oldest_live)
            .map(|(_, wal)| wal)
            .chain(w.wal.as_mut())
            .collect();
        // The marker goes in the newest WAL, after every write of the log,
        // before any header says "synced": a power loss before its fsync
        // leaves the header unsynced and the marker torn or whole, either
        // of which replay takes for the log's end.
        let marked = live.iter().any(|wal| wal.holds_records);
        if marked && let Some(newest) = live.last_mut() {
            newest.append_close_marker(next_seq)?;
        }
        let newest = live.len().saturating_sub(1);
        for (i, wal) in live.into_iter().enumerate() {
            wal.seal(self.fs.as_ref(), marked && i == newest)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod stopped_tests;
#[cfg(test)]
mod tests;
