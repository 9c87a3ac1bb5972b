//! The memtable: a skiplist of versions (`skiplist.rs`), ordered by user
//! key ascending, then sequence number descending. Each version is one node
//! in the skiplist's arena (links, key and value together), so an insert
//! copies the key and value once and allocates nothing of its own, and a
//! flush lends them to the table writer without copying. Its size is the
//! arena's memory (nodes, padding, abandoned chunk ends), what it really
//! holds.

use bloomlsm_sstable::{Entry, EntryKind};

use crate::answer::Answer;
use crate::cursor::EntrySink;
use crate::error::Result;
use crate::skiplist::{EntryRef, SkipList};

/// One memtable and the WAL that backs it.
#[derive(Debug)]
pub(crate) struct MemTable {
    list: SkipList,
    /// Number of the WAL file whose records this memtable holds.
    pub(crate) wal_number: u64,
}

impl MemTable {
    pub(crate) fn new(wal_number: u64) -> Self {
        Self {
            list: SkipList::new(),
            wal_number,
        }
    }

    /// Adds one version. Copies `user_key` and `value` into the arena.
    /// REQUIRES: `seq <= MAX_SEQUENCE` (the write path checks it).
    pub(crate) fn insert(&self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) {
        self.list.insert(user_key, seq, kind, value);
    }

    /// Bytes held: the arena's memory, every node's links, header, key,
    /// value and padding, and the unused ends of filled chunks.
    pub(crate) fn approximate_bytes(&self) -> usize {
        self.list.memory_bytes()
    }

    /// Versions held (an upper bound on the distinct keys a flush writes).
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.len() == 0
    }

    /// The newest version of `user_key` with seq <= `snapshot`.
    pub(crate) fn get(&self, user_key: &[u8], snapshot: u64) -> Answer {
        match self.list.iter_from(user_key, snapshot).next() {
            Some(e) if e.user_key == user_key => match e.kind {
                EntryKind::Put => Answer::Value(e.value.to_vec()),
                EntryKind::Delete => Answer::Deleted,
            },
            _ => Answer::Missing,
        }
    }

    /// Gives every version to `out`, in table order, without copying.
    pub(crate) fn write_to(&self, out: &mut dyn EntrySink) -> Result<()> {
        for e in self.list.iter() {
            out.add(e.user_key, e.seq, e.kind, e.value)?;
        }
        Ok(())
    }

    /// Gives every version of all of `mems` to `out`, in table order (user
    /// key ascending, then sequence descending), without copying: what one
    /// flush of several frozen memtables writes into one table. Their
    /// sequence numbers are distinct, so the order is total and no version
    /// is dropped (each one that two L0 tables would have held is kept).
    pub(crate) fn write_merged_to(mems: &[&MemTable], out: &mut dyn EntrySink) -> Result<()> {
        if let [only] = mems {
            return only.write_to(out);
        }
        for_each_merged(mems, |e| out.add(e.user_key, e.seq, e.kind, e.value))
    }

    /// The distinct user keys of all of `mems` together: what the table
    /// `write_merged_to` writes builds its filter from. Their entries
    /// count a key once per version, and memtables that overwrite the same
    /// keys (a hot set, frozen while the flush fell behind) would plan the
    /// table's filter for a run several times its size: fewer bits per
    /// key than its true run gets (Monkey prices a larger run lower).
    pub(crate) fn merged_distinct_keys(mems: &[&MemTable]) -> u64 {
        let mut keys = 0u64;
        let mut last: Option<&[u8]> = None;
        let counted: Result<()> = for_each_merged(mems, |e| {
            if last != Some(e.user_key) {
                keys += 1;
                last = Some(e.user_key);
            }
            Ok(())
        });
        debug_assert!(counted.is_ok(), "counting never fails");
        keys
    }

    /// Versions with user key in `[start, end)` (`end` `None`: unbounded), in
    /// table order, copied out.
    #[cfg(test)]
    pub(crate) fn range_entries(&self, start: &[u8], end: Option<&[u8]>) -> Vec<Entry> {
        self.chunk_from(start, u64::MAX, end, usize::MAX)
    }

    /// Up to `max` versions from the first at or after (`user_key`, `seq`)
    /// in table order, with user key below `end` (`None`: unbounded),
    /// copied out: a scan reads a memtable a chunk at a time.
    pub(crate) fn chunk_from(
        &self,
        user_key: &[u8],
        seq: u64,
        end: Option<&[u8]>,
        max: usize,
    ) -> Vec<Entry> {
        self.list
            .iter_from(user_key, seq)
            .take_while(|e| end.is_none_or(|end| e.user_key < end))
            .take(max)
            .map(|e| Entry {
                user_key: e.user_key.to_vec(),
                seq: e.seq,
                kind: e.kind,
                value: e.value.to_vec(),
            })
            .collect()
    }
}

