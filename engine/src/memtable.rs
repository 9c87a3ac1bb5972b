//! The memtable: a concurrent skiplist (crossbeam-skiplist) of versions,
//! ordered by user key ascending, then sequence number descending.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use bloomlsm_sstable::{Entry, EntryKind};

use crate::answer::Answer;
use crossbeam_skiplist::SkipMap;

/// A (user key, sequence) pair in table order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InternalKey {
    pub(crate) user_key: Vec<u8>,
    pub(crate) seq: u64,
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        bloomlsm_sstable::compare_keys(&self.user_key, self.seq, &other.user_key, other.seq)
    }
}

/// A borrowed view of an internal key, so a lookup can probe the skiplist
/// without allocating an owned key. Invariant: `InternalKey` and every
/// `dyn KeyView` order identically (both by `compare_keys`).
pub(crate) trait KeyView {
    fn user_key(&self) -> &[u8];
    fn seq(&self) -> u64;
}

impl KeyView for InternalKey {
    fn user_key(&self) -> &[u8] {
        &self.user_key
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
    map: SkipMap<InternalKey, (EntryKind, Vec<u8>)>,
    bytes: AtomicUsize,
    /// Number of the WAL file whose records this memtable holds.
    pub(crate) wal_number: u64,
}

impl MemTable {
    pub(crate) fn new(wal_number: u64) -> Self {
        Self {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            wal_number,
        }
    }

    pub(crate) fn insert(&self, user_key: Vec<u8>, seq: u64, kind: EntryKind, value: Vec<u8>) {
        self.bytes
            .fetch_add(user_key.len() + value.len() + 48, AtomicOrdering::Relaxed);
        self.map
            .insert(InternalKey { user_key, seq }, (kind, value));
    }

    /// Approximate bytes held.
    pub(crate) fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
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
            Some(e) if e.key().user_key == user_key => match e.value().0 {
                EntryKind::Put => Answer::Value(e.value().1.clone()),
                EntryKind::Delete => Answer::Deleted,
            },
            _ => Answer::Missing,
        }
    }

    /// Every version, in table order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.map.iter().map(|e| Entry {
            user_key: e.key().user_key.clone(),
            seq: e.key().seq,
            kind: e.value().0,
            value: e.value().1.clone(),
        })
    }

    /// Versions with user key in `[start, end)` (`end` `None`: unbounded), in
    /// table order, copied out.
    pub(crate) fn range_entries(&self, start: &[u8], end: Option<&[u8]>) -> Vec<Entry> {
        let lower = InternalKey {
            user_key: start.to_vec(),
            seq: u64::MAX,
        };
        self.map
            .range(lower..)
            .take_while(|e| end.is_none_or(|end| e.key().user_key.as_slice() < end))
            .map(|e| Entry {
                user_key: e.key().user_key.clone(),
                seq: e.key().seq,
                kind: e.value().0,
                value: e.value().1.clone(),
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
        m.insert(b"a".to_vec(), 1, EntryKind::Put, b"1".to_vec());
        m.insert(b"a".to_vec(), 3, EntryKind::Delete, Vec::new());
        m.insert(b"a".to_vec(), 5, EntryKind::Put, b"5".to_vec());
        assert_eq!(m.get(b"a", 10), Answer::Value(b"5".to_vec()));
        assert_eq!(m.get(b"a", 4), Answer::Deleted);
        assert_eq!(m.get(b"a", 2), Answer::Value(b"1".to_vec()));
        assert_eq!(m.get(b"a", 0), Answer::Missing);
        assert_eq!(m.get(b"b", 10), Answer::Missing);
        assert_eq!(m.range_entries(b"a", None).len(), 3);
    }

    #[test]
    fn borrowed_probe_orders_like_owned_keys() {
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
                    user_key: ua.to_vec(),
                    seq: sa,
                }
                .cmp(&InternalKey {
                    user_key: ub.to_vec(),
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
