//! A sorted level's input tables read as one cursor.

use std::sync::Arc;

use bloomlsm_sstable::{EntryKind, TableIter};

use crate::cursor::EntryCursor;
use crate::error::Result;
use crate::version::TableHandle;

/// The tables of one sorted level (below L0) read as one cursor: they do
/// not overlap and are in key order, so their concatenation is sorted.
/// Opens one table at a time (LevelDB's concatenating iterator).
pub(crate) struct LevelCursor {
    tables: Vec<Arc<TableHandle>>,
    /// Index of the next table to open.
    next: usize,
    current: Option<TableIter>,
}

impl LevelCursor {
    /// REQUIRES: `tables` sorted by key, pairwise disjoint.
    pub(crate) fn new(tables: Vec<Arc<TableHandle>>) -> Self {
        Self {
            tables,
            next: 0,
            current: None,
        }
    }

    /// The table under the cursor; `None` before the first `advance` and
    /// at the end (then the accessors answer empty, as `TableIter`'s do).
    fn on(&self) -> Option<&TableIter> {
        self.current.as_ref()
    }
}

impl EntryCursor for LevelCursor {
    fn advance(&mut self) -> Result<bool> {
        loop {
            if let Some(it) = &mut self.current {
                if it.advance()? {
                    return Ok(true);
                }
                self.current = None;
            }
            let Some(t) = self.tables.get(self.next) else {
                return Ok(false);
            };
            self.current = Some(TableIter::new(Arc::clone(&t.table), false));
            self.next += 1;
        }
    }
    fn user_key(&self) -> &[u8] {
        self.on().map_or(&[], TableIter::user_key)
    }
    fn seq(&self) -> u64 {
        self.on().map_or(0, TableIter::seq)
    }
    fn kind(&self) -> EntryKind {
        self.on().map_or(EntryKind::Delete, TableIter::kind)
    }
    fn value(&self) -> &[u8] {
        self.on().map_or(&[], TableIter::value)
    }
}
