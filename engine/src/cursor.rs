//! Cursors: forward streams of entries in table order that lend each entry
//! instead of copying it (as LevelDB's iterators do). Compaction and flush
//! read through them, so moving an entry from its input block to the output
//! table allocates nothing.

use bloomlsm_sstable::{EntryKind, TableIter};

use crate::error::Result;

/// A forward cursor over entries in table order (user key ascending, then
/// sequence descending). It starts before the first entry; `advance` moves
/// it onto the next one. `user_key` and `value` borrow the entry under the
/// cursor and stay valid until the next `advance`.
pub(crate) trait EntryCursor {
    /// Moves to the next entry; false at the end. After an error the
    /// cursor is spent and must not be advanced again: its position is
    /// unspecified (a `TableIter` that failed to parse an entry has moved
    /// past it, so a retry would skip it). Every caller stops at the first
    /// error and abandons what it was writing.
    fn advance(&mut self) -> Result<bool>;
    /// REQUIRES: the last `advance` returned true.
    fn user_key(&self) -> &[u8];
    /// REQUIRES: the last `advance` returned true.
    fn seq(&self) -> u64;
    /// REQUIRES: the last `advance` returned true.
    fn kind(&self) -> EntryKind;
    /// Empty for a tombstone. REQUIRES: the last `advance` returned true.
    fn value(&self) -> &[u8];
}

/// Where a cursor's entries go (a table writer; a vector in tests).
pub(crate) trait EntrySink {
    /// Takes one entry. REQUIRES: entries arrive in table order.
    fn add(&mut self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) -> Result<()>;
}

impl EntryCursor for TableIter {
    fn advance(&mut self) -> Result<bool> {
        Ok(TableIter::advance(self)?)
    }
    fn user_key(&self) -> &[u8] {
        TableIter::user_key(self)
    }
    fn seq(&self) -> u64 {
        TableIter::seq(self)
    }
    fn kind(&self) -> EntryKind {
        TableIter::kind(self)
    }
    fn value(&self) -> &[u8] {
        TableIter::value(self)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use bloomlsm_sstable::{Entry, EntryKind};

    use super::{EntryCursor, EntrySink};
    use crate::error::Result;

    /// A cursor over entries held in memory. REQUIRES: in table order.
    pub(crate) struct VecCursor {
        entries: Vec<Entry>,
        /// One past the entry under the cursor (0: before the first).
        at: usize,
    }

    impl VecCursor {
        pub(crate) fn new(entries: Vec<Entry>) -> Self {
            Self { entries, at: 0 }
        }

        /// Puts of `(key, seq)` whose value is the sequence's low byte.
        pub(crate) fn puts(keys: Vec<(Vec<u8>, u64)>) -> Self {
            Self::new(
                keys.into_iter()
                    .map(|(user_key, seq)| Entry {
                        user_key,
                        seq,
                        kind: EntryKind::Put,
                        value: vec![seq as u8],
                    })
                    .collect(),
            )
        }

        fn here(&self) -> &Entry {
            &self.entries[self.at - 1]
        }
    }

    impl EntryCursor for VecCursor {
        fn advance(&mut self) -> Result<bool> {
            if self.at < self.entries.len() {
                self.at += 1;
                return Ok(true);
            }
            self.at = self.entries.len() + 1;
            Ok(false)
        }
        fn user_key(&self) -> &[u8] {
            &self.here().user_key
        }
        fn seq(&self) -> u64 {
            self.here().seq
        }
        fn kind(&self) -> EntryKind {
            self.here().kind
        }
        fn value(&self) -> &[u8] {
            &self.here().value
        }
    }

    impl EntrySink for Vec<Entry> {
        fn add(&mut self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) -> Result<()> {
            self.push(Entry {
                user_key: user_key.to_vec(),
                seq,
                kind,
                value: value.to_vec(),
            });
            Ok(())
        }
    }
}
