//! The operations of the model interpreter, and the keys and values they
//! name. Every field is a small number, so a case's `Debug` output reads
//! as the Rust that builds it (a failing fuzz input becomes a test).

use std::ops::Bound;

use crate::FilterKind;

/// Key bytes are drawn from these: the smallest and largest bytes and their
/// neighbours beside an ordinary one, so that prefixes (`a` < `a\0` <
/// `a\x01`), keys ending in `0xff` (no shorter separator above them) and
/// keys of different lengths sit next to each other in tables and index
/// blocks.
pub const ALPHABET: [u8; 5] = [0x00, 0x01, b'a', 0xfe, 0xff];

/// Keys of 1, 2 and 3 bytes over [`ALPHABET`].
pub const KEY_COUNT: usize = 5 + 25 + 125;

/// Ids of keys most operations touch: prefixes of each other (`a`,
/// `a\0`, `a\x01`, `aa`, `aa\0`, `a\xff`, `a\xff\xff`), the smallest
/// and the largest keys of each length. Written again and again, they
/// have versions in the memtable, several L0 tables and several levels at
/// once, where the order of versions decides every answer.
pub const HOT_KEYS: [KeyId; 12] = [2, 15, 16, 17, 90, 19, 104, 0, 5, 4, 29, 154];

/// A key, by its index in the key universe (taken modulo [`KEY_COUNT`]).
pub type KeyId = u8;

/// The key a [`KeyId`] names: ids 0..5 are the 1-byte keys, 5..30 the
/// 2-byte keys, 30..155 the 3-byte keys.
pub fn key(id: KeyId) -> Vec<u8> {
    let n = usize::from(id) % KEY_COUNT;
    let (len, mut digits) = match n {
        0..5 => (1, n),
        5..30 => (2, n - 5),
        _ => (3, n - 30),
    };
    let mut k = vec![0; len];
    for byte in k.iter_mut().rev() {
        *byte = ALPHABET[digits % ALPHABET.len()];
        digits /= ALPHABET.len();
    }
    k
}

/// The value of the `write`-th put of a run (counted from 1) at `len`
/// bytes: the write number, little-endian, then a filler derived from it,
/// cut to `len`. Two puts of 4 bytes or more never share a value, so an
/// older version read in place of the newest one is seen.
pub fn value(write: u32, len: u16) -> Vec<u8> {
    let id = write.to_le_bytes();
    let filler = (write as u8).wrapping_mul(31).wrapping_add(7);
    (0..usize::from(len))
        .map(|i| id.get(i).copied().unwrap_or(filler ^ (i as u8)))
        .collect()
}

/// A key range by its two bounds (any pair: a start past the end, or
/// both ends excluded at one key, is an empty range).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRange {
    /// Lower bound.
    pub start: Bound<KeyId>,
    /// Upper bound.
    pub end: Bound<KeyId>,
}

impl KeyRange {
    /// Every key.
    pub const ALL: Self = Self {
        start: Bound::Unbounded,
        end: Bound::Unbounded,
    };

    /// The bounds as key bytes.
    pub fn bounds(&self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (self.start.map(key), self.end.map(key))
    }

