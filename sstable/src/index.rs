//! A table's index as it lives in memory: every data block's separator key,
//! back to back in one buffer, where each key ends and where each block
//! ends, and (only for tables that need them) the separators' sequence
//! numbers.
//!
//! A block's separator (FORMAT.md, "Index block") is a user key `S` with
//! `last(i) <= S < first(i + 1)` in table order, usually much shorter than
//! the block's last key. Its sequence number is 0 ("after every version of
//! `S`"), except where a user key's versions continue into the next block:
//! there the separator is the block's last internal key, sequence included,
//! so a snapshot's search still tells the two blocks apart. Tables written
//! before separators were shortened carry each block's last internal key;
//! they read the same way.
//!
//! Memory per block: the separator's bytes plus 8 (two `u32` ends; `u64`
//! ends only for an index or a data region of 4 GiB or more), plus 8 when
//! any separator has a nonzero sequence number. Data blocks tile the file
//! from offset 0 (the decoder refuses an index whose handles do not), so a
//! block's offset is where the previous one ends. `memory_bytes` counts what
//! the buffers hold.

use std::io;

use crate::entry::compare_keys;
use crate::format::{BlockHandle, TRAILER_LEN};
use crate::room::try_room;

/// Non-decreasing offsets, stored as narrowly as their largest value allows.
#[derive(Debug)]
enum Ends {
    Narrow(Box<[u32]>),
    Wide(Box<[u64]>),
}

impl Ends {
    /// `values`, narrowed to `u32` when they all fit (a new buffer,
    /// reserved fallibly: [`try_room`]).
    fn new(values: Vec<u64>, what: &str) -> io::Result<Self> {
        if values.iter().all(|&v| u32::try_from(v).is_ok()) {
            let mut narrow = Vec::new();
            try_room(&mut narrow, values.len(), what)?;
            narrow.extend(values.iter().map(|&v| v as u32));
            Ok(Self::Narrow(narrow.into_boxed_slice()))
        } else {
            Ok(Self::Wide(values.into_boxed_slice()))
        }
    }

    /// REQUIRES: `i < len()`.
    #[inline]
    fn get(&self, i: usize) -> u64 {
        match self {
            Self::Narrow(v) => u64::from(v[i]),
            Self::Wide(v) => v[i],
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Narrow(v) => v.len(),
            Self::Wide(v) => v.len(),
        }
    }

    fn last(&self) -> Option<u64> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Self::Narrow(v) => std::mem::size_of_val::<[u32]>(v),
            Self::Wide(v) => std::mem::size_of_val::<[u64]>(v),
        }
    }
}

/// The blocks of a table in key order. Invariants (checked by the decoder
/// that fills it): the separators `(key(i), seq(i))` are strictly ascending
/// in table order, so every search below is a binary search; `key_ends`
/// is non-decreasing and its last value is `keys.len()`; each `block_ends`
/// value is at least `TRAILER_LEN` past the previous one (0 before the
/// first); `seqs` is `None` exactly when every separator's sequence is 0,
/// else it has one value per block.
#[derive(Debug)]
pub(crate) struct TableIndex {
    keys: Box<[u8]>,
    key_ends: Ends,
    block_ends: Ends,
    seqs: Option<Box<[u64]>>,
}

/// Collects a table's index entries in order, then freezes them.
#[derive(Debug, Default)]
pub(crate) struct TableIndexBuilder {
    keys: Vec<u8>,
    key_ends: Vec<u64>,
    block_ends: Vec<u64>,
    seqs: Vec<u64>,
}

impl TableIndexBuilder {
    /// The last entry pushed: its separator key and sequence number.
    pub(crate) fn last(&self) -> Option<(&[u8], u64)> {
        let end = *self.key_ends.last()? as usize;
        let start = self
            .key_ends
            .len()
            .checked_sub(2)
            .map_or(0, |i| self.key_ends[i] as usize);
        Some((&self.keys[start..end], *self.seqs.last()?))
    }

    /// Bytes of the separators' user keys pushed so far.
    pub(crate) fn key_bytes(&self) -> usize {
        self.keys.len()
    }

    /// Where the next block must start: after the last one's trailer.
    pub(crate) fn next_offset(&self) -> u64 {
        self.block_ends.last().copied().unwrap_or(0)
    }

