//! Streams a table's entries in order, one data block at a time.

use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::entry::{Entry, EntryKind, compare_keys, split_internal_key};
use crate::error::{Error, Result};
use crate::format::BlockKind;
use crate::table::Table;

/// An owning cursor over a table (for scans and compaction). Holds at most
/// one data block in memory.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    next_block: usize,
    current: Option<(BlockIter<Arc<Block>>, u64)>,
    fill_cache: bool,
    failed: bool,
}

impl TableIter {
    /// A cursor before the first entry. `fill_cache` chooses whether blocks
    /// read from the file are added to the block cache (compaction says no).
    pub fn new(table: Arc<Table>, fill_cache: bool) -> Self {
        Self {
            table,
            next_block: 0,
            current: None,
            fill_cache,
            failed: false,
        }
    }

    /// Positions the cursor so that the next entry returned is the first
    /// with user key `>= user_key`.
    pub fn seek(&mut self, user_key: &[u8]) -> Result<()> {
        let i = self
            .table
            .index
            .partition_point(|e| e.last_user_key.as_slice() < user_key);
        self.current = None;
        self.next_block = i;
        if i >= self.table.index.len() {
            return Ok(());
        }
        let mut it = self.load(i)?;
        let offset = self.table.index[i].handle.offset;
        it.seek(user_key, u64::MAX >> 8)
            .map_err(|r| self.corrupt(offset, r))?;
        self.next_block = i + 1;
        self.current = Some((it, offset));
        Ok(())
    }

    fn load(&self, i: usize) -> Result<BlockIter<Arc<Block>>> {
        let handle = self.table.index[i].handle;
        let (block, _) = self.table.data_block(handle, self.fill_cache)?;
        Ok(BlockIter::new(block))
    }

    fn corrupt(&self, offset: u64, reason: String) -> Error {
        Error::Corruption {
            path: self.table.path().to_path_buf(),
            kind: BlockKind::Data,
            offset,
            reason,
        }
    }

    fn entry_here(&self, it: &BlockIter<Arc<Block>>, offset: u64) -> Result<Entry> {
        let (user, seq, tag) = split_internal_key(it.key())
            .ok_or_else(|| self.corrupt(offset, "key shorter than its tag".into()))?;
        let kind = EntryKind::from_tag(tag)
            .ok_or_else(|| self.corrupt(offset, format!("unknown entry kind {tag}")))?;
        Ok(Entry {
            user_key: user.to_vec(),
            seq,
            kind,
            value: it.value().to_vec(),
        })
    }

    fn step(&mut self) -> Result<Option<Entry>> {
        loop {
            if let Some((it, offset)) = &mut self.current {
                let offset = *offset;
                if it.valid() {
                    // Positioned by seek, not yet returned.
                    let entry = self.entry_here_current()?;
                    return Ok(Some(entry));
                }
                if it.advance().map_err(|r| self.corrupt(offset, r))? {
                    continue;
                }
                self.current = None;
            }
            if self.next_block >= self.table.index.len() {
                return Ok(None);
            }
            let i = self.next_block;
            let it = self.load(i)?;
            self.current = Some((it, self.table.index[i].handle.offset));
            self.next_block += 1;
        }
    }

    /// Returns the entry under the cursor and marks it consumed.
    fn entry_here_current(&mut self) -> Result<Entry> {
        let Some((it, offset)) = &self.current else {
            return Err(self.corrupt(0, "cursor lost its block".into()));
        };
        let entry = self.entry_here(it, *offset)?;
        let offset = *offset;
        if let Some((it, _)) = &mut self.current
            && !it.advance().map_err(|r| Error::Corruption {
                path: self.table.path().to_path_buf(),
                kind: BlockKind::Data,
                offset,
                reason: r,
            })?
        {
            self.current = None;
        }
        Ok(entry)
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
