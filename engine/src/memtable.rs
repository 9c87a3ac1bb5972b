//! The memtable: a concurrent skiplist (crossbeam-skiplist) of versions,
//! ordered by user key ascending, then sequence number descending. Keys and
//! values live in the memtable's arena (`arena.rs`), so an insert copies
//! them once and allocates only the skiplist's node, and a flush lends them
//! to the table writer without copying.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use bloomlsm_sstable::{Entry, EntryKind};

use crate::answer::Answer;
use crate::arena::{Arena, ArenaBytes};
use crate::cursor::EntrySink;
use crate::error::Result;
use crossbeam_skiplist::SkipMap;

/// A (user key, sequence) pair in table order. Invariant: made only by
/// `MemTable::insert` from bytes of that memtable's arena, and held only in
/// that memtable's map, which is dropped before the arena (field order), so
/// `user_key` is always readable.
#[derive(Debug)]
struct InternalKey {
    user_key: ArenaBytes,
    seq: u64,
}

impl InternalKey {
    fn user_key(&self) -> &[u8] {
        // SAFETY: by the type's invariant the arena outlives every key, and
        // the returned slice cannot outlive `self`, which lives in the map.
        unsafe { self.user_key.as_slice() }
    }
}

impl PartialEq for InternalKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for InternalKey {}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        bloomlsm_sstable::compare_keys(self.user_key(), self.seq, other.user_key(), other.seq)
    }
}

/// A borrowed view of an internal key, so a lookup can probe the skiplist
/// without allocating an owned key. Invariant: `InternalKey` and every
/// `dyn KeyView` order identically (both by `compare_keys`).
trait KeyView {
    fn user_key(&self) -> &[u8];
    fn seq(&self) -> u64;
}

impl KeyView for InternalKey {
    fn user_key(&self) -> &[u8] {
        InternalKey::user_key(self)
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// The key a lookup probes with: borrowed user key, snapshot sequence.
struct Probe<'a> {
    user_key: &'a [u8],
    seq: u64,
}

impl KeyView for Probe<'_> {
    fn user_key(&self) -> &[u8] {
        self.user_key
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl<'a> std::borrow::Borrow<dyn KeyView + 'a> for InternalKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl Ord for dyn KeyView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        bloomlsm_sstable::compare_keys(self.user_key(), self.seq(), other.user_key(), other.seq())
    }
}

impl PartialOrd for dyn KeyView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn KeyView + '_ {}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One memtable and the WAL that backs it.
#[derive(Debug)]
pub(crate) struct MemTable {
    /// Declared before `arena`, so it is dropped first: its keys and values
    /// point into the arena.
    map: SkipMap<InternalKey, (EntryKind, ArenaBytes)>,
    arena: Arena,
    bytes: AtomicUsize,
    /// Number of the WAL file whose records this memtable holds.
    pub(crate) wal_number: u64,
}

impl MemTable {
    pub(crate) fn new(wal_number: u64) -> Self {
        Self {
            map: SkipMap::new(),
            arena: Arena::new(),
            bytes: AtomicUsize::new(0),
            wal_number,
        }
    }

    /// Adds one version. Copies `user_key` and `value` into the arena.
    pub(crate) fn insert(&self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) {
        self.bytes
            .fetch_add(user_key.len() + value.len() + 48, AtomicOrdering::Relaxed);
        let key = InternalKey {
            user_key: self.arena.copy(user_key),
            seq,
        };
        self.map.insert(key, (kind, self.arena.copy(value)));
    }

    /// A value's bytes, borrowed for as long as the memtable.
    fn value_bytes(&self, value: ArenaBytes) -> &[u8] {
        // SAFETY: every `ArenaBytes` in the map came from `self.arena`,
        // which lives as long as `self`.
        unsafe { value.as_slice() }
    }

    /// Approximate bytes held.
    pub(crate) fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Versions held (an upper bound on the distinct keys a flush writes).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The newest version of `user_key` with seq <= `snapshot`.
    pub(crate) fn get(&self, user_key: &[u8], snapshot: u64) -> Answer {
        let probe = Probe {
            user_key,
            seq: snapshot,
        };
        let probe: &dyn KeyView = &probe;
        match self.map.lower_bound(Bound::Included(probe)) {
            Some(e) if e.key().user_key() == user_key => match e.value().0 {
                EntryKind::Put => Answer::Value(self.value_bytes(e.value().1).to_vec()),
                EntryKind::Delete => Answer::Deleted,
            },
            _ => Answer::Missing,
        }
    }

    /// Gives every version to `out`, in table order, without copying.
    pub(crate) fn write_to(&self, out: &mut dyn EntrySink) -> Result<()> {
        for e in self.map.iter() {
            let (kind, value) = *e.value();
            out.add(
                e.key().user_key(),
                e.key().seq,
                kind,
                self.value_bytes(value),
            )?;
        }
        Ok(())
    }

    /// Versions with user key in `[start, end)` (`end` `None`: unbounded), in
    /// table order, copied out.
    pub(crate) fn range_entries(&self, start: &[u8], end: Option<&[u8]>) -> Vec<Entry> {
        let lower = Probe {
            user_key: start,
            seq: u64::MAX,
        };
        let lower: &dyn KeyView = &lower;
        self.map
            .range::<dyn KeyView, _>((Bound::Included(lower), Bound::Unbounded))
            .take_while(|e| end.is_none_or(|end| e.key().user_key() < end))
            .map(|e| Entry {
                user_key: e.key().user_key().to_vec(),
                seq: e.key().seq,
                kind: e.value().0,
                value: self.value_bytes(e.value().1).to_vec(),
            })
            .collect()
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

    #[test]
    fn borrowed_probe_orders_like_owned_keys() {
        let arena = Arena::new();
        let keys = [
            (&b"a"[..], 1u64),
            (b"a", 9),
            (b"ab", 0),
            (b"b", 5),
            (b"", 3),
        ];
        for (ua, sa) in keys {
            for (ub, sb) in keys {
                let owned = InternalKey {
                    user_key: arena.copy(ua),
                    seq: sa,
                }
                .cmp(&InternalKey {
                    user_key: arena.copy(ub),
                    seq: sb,
                });
                let a = Probe {
                    user_key: ua,
                    seq: sa,
                };
                let b = Probe {
                    user_key: ub,
                    seq: sb,
                };
                let (a, b): (&dyn KeyView, &dyn KeyView) = (&a, &b);
                assert_eq!(a.cmp(b), owned);
            }
        }
    }
}
