//! Streams a table's entries in order, one data block at a time.

use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::block_error::BlockError;
use crate::entry::{Entry, EntryKind, compare_keys, split_internal_key};
use crate::error::Result;
use crate::format::BlockKind;
use crate::table::{Readahead, Table};

/// An owning cursor over a table (for scans and compaction). Holds at most
/// one data block in memory.
///
/// Two ways to read it: as an `Iterator` of owned [`Entry`]s (scans), or as
/// a cursor without copies (compaction): [`TableIter::advance`] moves to the
/// next entry, and [`TableIter::user_key`], [`TableIter::value`],
/// [`TableIter::seq`] and [`TableIter::kind`] borrow it until the next
/// `advance` or `seek`.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    next_block: usize,
    /// The block being read and its file offset (for errors).
    current: Option<(BlockIter<Arc<Block>>, u64)>,
    /// The cursor in `current` sits on an entry not yet returned (after a
    /// seek); otherwise the next entry is found by advancing it.
    on_unreturned: bool,
    fill_cache: bool,
    /// The window read ahead by a pass that does not fill the cache.
    readahead: Option<Readahead>,
    failed: bool,
    /// The entry under the cursor, parsed by the last `advance` that
    /// returned true: (user key length, sequence, kind).
    here: Option<(usize, u64, EntryKind)>,
    /// Exclusive upper bound on user keys (`with_upper_bound`): no block
    /// whose every key is at or past it is read.
    end: Option<Vec<u8>>,
}

impl TableIter {
    /// A cursor before the first entry. `fill_cache` chooses whether blocks
    /// read from the file are added to the block cache (compaction says no);
    /// a cursor that does not fill the cache reads the file ahead, 256 KiB
    /// per read, for a pass over the whole table.
    pub fn new(table: Arc<Table>, fill_cache: bool) -> Self {
        Self {
            table,
            next_block: 0,
            current: None,
            on_unreturned: false,
            fill_cache,
            readahead: (!fill_cache).then(Readahead::default),
            failed: false,
            here: None,
            end: None,
        }
    }

    /// Reads no data block that holds only user keys `>= end` (an exclusive
    /// upper bound): once the cursor leaves the last block that can hold a
    /// key below `end`, it ends instead of reading the next. Entries at or
    /// past `end` within a block already read may still be returned; the
    /// caller filters them. A scan bounded above reads no block past its
    /// range (RocksDB's `iterate_upper_bound`), so damage there cannot fail
    /// it and it costs no read.
    pub fn with_upper_bound(mut self, end: Option<Vec<u8>>) -> Self {
        self.end = end;
        self
    }

    /// Whether block `i` holds only keys at or past the upper bound: every
    /// entry of block `i` sorts after the separator of block `i - 1`, so
    /// its user keys are `>=` that separator's, and `>` it when the
    /// separator's sequence is 0 (`TableIndex::keys_after_reach`).
    fn past_upper_bound(&self, i: usize) -> bool {
        match (&self.end, i.checked_sub(1)) {
            (Some(end), Some(before)) => self.table.index.keys_after_reach(before, end),
            _ => false,
        }
    }

    /// Positions the cursor so that the next entry returned is the first
    /// with user key `>= user_key`.
    pub fn seek(&mut self, user_key: &[u8]) -> Result<()> {
        let i = self.table.index.first_block_reaching(user_key);
        self.current = None;
        self.on_unreturned = false;
        self.here = None;
        self.next_block = i;
        if i >= self.table.index.len() || self.past_upper_bound(i) {
            self.next_block = self.table.index.len();
            return Ok(());
        }
        let mut it = self.load(i)?;
        let offset = self.table.index.handle(i).offset;
        it.seek(user_key, u64::MAX >> 8)
            .map_err(|r| self.table.corruption(BlockKind::Data, offset, r))?;
        self.next_block = i + 1;
        self.on_unreturned = it.valid();
        self.current = Some((it, offset));
        Ok(())
    }