    /// Appends the next block with its separator `(key, seq)`, or fails
    /// with an `OutOfMemory` I/O error (nothing appended) when the
    /// allocator refuses the room ([`try_room`]). REQUIRES: `(key, seq)`
    /// sorts after the previous entry's;
    /// `handle.offset == self.next_offset()`.
    pub(crate) fn push(&mut self, key: &[u8], seq: u64, handle: BlockHandle) -> io::Result<()> {
        debug_assert_eq!(handle.offset, self.next_offset());
        // Only when a buffer is full (the three per-block ones grow in
        // step): the common push costs two comparisons, as before.
        if self.keys.capacity() - self.keys.len() < key.len() {
            try_room(&mut self.keys, key.len(), "the index's separators")?;
        }
        if self.key_ends.len() == self.key_ends.capacity() {
            try_room(&mut self.key_ends, 1, "the index's separator ends")?;
            try_room(&mut self.block_ends, 1, "the index's block ends")?;
            try_room(&mut self.seqs, 1, "the index's sequence numbers")?;
        }
        self.keys.extend_from_slice(key);
        self.key_ends.push(self.keys.len() as u64);
        self.block_ends
            .push(handle.offset + handle.size + TRAILER_LEN as u64);
        self.seqs.push(seq);
        Ok(())
    }

    /// The index, in buffers of exactly its size; an `OutOfMemory` I/O
    /// error when the allocator refuses a narrowed buffer ([`try_room`]).
    /// (Shrinking a buffer to its length asks for less than it holds.)
    pub(crate) fn finish(self) -> io::Result<TableIndex> {
        let seqs = self
            .seqs
            .iter()
            .any(|&s| s != 0)
            .then(|| self.seqs.into_boxed_slice());
        Ok(TableIndex {
            keys: self.keys.into_boxed_slice(),
            key_ends: Ends::new(self.key_ends, "the index's separator ends")?,
            block_ends: Ends::new(self.block_ends, "the index's block ends")?,
            seqs,
        })
    }
}

impl TableIndex {
    /// Number of data blocks.
    pub(crate) fn len(&self) -> usize {
        self.block_ends.len()
    }

