//! What a compaction keeps of each user key's versions.

use std::collections::VecDeque;
use std::iter::Peekable;

use bloomlsm_sstable::{Entry, EntryKind};

use super::pick::BaseLevelCheck;
use crate::error::Result;

/// Keeps, for each user key, the versions some reader can still see: the
/// newest, plus each version that is the newest one visible to a live
/// snapshot. Trailing tombstones (nothing older kept below them) are
/// dropped only when no level below the output can hold the key: a
/// tombstone dropped above an older value would bring that value back.
pub(crate) struct RetainIter<'a, I: Iterator<Item = Result<Entry>>> {
    inner: Peekable<I>,
    /// Live snapshot sequence numbers, ascending.
    snapshots: Vec<u64>,
    base: BaseLevelCheck<'a>,
    ready: VecDeque<Entry>,
    failed: bool,
}

impl<'a, I: Iterator<Item = Result<Entry>>> RetainIter<'a, I> {
    /// REQUIRES: `inner` is in table order; `snapshots` ascending.
    pub(crate) fn new(inner: I, snapshots: Vec<u64>, base: BaseLevelCheck<'a>) -> Self {
        Self {
            inner: inner.peekable(),
            snapshots,
            base,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// A snapshot `s` sees the version `seq` when `seq <= s < newer`.
    fn needed_by_snapshot(&self, seq: u64, newer: u64) -> bool {
        let i = self.snapshots.partition_point(|&s| s < seq);
        self.snapshots.get(i).is_some_and(|&s| s < newer)
    }

    /// Moves the kept versions of the next user key to `ready`.
    fn next_key(&mut self) -> Result<bool> {
        let Some(first) = self.inner.next() else {
            return Ok(false);
        };
        let mut versions = vec![first?];
        while let Some(Ok(next)) = self.inner.peek() {
            if next.user_key != versions[0].user_key {
                break;
            }
            if let Some(Ok(e)) = self.inner.next() {
                versions.push(e);
            }
        }
        if let Some(Err(_)) = self.inner.peek()
            && let Some(Err(e)) = self.inner.next()
        {
            return Err(e);
        }
        let mut kept: Vec<Entry> = Vec::with_capacity(1);
        let mut newer = u64::MAX;
        for v in versions {
            let seq = v.seq;
            if kept.is_empty() || self.needed_by_snapshot(seq, newer) {
                kept.push(v);
            }
            newer = seq;
        }
        if kept.last().is_some_and(|e| e.kind == EntryKind::Delete)
            && self.base.is_base_level_for(&kept[0].user_key)
        {
            while kept.last().is_some_and(|e| e.kind == EntryKind::Delete) {
                kept.pop();
            }
        }
        self.ready.extend(kept);
        Ok(true)
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for RetainIter<'_, I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(Ok(e));
            }
            if self.failed {
                return None;
            }
            match self.next_key() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