    fn load(&mut self, i: usize) -> Result<BlockIter<Arc<Block>>> {
        let handle = self.table.index.handle(i);
        let (block, _) = match &mut self.readahead {
            Some(ra) => self.table.data_block_ahead(handle, ra)?,
            None => self.table.data_block(handle, self.fill_cache)?,
        };
        Ok(BlockIter::new(block))
    }

    /// Parses the internal key under `it`, a cursor in the data block at
    /// file offset `offset`: (user key length, sequence, kind).
    fn parse_here(
        table: &Table,
        it: &BlockIter<Arc<Block>>,
        offset: u64,
    ) -> Result<(usize, u64, EntryKind)> {
        let corrupt = |reason| table.corruption(BlockKind::Data, offset, reason);
        let (user, seq, tag) = split_internal_key(it.key()).ok_or_else(|| {
            corrupt(BlockError::KeyShorterThanTag {
                offset: it.entry_offset(),
                len: it.key().len(),
            })
        })?;
        let kind = EntryKind::from_tag(tag).ok_or_else(|| {
            corrupt(BlockError::UnknownEntryKind {
                offset: it.entry_offset(),
                tag,
            })
        })?;
        Ok((user.len(), seq, kind))
    }

    /// Moves to the next entry (the first after `new`, the sought one after
    /// `seek`). False at the end. Copies nothing: the entry is read in place
    /// in its data block through the accessors below.
    pub fn advance(&mut self) -> Result<bool> {
        self.here = None;
        loop {
            if let Some((it, offset)) = &mut self.current {
                let offset = *offset;
                let positioned = std::mem::take(&mut self.on_unreturned)
                    || it
                        .advance()
                        .map_err(|r| self.table.corruption(BlockKind::Data, offset, r))?;
                if positioned {
                    self.here = Some(Self::parse_here(&self.table, it, offset)?);
                    return Ok(true);
                }
                self.current = None;
            }
            if self.next_block >= self.table.index.len() {
                return Ok(false);
            }
            if self.past_upper_bound(self.next_block) {
                self.next_block = self.table.index.len();
                return Ok(false);
            }
            let i = self.next_block;
            let it = self.load(i)?;
            self.current = Some((it, self.table.index.handle(i).offset));
            self.next_block += 1;
        }
    }

    /// True while the cursor is on an entry (the last `advance` returned true).
    pub fn valid(&self) -> bool {
        self.here.is_some()
    }

    /// The user key under the cursor (empty when not `valid`).
    pub fn user_key(&self) -> &[u8] {
        match (&self.current, self.here) {
            (Some((it, _)), Some((len, _, _))) => &it.key()[..len],
            _ => &[],
        }
    }

    /// The value under the cursor (empty for a tombstone or when not `valid`).
    pub fn value(&self) -> &[u8] {
        match (&self.current, self.here) {
            (Some((it, _)), Some(_)) => it.value(),
            _ => &[],
        }
    }

    /// The sequence number under the cursor (0 when not `valid`).
    pub fn seq(&self) -> u64 {
        self.here.map_or(0, |(_, seq, _)| seq)
    }

    /// The kind under the cursor (`Delete` when not `valid`).
    pub fn kind(&self) -> EntryKind {
        self.here.map_or(EntryKind::Delete, |(_, _, kind)| kind)
    }

    fn step(&mut self) -> Result<Option<Entry>> {
        if !self.advance()? {
            return Ok(None);
        }
        Ok(Some(Entry {
            user_key: self.user_key().to_vec(),
            seq: self.seq(),
            kind: self.kind(),
            value: self.value().to_vec(),
        }))
    }
}

impl Iterator for TableIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// True when `a` sorts before `b` in table order (for merging cursors).
pub fn entry_precedes(a: &Entry, b: &Entry) -> bool {
    compare_keys(&a.user_key, a.seq, &b.user_key, b.seq).is_lt()
}