    /// The separator user key of block `i`. REQUIRES: `i < len()`.
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.key_ends.get(i - 1) as usize
        };
        &self.keys[start..self.key_ends.get(i) as usize]
    }

    /// The separator's sequence number of block `i`. REQUIRES: `i < len()`.
    #[inline]
    fn seq(&self, i: usize) -> u64 {
        self.seqs.as_ref().map_or(0, |s| s[i])
    }

    /// Whether block `i` ends with a version of `user_key` that its
    /// separator names exactly (a nonzero sequence): the key's newer
    /// versions are in block `i` or before. A separator with sequence 0 may
    /// be a key no entry has. REQUIRES: `i < len()`.
    pub(crate) fn ends_with_version_of(&self, i: usize, user_key: &[u8]) -> bool {
        self.seq(i) != 0 && self.key(i) == user_key
    }

    /// Whether every user key of the blocks after block `i` is `>= end`.
    /// Every entry after block `i` sorts strictly after its separator
    /// `(S, s)` (FORMAT.md, "Index block"), so its user key is `>= S`, and
    /// `> S` when `s` is 0 (sequence 0 sorts after every version of `S`),
    /// that is `>= S ++ [0]`, the least key above `S`. So: `end <= S`, or
    /// `s` is 0 and `end` is `S ++ [0]` (how a scan's inclusive end `S`
    /// arrives, the common case: the writer keeps a block's last user key
    /// as its separator whenever the next block's first differs from it in
    /// its last byte only). REQUIRES: `i < len()`.
    pub(crate) fn keys_after_reach(&self, i: usize, end: &[u8]) -> bool {
        let separator = self.key(i);
        separator >= end
            || (self.seq(i) == 0
                && end.len() == separator.len() + 1
                && end.starts_with(separator)
                && end.last() == Some(&0))
    }

    /// Where block `i` is. REQUIRES: `i < len()`.
    pub(crate) fn handle(&self, i: usize) -> BlockHandle {
        let offset = if i == 0 {
            0
        } else {
            self.block_ends.get(i - 1)
        };
        BlockHandle {
            offset,
            size: self.block_ends.get(i) - offset - TRAILER_LEN as u64,
        }
    }

    /// Every block's handle, in key order.
    pub(crate) fn handles(&self) -> impl Iterator<Item = BlockHandle> + '_ {
        (0..self.len()).map(|i| self.handle(i))
    }

    /// The file offset after the last data block's trailer (0 without
    /// blocks).
    pub(crate) fn data_end(&self) -> u64 {
        self.block_ends.last().unwrap_or(0)
    }

    /// The first block whose separator is not before `(user_key, seq)`:
    /// the only block that can hold the newest version of `user_key`
    /// visible at `seq`. `len()` when every block is before it.
    pub(crate) fn first_block_not_before(&self, user_key: &[u8], seq: u64) -> usize {
        self.partition_point(|i| compare_keys(self.key(i), self.seq(i), user_key, seq).is_lt())
    }

    /// The first block whose separator's user key is `>= user_key` (where a
    /// scan from `user_key` starts; that block may hold no such key, and
    /// then the scan goes on with the next). `len()` when there is none.
    pub(crate) fn first_block_reaching(&self, user_key: &[u8]) -> usize {
        self.partition_point(|i| self.key(i) < user_key)
    }

    /// Bytes of memory the index holds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.keys.len()
            + self.key_ends.memory_bytes()
            + self.block_ends.memory_bytes()
            + self
                .seqs
                .as_ref()
                .map_or(0, |s| std::mem::size_of_val::<[u64]>(s))
    }

    /// The first `i` in `0..len()` for which `before(i)` is false, where
    /// `before` is true on a prefix of the blocks.
    fn partition_point(&self, before: impl Fn(usize) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// The shortest user key `S` with `last <= S < next` (the separator of a
/// block whose last user key is `last`, followed by a block starting with
/// user key `next`). REQUIRES: `last < next`. When `next`'s prefix one byte
/// past the first difference is shorter than `next`, that prefix is the
/// shortest such key (any `S` must share the bytes before the difference
/// and have one more); otherwise, and when `last` is a prefix of `next`,
/// `last` itself.
pub(crate) fn shortest_separator<'a>(last: &'a [u8], next: &'a [u8]) -> &'a [u8] {
    debug_assert!(last < next);
    let common = last.iter().zip(next).take_while(|(a, b)| a == b).count();
    if common < last.len() && common + 1 < next.len() {
        &next[..=common]
    } else {
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(i: u64) -> BlockHandle {
        BlockHandle {
            offset: i * (10 + TRAILER_LEN as u64),
            size: 10,
        }
    }

    fn index_of(entries: &[(&[u8], u64)]) -> TableIndex {
        let mut b = TableIndexBuilder::default();
        for (i, &(k, s)) in entries.iter().enumerate() {
            b.push(k, s, handle(i as u64)).unwrap();
            assert_eq!(b.last(), Some((k, s)));
        }
        b.finish().unwrap()
    }

    /// Blocks ending at "b"@9, "b"@4 (two versions of "b" span a block
    /// boundary), "d"@7 and "e"@1: a table written before separators.
    fn sample() -> TableIndex {
        index_of(&[(b"b", 9), (b"b", 4), (b"d", 7), (b"e", 1)])
    }

    #[test]
    fn keys_and_handles_come_back_in_order() {
        let index = sample();
        assert_eq!(index.len(), 4);
        let keys: Vec<&[u8]> = (0..4).map(|i| index.key(i)).collect();
        assert_eq!(keys, [&b"b"[..], b"b", b"d", b"e"]);
        let handles: Vec<BlockHandle> = index.handles().collect();
        assert_eq!(handles, (0..4).map(handle).collect::<Vec<_>>());
        assert_eq!(index.data_end(), handle(4).offset);
        // 4 key bytes, two u32 ends and one u64 sequence per block.
        assert_eq!(index.memory_bytes(), 4 + 4 * (4 + 4 + 8));
    }

    /// Blocks after a separator `(S, 0)` hold only keys `> S`, so they are
    /// past an end `S ++ [0]` (an inclusive end `S`); after `(S, s)` with
    /// `s` nonzero they may hold older versions of `S`, in range.
    #[test]
    fn keys_after_a_separator_reach_an_end_just_above_it_only_at_sequence_0() {
        let index = index_of(&[(b"b", 9), (b"b", 4), (b"c", 0), (b"e", 0)]);
        // Zero-terminated ends: the inclusive end "b" or "c".
        assert!(
            !index.keys_after_reach(0, b"b\0"),
            "older versions of b follow"
        );
        assert!(
            !index.keys_after_reach(1, b"b\0"),
            "b@4 may not be its last"
        );
        assert!(index.keys_after_reach(2, b"c\0"));
        assert!(index.keys_after_reach(2, b"c"));
        assert!(index.keys_after_reach(2, b"b\0"));
        assert!(!index.keys_after_reach(2, b"c\0\0"), "c\\0 may follow");
        assert!(!index.keys_after_reach(2, b"c\x01"), "c\\0 may follow");
        assert!(!index.keys_after_reach(2, b"d"));
        assert!(index.keys_after_reach(3, b""));
    }

    #[test]
    fn point_search_picks_the_block_of_the_visible_version() {
        let index = sample();
        // Newest version of "b" at snapshot 20 is @9, in block 0.
        assert_eq!(index.first_block_not_before(b"b", 20), 0);
        // At snapshot 8 the visible version is @4 or older: block 1.
        assert_eq!(index.first_block_not_before(b"b", 8), 1);
        // At snapshot 3 nothing of "b" is visible: the search lands past
        // both of its blocks.
        assert_eq!(index.first_block_not_before(b"b", 3), 2);
        assert_eq!(index.first_block_not_before(b"a", 0), 0);
        assert_eq!(index.first_block_not_before(b"c", 99), 2);
        assert_eq!(index.first_block_not_before(b"e", 0), 4);
        assert_eq!(index.first_block_not_before(b"f", 99), 4);
        assert!(index.ends_with_version_of(0, b"b"));
        assert!(!index.ends_with_version_of(2, b"b"));
    }

    /// Separators as the writer makes them: "apr"@0 (a block ending at
    /// "apple", the next starting with "apricot"), the exact "b"@4 (versions
    /// of "b" continue into the next block), "b"@0 (its last version ends
    /// that block) and the last block's "d"@0.
    #[test]
    fn separators_with_sequence_zero_cover_every_version_of_their_key() {
        let index = index_of(&[(b"apr", 0), (b"b", 4), (b"b", 0), (b"d", 0)]);
        assert_eq!(index.first_block_not_before(b"apple", 1), 0);
        assert_eq!(index.first_block_not_before(b"apr", 1), 0);
        assert_eq!(index.first_block_not_before(b"apricot", 99), 1);
        assert_eq!(index.first_block_not_before(b"b", 99), 1);
        assert_eq!(index.first_block_not_before(b"b", 3), 2);
        assert_eq!(index.first_block_not_before(b"b", 1), 2);
        assert_eq!(index.first_block_not_before(b"d", 1), 3);
        assert_eq!(index.first_block_not_before(b"da", 1), 4);
        assert!(!index.ends_with_version_of(0, b"apr"));
        assert!(index.ends_with_version_of(1, b"b"));
        assert!(!index.ends_with_version_of(2, b"b"));
    }

    #[test]
    fn an_index_without_sequences_keeps_none() {
        let index = index_of(&[(b"apr", 0), (b"c", 0)]);
        assert!(index.seqs.is_none());
        assert_eq!(index.memory_bytes(), 4 + 2 * (4 + 4));
    }

    #[test]
    fn scan_search_starts_at_the_first_block_reaching_the_key() {
        let index = sample();
        assert_eq!(index.first_block_reaching(b""), 0);
        assert_eq!(index.first_block_reaching(b"b"), 0);
        assert_eq!(index.first_block_reaching(b"ba"), 2);
        assert_eq!(index.first_block_reaching(b"e"), 3);
        assert_eq!(index.first_block_reaching(b"z"), 4);
    }

    #[test]
    fn an_empty_index_answers_past_the_end() {
        let index = TableIndexBuilder::default().finish().unwrap();
        assert_eq!(index.len(), 0);
        assert_eq!(index.first_block_not_before(b"a", 1), 0);
        assert_eq!(index.first_block_reaching(b"a"), 0);
        assert_eq!(index.memory_bytes(), 0);
        assert_eq!(index.data_end(), 0);
    }

    #[test]
    fn offsets_past_four_gib_are_kept_wide() {
        let mut b = TableIndexBuilder::default();
        let big = BlockHandle {
            offset: 0,
            size: 5 << 30,
        };
        b.push(b"a", 0, big).unwrap();
        let next = BlockHandle {
            offset: b.next_offset(),
            size: 7,
        };
        b.push(b"b", 0, next).unwrap();
        let index = b.finish().unwrap();
        assert!(matches!(index.block_ends, Ends::Wide(_)));
        assert!(matches!(index.key_ends, Ends::Narrow(_)));
        assert_eq!(index.handle(0), big);
        assert_eq!(index.handle(1), next);
        assert_eq!(index.data_end(), next.offset + 7 + TRAILER_LEN as u64);
    }

    #[test]
    fn the_separator_is_the_shortest_key_between() {
        for (last, next, sep) in [
            (&b"apple"[..], &b"apricot"[..], &b"apr"[..]),
            (b"0000012345678901", b"0000012345689999", b"000001234568"),
            // `next` one byte past the difference: `last` itself.
            (b"ab1", b"ac", b"ab1"),
            // `last` a prefix of `next`.
            (b"ab", b"abc", b"ab"),
            (b"a", b"b\x00", b"b"),
            (b"\xff", b"\xff\x00\x01", b"\xff"),
        ] {
            assert_eq!(shortest_separator(last, next), sep);
        }
    }

    mod props {
        use super::super::shortest_separator;
        use proptest::prelude::*;

        proptest! {
            /// `last <= S < next`, and no shorter key lies between them.
            #[test]
            fn separator_lies_between_and_is_shortest(
                a in proptest::collection::vec(any::<u8>(), 0..12),
                b in proptest::collection::vec(any::<u8>(), 0..12),
            ) {
                prop_assume!(a != b);
                let (last, next) = if a < b { (a, b) } else { (b, a) };
                let sep = shortest_separator(&last, &next);
                prop_assert!(last.as_slice() <= sep && sep < next.as_slice());
                if sep.len() < last.len() {
                    // Every key shorter than `sep` is outside [last, next).
                    for len in 0..sep.len() {
                        prop_assert!(&next[..len] < last.as_slice());
                    }
                }
            }
        }
    }
}