    /// Whether `k` lies in the range.
    pub fn contains(&self, k: &[u8]) -> bool {
        let (start, end) = self.bounds();
        let above = match &start {
            Bound::Included(s) => k >= s.as_slice(),
            Bound::Excluded(s) => k > s.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match &end {
            Bound::Included(e) => k <= e.as_slice(),
            Bound::Excluded(e) => k < e.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }
}

/// A filter policy in eighths of a bit per key (0 to 31.875 bits: below
/// one bit no filter is built).
#[derive(Clone, Debug, PartialEq)]
pub enum PolicySpec {
    /// `FilterPolicy::Uniform`.
    Uniform(u8),
    /// `FilterPolicy::PerLevel`, L0 first (never empty once built).
    PerLevel(Vec<u8>),
    /// `FilterPolicy::Optimized` (Monkey).
    Optimized(u8),
}

impl PolicySpec {
    /// The policy it names.
    pub fn policy(&self) -> crate::FilterPolicy {
        let bits = |eighths: u8| f64::from(eighths) / 8.0;
        match self {
            Self::Uniform(b) => crate::FilterPolicy::Uniform {
                bits_per_key: bits(*b),
            },
            Self::PerLevel(v) if v.is_empty() => crate::FilterPolicy::PerLevel(vec![0.0]),
            Self::PerLevel(v) => {
                crate::FilterPolicy::PerLevel(v.iter().map(|&b| bits(b)).collect())
            }
            Self::Optimized(b) => crate::FilterPolicy::Optimized {
                bits_per_key: bits(*b),
            },
        }
    }
}

/// The filters a store is opened with.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterConfig {
    /// Standard, blocked or ribbon (a counting kind is mapped to blocked:
    /// it is refused for tables).
    pub kind: FilterKind,
    /// Bits per key by level.
    pub policy: PolicySpec,
}

/// One step of a case. Snapshot slots are taken modulo
/// [`super::SNAPSHOT_SLOTS`]; an operation on an empty slot reads the
/// first held snapshot, or does nothing when none is held.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Put a key with a value of this many bytes.
    Put(KeyId, u16),
    /// Delete a key.
    Delete(KeyId),
    /// One `WriteBatch` of puts (`Some(len)`) and deletes (`None`), in
    /// order, the same key possibly several times: the last op of a key
    /// wins, and the whole batch is visible at once.
    Batch(Vec<(KeyId, Option<u16>)>),
    /// Get a key, checked against the model.
    Get(KeyId),
    /// Scan a range, checked against the model's range.
    Scan(KeyRange),
    /// Take a snapshot into a slot (releasing the one held there), with a
    /// copy of the model as it is now.
    TakeSnapshot(u8),
    /// Get at a snapshot.
    SnapshotGet(u8, KeyId),
    /// Scan a range at a snapshot.
    SnapshotScan(u8, KeyRange),
    /// Release a snapshot.
    ReleaseSnapshot(u8),
    /// `Db::flush`.
    Flush,
    /// `Db::compact` (a full manual compaction).
    Compact,
    /// `Db::rebuild_filters` with a policy: in place, or as copies once a
    /// table's file holds too many replaced filters.
    RebuildFilters(PolicySpec),
    /// An iterator over a range opened, then `overwrite` written (a put
    /// of a key the model lacks, a delete of one it holds), the filters
    /// rebuilt and a flush or a full compaction run: the iterator reads
    /// the range as it was when opened.
    IterAcrossRebuild {
        /// The iterator's range.
        range: KeyRange,
        /// The rebuild's policy.
        policy: PolicySpec,
        /// A key written after the iterator opened.
        overwrite: KeyId,
        /// `Db::compact` after the rebuild (else `Db::flush`).
        compact: bool,
    },
    /// Close and reopen, with another filter configuration (`Some`) or
    /// the same options. Snapshots are released first.
    Reopen(Option<FilterConfig>),
}

/// The store's shape: one of [`super::shapes::LAYOUTS`], deletion-triggered
/// compaction on or off, and the filters it is first opened with.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Index into the layouts (modulo their number).
    pub layout: u8,
    /// `Options::deletion_compaction_ratio` at a quarter, or off.
    pub deletion_compaction: bool,
    /// Filters at the first open.
    pub filters: FilterConfig,
}

/// A store shape and the operations run on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The options.
    pub shape: Shape,
    /// The operations, in order.
    pub ops: Vec<Op>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ids_name_distinct_keys_of_one_to_three_bytes() {
        let keys: std::collections::BTreeSet<Vec<u8>> = (0..KEY_COUNT as u8).map(key).collect();
        assert_eq!(keys.len(), KEY_COUNT);
        assert!(keys.iter().all(|k| (1..=3).contains(&k.len())));
        assert_eq!(key(KEY_COUNT as u8), key(0));
    }

    #[test]
    fn hot_keys_are_the_keys_they_say() {
        let hot: Vec<Vec<u8>> = HOT_KEYS.iter().map(|&id| key(id)).collect();
        let want: Vec<&[u8]> = vec![
            b"a",
            b"a\0",
            b"a\x01",
            b"aa",
            b"aa\0",
            b"a\xff",
            b"a\xff\xff",
            b"\0",
            b"\0\0",
            b"\xff",
            b"\xff\xff",
            b"\xff\xff\xff",
        ];
        assert_eq!(hot, want);
    }

    #[test]
    fn values_of_four_bytes_or_more_differ_between_writes() {
        assert_ne!(value(1, 4), value(257, 4));
        assert_eq!(value(3, 0), Vec::<u8>::new());
        assert_eq!(value(3, 300).len(), 300);
    }
}
