//! The read path: point lookups through the filters, and scans.
//!
//! A reader loads the view FIRST and its sequence AFTER: then every
//! version the sequence can see is in the view or newer than the view, and
//! no compaction can have dropped it (a compaction only drops a version
//! shadowed by a newer one that no snapshot needs, and the view still holds
//! the tables from before any later compaction).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::TableIter;

use crate::answer::Answer;
use crate::counters::Counters;
use crate::error::{Error, Result};
use crate::inner::DbInner;
use crate::iter::DbIter;
use crate::memtable::MemTable;
use crate::merge::{MergingIter, Source, VisibleIter};
use crate::trace::{LookupTrace, TraceResult, TraceSource, TraceStep};
use crate::version::SuperVersion;

/// Receives the steps of a lookup. `()` discards them, so an untraced get
/// builds nothing.
pub(crate) trait StepSink {
    fn start(&mut self, key_hash: KeyHash, seq: u64);
    fn step(&mut self, step: impl FnOnce() -> TraceStep);
}

impl StepSink for () {
    fn start(&mut self, _: KeyHash, _: u64) {}
    fn step(&mut self, _: impl FnOnce() -> TraceStep) {}
}

impl StepSink for LookupTrace {
    fn start(&mut self, key_hash: KeyHash, seq: u64) {
        self.key_hash = key_hash.raw();
        self.snapshot_seq = seq;
    }
    fn step(&mut self, step: impl FnOnce() -> TraceStep) {
        self.steps.push(step());
    }
}

fn trace_result(answer: &Answer) -> TraceResult {
    match answer {
        Answer::Value(_) => TraceResult::Value,
        Answer::Deleted => TraceResult::Deleted,
        Answer::Missing => TraceResult::Missing,
    }
}

impl DbInner {
    /// The view readers use now, to keep (an iterator, a scan).
    fn view(&self) -> Arc<SuperVersion> {
        self.current.load_full()
    }

    /// The sequence to read at: the snapshot's, or the latest visible one.
    /// REQUIRES: the caller took its view before calling this.
    fn read_sequence(&self, snapshot: Option<u64>) -> u64 {
        #[cfg(test)]
        self.read_pause.pause();
        snapshot.unwrap_or_else(|| self.last_visible.load(Ordering::Acquire))
    }

