//! K-way merge of sorted entry streams into one stream in table order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bloomlsm_sstable::{Entry, compare_keys};

use crate::error::Result;

/// A sorted source of entries.
pub(crate) type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

struct Head {
    entry: Entry,
    source: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // BinaryHeap is a max-heap: reverse so the smallest entry pops first;
    // equal entries (same key and seq) pop in source order.
    fn cmp(&self, other: &Self) -> Ordering {
        compare_keys(
            &other.entry.user_key,
            other.entry.seq,
            &self.entry.user_key,
            self.entry.seq,
        )
        .then(other.source.cmp(&self.source))
    }
}

/// Merges sources that are each sorted in table order. Invariant: after a
/// source fails, no entry is returned that sorts after its last one (the
/// error comes first), yet the entry in hand when the pull of its
/// successor failed, read intact, is returned before the error.
pub(crate) struct MergingIter {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    started: bool,
    failed: bool,
    /// A source's failure met while pulling the successor of the entry
    /// just returned: the next call reports it.
    pending: Option<crate::error::Error>,
}

impl MergingIter {
    pub(crate) fn new(sources: Vec<Source>) -> Self {
        Self {
            sources,
            heap: BinaryHeap::new(),
            started: false,
            failed: false,
            pending: None,
        }
    }

    fn pull(&mut self, source: usize) -> Result<()> {
        if let Some(next) = self.sources[source].next() {
            self.heap.push(Head {
                entry: next?,
                source,
            });
        }
        Ok(())
    }

    fn step(&mut self) -> Result<Option<Entry>> {
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                self.pull(i)?;
            }
        }
        let Some(head) = self.heap.pop() else {
            return Ok(None);
        };
        // Every other head sorts after this entry; the failed source's
        // entries after it are unknown, so the error ends the merge next.
        if let Err(e) = self.pull(head.source) {
            self.pending = Some(e);
        }
        Ok(Some(head.entry))
    }
}

impl Iterator for MergingIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if let Some(e) = self.pending.take() {
            self.failed = true;
            return Some(Err(e));
        }
        match self.step() {
            Ok(e) => e.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod error_order_tests;

/// Collapses a merged stream to what a reader at `snapshot` sees within
/// `bounds`: for each user key, the newest version with seq <= snapshot,
/// tombstones hidden. REQUIRES: the sources start at or after the lower
/// bound's key (an excluded lower bound key itself is skipped here).
pub(crate) struct VisibleIter<I> {
    inner: I,
    snapshot: u64,
    last_key: Option<Vec<u8>>,
    start: std::ops::Bound<Vec<u8>>,
    end: std::ops::Bound<Vec<u8>>,
    done: bool,
}

impl<I: Iterator<Item = Result<Entry>>> VisibleIter<I> {
    pub(crate) fn new(
        inner: I,
        snapshot: u64,
        (start, end): (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>),
    ) -> Self {
        Self {
            inner,
            snapshot,
            last_key: None,
            start,
            end,
            done: false,
        }
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for VisibleIter<I> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        use std::ops::Bound;
        while !self.done {
            let entry = match self.inner.next()? {
                Ok(e) => e,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let past_end = match &self.end {
                Bound::Included(end) => entry.user_key.as_slice() > end.as_slice(),
                Bound::Excluded(end) => entry.user_key.as_slice() >= end.as_slice(),
                Bound::Unbounded => false,
            };
            if past_end {
                self.done = true;
                return None;
            }
            if matches!(&self.start, Bound::Excluded(start) if *start == entry.user_key) {
                continue;
            }
            if entry.seq > self.snapshot
                || self.last_key.as_deref() == Some(entry.user_key.as_slice())
            {
                continue;
            }
            self.last_key = Some(entry.user_key.clone());
            if entry.kind == bloomlsm_sstable::EntryKind::Put {
                return Some(Ok((entry.user_key, entry.value)));
            }
        }
        None
    }
}
