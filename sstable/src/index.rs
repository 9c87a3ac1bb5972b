//! A table's index as it lives in memory: the last user key of every data
//! block, back to back in one buffer, and one fixed-size slot per block
//! (where its key ends, the key's sequence number, where the block ends).
//!
//! One allocation for all keys instead of one per block: a block's entry
//! costs its key plus 24 bytes, where a `Vec<u8>` and a handle per block
//! cost 40 bytes plus the allocator's rounding and per-allocation overhead
//! (about 80 bytes a block at 20-byte keys). Data blocks tile the file
//! from offset 0 (the decoder refuses an index whose handles do not), so a
//! block's offset is where the previous one ends and its handle needs no
//! slot of its own. `memory_bytes` counts what the buffers hold.

use crate::entry::compare_keys;
use crate::format::{BlockHandle, TRAILER_LEN};

/// One data block's entry. Invariants: `key_end` is non-decreasing across
/// slots and the last one equals `keys.len()`; `block_end` (the file offset
/// after the block's trailer) is at least `TRAILER_LEN` past the previous
/// slot's (0 before the first).
#[derive(Clone, Copy, Debug)]
struct Slot {
    key_end: usize,
    last_seq: u64,
    block_end: u64,
}

/// The blocks of a table in key order. Invariant (checked by the decoder
/// that fills it): the internal keys `(last_user_key(i), last_seq(i))` are
/// strictly ascending, so every search below is a binary search.
#[derive(Debug, Default)]
pub(crate) struct TableIndex {
    keys: Box<[u8]>,
    slots: Box<[Slot]>,
}

/// Collects a table's index entries in order, then freezes them.
#[derive(Debug, Default)]
pub(crate) struct TableIndexBuilder {
    keys: Vec<u8>,
    slots: Vec<Slot>,
}

impl TableIndexBuilder {
    /// The last entry pushed: its user key and sequence number.
    pub(crate) fn last(&self) -> Option<(&[u8], u64)> {
        let slot = self.slots.last()?;
        let start = self
            .slots
            .len()
            .checked_sub(2)
            .map_or(0, |i| self.slots[i].key_end);
        Some((&self.keys[start..slot.key_end], slot.last_seq))
    }

    /// Where the next block must start: after the last one's trailer.
    pub(crate) fn next_offset(&self) -> u64 {
        self.slots.last().map_or(0, |s| s.block_end)
    }

    /// Appends the next block. REQUIRES: `(last_user_key, last_seq)` sorts
    /// after the previous entry's; `handle.offset == self.next_offset()`.
    pub(crate) fn push(&mut self, last_user_key: &[u8], last_seq: u64, handle: BlockHandle) {
        debug_assert_eq!(handle.offset, self.next_offset());
        self.keys.extend_from_slice(last_user_key);
        self.slots.push(Slot {
            key_end: self.keys.len(),
            last_seq,
            block_end: handle.offset + handle.size + TRAILER_LEN as u64,
        });
    }

    /// The index, in buffers of exactly its size.
    pub(crate) fn finish(self) -> TableIndex {
        TableIndex {
            keys: self.keys.into_boxed_slice(),
            slots: self.slots.into_boxed_slice(),
        }
    }
}

impl TableIndex {
    /// Number of data blocks.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The last user key of block `i`. REQUIRES: `i < len()`.
    pub(crate) fn last_user_key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.slots[i - 1].key_end };
        &self.keys[start..self.slots[i].key_end]
    }

    /// Where block `i` is. REQUIRES: `i < len()`.
    pub(crate) fn handle(&self, i: usize) -> BlockHandle {
        let offset = if i == 0 {
            0
        } else {
            self.slots[i - 1].block_end
        };
        BlockHandle {
            offset,
            size: self.slots[i].block_end - offset - TRAILER_LEN as u64,
        }
    }

    /// Every block's handle, in key order.
    pub(crate) fn handles(&self) -> impl Iterator<Item = BlockHandle> + '_ {
        (0..self.len()).map(|i| self.handle(i))
    }

    /// The file offset after the last data block's trailer (0 without
    /// blocks).
    pub(crate) fn data_end(&self) -> u64 {
        self.slots.last().map_or(0, |s| s.block_end)
    }

    /// The first block whose last internal key is not before
    /// `(user_key, seq)`: the only block that can hold the newest version of
    /// `user_key` visible at `seq`. `len()` when every block is before it.
    pub(crate) fn first_block_not_before(&self, user_key: &[u8], seq: u64) -> usize {
        self.partition_point(|i| {
            compare_keys(self.last_user_key(i), self.slots[i].last_seq, user_key, seq).is_lt()
        })
    }

    /// The first block whose last user key is `>= user_key` (where a scan
    /// from `user_key` starts). `len()` when there is none.
    pub(crate) fn first_block_reaching(&self, user_key: &[u8]) -> usize {
        self.partition_point(|i| self.last_user_key(i) < user_key)
    }

    /// Bytes of memory the index holds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.keys.len() + std::mem::size_of_val::<[Slot]>(&self.slots)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(i: u64) -> BlockHandle {
        BlockHandle {
            offset: i * (10 + TRAILER_LEN as u64),
            size: 10,
        }
    }

    /// Blocks ending at "b"@9, "b"@4 (two versions of "b" span a block
    /// boundary), "d"@7 and "e"@1.
    fn sample() -> TableIndex {
        let mut b = TableIndexBuilder::default();
        for (i, (k, s)) in [(&b"b"[..], 9), (b"b", 4), (b"d", 7), (b"e", 1)]
            .into_iter()
            .enumerate()
        {
            b.push(k, s, handle(i as u64));
            assert_eq!(b.last(), Some((k, s)));
        }
        b.finish()
    }

    #[test]
    fn keys_and_handles_come_back_in_order() {
        let index = sample();
        assert_eq!(index.len(), 4);
        let keys: Vec<&[u8]> = (0..4).map(|i| index.last_user_key(i)).collect();
        assert_eq!(keys, [&b"b"[..], b"b", b"d", b"e"]);
        let handles: Vec<BlockHandle> = index.handles().collect();
        assert_eq!(handles, (0..4).map(handle).collect::<Vec<_>>());
        assert_eq!(index.data_end(), handle(4).offset);
        assert_eq!(index.memory_bytes(), 4 + 4 * std::mem::size_of::<Slot>());
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
        let index = TableIndexBuilder::default().finish();
        assert_eq!(index.len(), 0);
        assert_eq!(index.first_block_not_before(b"a", 1), 0);
        assert_eq!(index.first_block_reaching(b"a"), 0);
        assert_eq!(index.memory_bytes(), 0);
        assert_eq!(index.data_end(), 0);
    }
}