    /// Reads `key` at `snapshot` (default: the latest), recording stats and
    /// giving every step to `sink`.
    pub(crate) fn get(
        &self,
        key: &[u8],
        snapshot: Option<u64>,
        sink: &mut impl StepSink,
    ) -> Result<Option<Vec<u8>>> {
        let counters = self.counters.reads.mine();
        Counters::add(&counters.gets, 1);
        // No key is empty. `max_key_bytes` limits writes only: a store
        // written under a larger limit holds longer keys, which a scan
        // lists, so a get must look for them too.
        if key.is_empty() {
            // Nothing to look up, but a closed store still refuses, and
            // the trace still names the sequence the lookup was at (no
            // view is needed: nothing is read).
            self.check_open()?;
            sink.start(KeyHash::of(key), self.read_sequence(snapshot));
            return Ok(None);
        }
        // Borrowed for this get only: no reference count taken.
        let sv = self.current.load();
        // A close empties the view after setting `closed`: a view taken
        // after that swap is seen here as closed, never read as the store.
        self.check_open()?;
        let seq = self.read_sequence(snapshot);
        let hash = KeyHash::of(key);
        sink.start(hash, seq);
        let memtables = std::iter::once((TraceSource::Memtable, &sv.mem)).chain(
            sv.imm
                .iter()
                .enumerate()
                .map(|(i, m)| (TraceSource::ImmutableMemtable(i), m)),
        );
        for (source, mem) in memtables {
            let answer = mem.get(key, seq);
            sink.step(|| TraceStep {
                source,
                filter: None,
                block: None,
                result: trace_result(&answer),
            });
            if let Some(found) = answer.into_final() {
                // Release: after this get's `gets` add (see
                // `ReadCounters::gets_and_memtable_hits`).
                counters.memtable_hits.fetch_add(1, Ordering::Release);
                return Ok(found);
            }
        }
        let version = &sv.version;
        // L0 tables are all probed, each checking its own range; a deeper
        // level's candidate was found within its range by the level search.
        let l0 = version.levels[0].iter().map(|t| (t, false));
        let deeper = (1..version.levels.len())
            .filter_map(|level| version.candidate(level, key))
            .map(|t| (t, true));
        for (handle, in_range) in l0.chain(deeper) {
            let level = handle.meta.level;
            let lookup = if in_range {
                handle.table.get_in_range(key, hash, seq)?
            } else {
                handle.table.get(key, hash, seq)?
            };
            counters.level(level).record(&lookup);
            let (verdict, block) = (lookup.verdict(), lookup.block);
            let answer = Answer::from_outcome(lookup.outcome);
            sink.step(|| TraceStep {
                source: TraceSource::Table {
                    level,
                    number: handle.meta.number,
                },
                filter: Some(verdict),
                block,
                result: trace_result(&answer),
            });
            if let Some(found) = answer.into_final() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Pairs with keys in `[start, end]` as of `snapshot` (default: now).
    pub(crate) fn scan(
        self: &Arc<Self>,
        (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        snapshot: Option<u64>,
    ) -> Result<DbIter> {
        let sv = self.view();
        // As in `get`: the emptied view of a closed store is never read.
        self.check_open()?;
        let seq = self.read_sequence(snapshot);
        let from: Vec<u8> = match &start {
            Bound::Included(k) | Bound::Excluded(k) => k.clone(),
            Bound::Unbounded => Vec::new(),
        };
        let mem_end = match &end {
            Bound::Included(k) => {
                let mut k = k.clone();
                k.push(0);
                Some(k)
            }
            Bound::Excluded(k) => Some(k.clone()),
            Bound::Unbounded => None,
        };
        let mut sources: Vec<Source> = Vec::new();
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            sources.push(Box::new(MemSource {
                mem: Arc::clone(mem),
                resume: Some((from.clone(), u64::MAX)),
                end: mem_end.clone(),
                chunk: Vec::new().into_iter(),
                chunk_len: MEM_CHUNK_FIRST,
            }));
        }
        for (level, tables) in sv.version.levels.iter().enumerate() {
            let mut meeting = tables.iter().filter(|handle| {
                let t = &handle.meta;
                t.largest_key.as_slice() >= from.as_slice()
                    && mem_end
                        .as_deref()
                        .is_none_or(|e| t.smallest_key.as_slice() < e)
            });
            if level == 0 {
                // L0 tables may overlap: each is a source of its own.
                for handle in meeting {
                    let mut it = TableIter::new(Arc::clone(&handle.table), true)
                        .with_upper_bound(mem_end.clone());
                    it.seek(&from)?;
                    sources.push(Box::new(it.map(|r| r.map_err(Error::from))));
                }
            } else if let Some(first) = meeting.next() {
                let rest: Vec<_> = meeting.map(|h| Arc::clone(&h.table)).collect();
                sources.push(Box::new(LevelSource::new(
                    &first.table,
                    rest,
                    &from,
                    mem_end.clone(),
                )?));
            }
        }
        Ok(DbIter::new(
            VisibleIter::new(MergingIter::new(sources), seq, (start, end)),
            sv,
            Arc::clone(self),
        ))
    }
}

/// The tables of one sorted level that meet a scan, read one after
/// another: a table is opened (sought, its first block read) only once the
/// one before it is exhausted, so a scan holds one block per level, not one
/// per table, however many tables its range covers (RocksDB's
/// `LevelIterator`). Invariant: the tables are in key order and share no
/// user key (a level below L0), so their entries back to back are in
/// table order. After an error it yields nothing more (as after a
/// failed seek of a later table). No table reads a block past `end`
/// (`TableIter::with_upper_bound`).
struct LevelSource {
    current: Option<TableIter>,
    rest: std::vec::IntoIter<Arc<bloomlsm_sstable::Table>>,
    from: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl LevelSource {
    /// `first` is sought now (so a scan reports a bad first block when it
    /// is created, as before); `rest` when reached.
    fn new(
        first: &Arc<bloomlsm_sstable::Table>,
        rest: Vec<Arc<bloomlsm_sstable::Table>>,
        from: &[u8],
        end: Option<Vec<u8>>,
    ) -> Result<Self> {
        let mut it = TableIter::new(Arc::clone(first), true).with_upper_bound(end.clone());
        it.seek(from)?;
        Ok(Self {
            current: Some(it),
            rest: rest.into_iter(),
            from: from.to_vec(),
            end,
        })
    }
}

impl Iterator for LevelSource {
    type Item = Result<bloomlsm_sstable::Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(it) = &mut self.current {
                match it.next() {
                    Some(Ok(entry)) => return Some(Ok(entry)),
                    Some(Err(e)) => {
                        // The level ends at its first error: moving on to
                        // the next table would skip the rest of this one.
                        self.current = None;
                        self.rest = Vec::new().into_iter();
                        return Some(Err(e.into()));
                    }
                    None => self.current = None,
                }
            }
            let table = self.rest.next()?;
            let mut it = TableIter::new(table, true).with_upper_bound(self.end.clone());
            // Every key of a later table is above `from`; the seek only
            // positions it at its start through the index.
            if let Err(e) = it.seek(&self.from) {
                self.rest = Vec::new().into_iter();
                return Some(Err(e.into()));
            }
            self.current = Some(it);
        }
    }
}

/// Versions a memtable source copies at its first read; each next chunk
/// is twice as large, up to [`MEM_CHUNK_MAX`].
const MEM_CHUNK_FIRST: usize = 16;
const MEM_CHUNK_MAX: usize = 1024;

/// A memtable's versions in a scan's range, copied out a chunk at a time
/// as the scan reaches them: a short scan copies a few versions, not the
/// memtable's whole tail, and a long-lived iterator holds one chunk. The
/// view keeps the memtable alive. Versions inserted into the active
/// memtable meanwhile have sequences above the scan's, which the scan
/// skips, and each chunk resumes strictly after the last version read (in
/// table order), so none is read twice or missed.
struct MemSource {
    mem: Arc<MemTable>,
    /// Where the next chunk starts (`None`: the range is exhausted).
    resume: Option<(Vec<u8>, u64)>,
    end: Option<Vec<u8>>,
    chunk: std::vec::IntoIter<bloomlsm_sstable::Entry>,
    chunk_len: usize,
}

impl Iterator for MemSource {
    type Item = Result<bloomlsm_sstable::Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.chunk.next() {
                return Some(Ok(e));
            }
            let (key, seq) = self.resume.take()?;
            let chunk = self
                .mem
                .chunk_from(&key, seq, self.end.as_deref(), self.chunk_len);
            if chunk.len() == self.chunk_len
                && let Some(last) = chunk.last()
            {
                // Next in table order: the same key's older versions, or
                // (after its version 0, never written) the next key.
                self.resume = Some(match last.seq.checked_sub(1) {
                    Some(older) => (last.user_key.clone(), older),
                    None => ([last.user_key.as_slice(), &[0]].concat(), u64::MAX),
                });
            }
            self.chunk_len = (self.chunk_len * 2).min(MEM_CHUNK_MAX);
            self.chunk = chunk.into_iter();
            if self.chunk.len() == 0 {
                return None;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
#[path = "level_source_tests.rs"]
mod level_source_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
#[path = "mem_source_tests.rs"]
mod mem_source_tests;
