//! What a compaction keeps of each user key's versions, streamed from the
//! merged inputs to the output tables without copying an entry (only the
//! current user key is kept, in one reused buffer).

use bloomlsm_sstable::EntryKind;

use super::pick::BaseLevelCheck;
use crate::cursor::{EntryCursor, EntrySink};
use crate::error::Result;

/// Keeps, for each user key, the versions some reader can still see: the
/// newest, plus each version that is the newest one visible to a live
/// snapshot. Trailing tombstones (nothing older kept below them) are
/// dropped only when no level below the output can hold the key: a
/// tombstone dropped above an older value would bring that value back.
pub(crate) struct Retain<'a> {
    /// Live snapshot sequence numbers, ascending.
    snapshots: Vec<u64>,
    base: BaseLevelCheck<'a>,
    /// The user key whose versions are being read (valid when `in_key`).
    key: Vec<u8>,
    in_key: bool,
    /// Sequence of the previous version of `key` (u64::MAX before the first).
    newer: u64,
    /// A version of `key` was kept.
    kept_any: bool,
    /// Kept tombstones of `key` not yet written: written when a kept value
    /// follows them, dropped or written at the end of the key.
    pending_tombstones: Vec<u64>,
}

impl<'a> Retain<'a> {
    /// REQUIRES: `snapshots` ascending.
    pub(crate) fn new(snapshots: Vec<u64>, base: BaseLevelCheck<'a>) -> Self {
        Self {
            snapshots,
            base,
            key: Vec::new(),
            in_key: false,
            newer: u64::MAX,
            kept_any: false,
            pending_tombstones: Vec::new(),
        }
    }

    /// A snapshot `s` sees the version `seq` when `seq <= s < newer`.
    fn needed_by_snapshot(&self, seq: u64, newer: u64) -> bool {
        let i = self.snapshots.partition_point(|&s| s < seq);
        self.snapshots.get(i).is_some_and(|&s| s < newer)
    }

    /// Reads `input` (in table order) to its end and writes what is kept
    /// to `out`, in table order.
    pub(crate) fn run(
        &mut self,
        input: &mut dyn EntryCursor,
        out: &mut dyn EntrySink,
    ) -> Result<()> {
        while input.advance()? {
            let user_key = input.user_key();
            if !self.in_key || self.key != user_key {
                self.end_key(out)?;
                self.key.clear();
                self.key.extend_from_slice(user_key);
                self.in_key = true;
                self.newer = u64::MAX;
                self.kept_any = false;
            }
            let seq = input.seq();
            let keep = !self.kept_any || self.needed_by_snapshot(seq, self.newer);
            self.newer = seq;
            if !keep {
                continue;
            }
            self.kept_any = true;
            match input.kind() {
                EntryKind::Delete => self.pending_tombstones.push(seq),
                EntryKind::Put => {
                    self.write_pending(out)?;
                    out.add(user_key, seq, EntryKind::Put, input.value())?;
                }
            }
        }
        self.end_key(out)
    }

    /// The end of `key`'s versions: trailing tombstones go when no deeper
    /// level can hold the key, else they are written.
    fn end_key(&mut self, out: &mut dyn EntrySink) -> Result<()> {
        if self.pending_tombstones.is_empty() {
            return Ok(());
        }
        if self.base.is_base_level_for(&self.key) {
            self.pending_tombstones.clear();
            return Ok(());
        }
        self.write_pending(out)
    }

    fn write_pending(&mut self, out: &mut dyn EntrySink) -> Result<()> {
        for &seq in &self.pending_tombstones {
            out.add(&self.key, seq, EntryKind::Delete, &[])?;
        }
        self.pending_tombstones.clear();
        Ok(())
    }
}