/// Calls `f` with every version of all of `mems`, in table order, each
/// borrowed from its memtable's arena.
fn for_each_merged<'a>(
    mems: &[&'a MemTable],
    mut f: impl FnMut(EntryRef<'a>) -> Result<()>,
) -> Result<()> {
    let mut lists: Vec<_> = mems.iter().map(|m| m.list.iter()).collect();
    let mut heads: Vec<_> = lists.iter_mut().map(Iterator::next).collect();
    loop {
        // The next version in table order among the lists' heads (a
        // handful of frozen memtables: a linear scan is enough).
        let next = (0..heads.len())
            .filter_map(|i| {
                let e = heads[i].as_ref()?;
                Some(((e.user_key, std::cmp::Reverse(e.seq)), i))
            })
            .min()
            .map(|(_, i)| i);
        let Some(i) = next else {
            return Ok(());
        };
        if let Some(e) = heads[i].take() {
            f(e)?;
        }
        heads[i] = lists[i].next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_visible_version() {
        let m = MemTable::new(1);
        m.insert(b"a", 1, EntryKind::Put, b"1");
        m.insert(b"a", 3, EntryKind::Delete, b"");
        m.insert(b"a", 5, EntryKind::Put, b"5");
        assert_eq!(m.get(b"a", 10), Answer::Value(b"5".to_vec()));
        assert_eq!(m.get(b"a", 4), Answer::Deleted);
        assert_eq!(m.get(b"a", 2), Answer::Value(b"1".to_vec()));
        assert_eq!(m.get(b"a", 0), Answer::Missing);
        assert_eq!(m.get(b"b", 10), Answer::Missing);
        assert_eq!(m.range_entries(b"a", None).len(), 3);
    }

    #[test]
    fn write_to_lends_every_version_in_table_order() {
        let m = MemTable::new(1);
        // Values past the arena's own-chunk size and empty ones, keys
        // inserted out of order.
        let big = vec![9u8; 40 << 10];
        m.insert(b"b", 2, EntryKind::Put, &big);
        m.insert(b"a", 7, EntryKind::Delete, b"");
        m.insert(b"b", 4, EntryKind::Put, b"");
        m.insert(b"a", 1, EntryKind::Put, b"x");
        let mut out: Vec<Entry> = Vec::new();
        m.write_to(&mut out).unwrap();
        let got: Vec<_> = out
            .iter()
            .map(|e| (e.user_key.as_slice(), e.seq, e.kind, e.value.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                (&b"a"[..], 7, EntryKind::Delete, 0),
                (b"a", 1, EntryKind::Put, 1),
                (b"b", 4, EntryKind::Put, 0),
                (b"b", 2, EntryKind::Put, big.len()),
            ]
        );
        assert_eq!(out[3].value, big);
        assert_eq!(m.range_entries(b"b", None).len(), 2);
        assert_eq!(m.range_entries(b"a", Some(b"b")).len(), 2);
    }
}
