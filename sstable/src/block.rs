//! A decoded, verified block and the search and iteration over it.
//! Every read of block bytes is bounds-checked: corrupt bytes give an error,
//! never a panic.

use std::cmp::Ordering;
use std::ops::Deref;

use crate::entry::{compare_keys, split_internal_key};
use crate::format::read_u32;
use crate::varint;

/// A block's bytes: entries, then the restart array.
#[derive(Debug)]
pub struct Block {
    bytes: Vec<u8>,
    /// Where the restart array begins (= end of the entries).
    restarts_at: usize,
    num_restarts: usize,
}

/// One entry as parsed in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEntry<'a> {
    pub(crate) shared: usize,
    pub(crate) key_delta: &'a [u8],
    pub(crate) value: &'a [u8],
    pub(crate) next: usize,
}

impl Block {
    /// Checks the restart array. REQUIRES: the trailer was verified.
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        let len = bytes.len();
        let count_at = len
            .checked_sub(4)
            .ok_or("block shorter than its restart count")?;
        let num_restarts =
            read_u32(&bytes, count_at).ok_or("restart count out of bounds")? as usize;
        if num_restarts == 0 {
            return Err("block has no restart points".into());
        }
        let restarts_at = num_restarts
            .checked_mul(4)
            .and_then(|n| count_at.checked_sub(n))
            .ok_or("restart array larger than the block")?;
        let block = Self {
            bytes,
            restarts_at,
            num_restarts,
        };
        let mut previous = None;
        for i in 0..num_restarts {
            let r = block.restart(i);
            if r >= restarts_at.max(1) || previous.is_some_and(|p| p >= r) || (i == 0 && r != 0) {
                return Err(format!(
                    "restart point {i} at {r} is out of order or past the entries"
                ));
            }
            previous = Some(r);
        }
        Ok(block)
    }

    fn restart(&self, i: usize) -> usize {
        read_u32(&self.bytes, self.restarts_at + 4 * i).unwrap_or(u32::MAX) as usize
    }

    /// Bytes held (for cache accounting).
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Parses the entry at `offset` (REQUIRES: `offset < restarts_at`).
    pub(crate) fn entry_at(&self, offset: usize) -> Result<RawEntry<'_>, String> {
        let entries = &self.bytes[..self.restarts_at];
        let bad = || format!("entry at block offset {offset} is malformed");
        let mut at = offset;
        let next_varint = |at: &mut usize| -> Result<usize, String> {
            let (v, n) = varint::get_u32(entries.get(*at..).ok_or_else(bad)?).ok_or_else(bad)?;
            *at += n;
            Ok(v as usize)
        };
        let shared = next_varint(&mut at)?;
        let unshared = next_varint(&mut at)?;
        let value_len = next_varint(&mut at)?;
        let key_end = at.checked_add(unshared).ok_or_else(bad)?;
        let value_end = key_end.checked_add(value_len).ok_or_else(bad)?;
        let key_delta = entries.get(at..key_end).ok_or_else(bad)?;
        let value = entries.get(key_end..value_end).ok_or_else(bad)?;
        Ok(RawEntry {
            shared,
            key_delta,
            value,
            next: value_end,
        })
    }

    /// An iterator positioned before the first entry.
    pub fn iter(&self) -> BlockIter<&Block> {
        BlockIter::new(self)
    }

    fn restart_key(&self, i: usize) -> Result<&[u8], String> {
        let offset = self.restart(i);
        let e = self.entry_at(offset)?;
        if e.shared != 0 {
            return Err(format!(
                "restart entry at block offset {offset} shares a prefix"
            ));
        }
        Ok(e.key_delta)
    }

    /// An iterator at the first entry whose internal key is `>= (user_key,
    /// seq)` in table order (`valid()` is false past the end).
    pub fn seek(&self, user_key: &[u8], seq: u64) -> Result<BlockIter<&Block>, String> {
        let mut it = self.iter();
        it.seek(user_key, seq)?;
        Ok(it)
    }
}

/// Initial capacity of an iterator's key buffer: typical keys plus the tag.
const KEY_CAPACITY: usize = 64;

/// Walks a block's entries in order, rebuilding prefix-compressed keys.
/// `B` is `&Block` or `Arc<Block>` (an owning cursor for table iterators).
#[derive(Debug)]
pub struct BlockIter<B: Deref<Target = Block>> {
    block: B,
    /// Offset of the next entry to parse.
    offset: usize,
    key: Vec<u8>,
    value: (usize, usize),
    valid: bool,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// A cursor before the first entry of `block`.
    pub fn new(block: B) -> Self {
        // One allocation up front instead of a realloc per doubling while
        // the first keys are rebuilt (the largest cost of a cached get).
        Self {
            block,
            offset: 0,
            key: Vec::with_capacity(KEY_CAPACITY),
            value: (0, 0),
            valid: false,
        }
    }

    /// Moves to the next entry; `Ok(false)` at the end.
    pub fn advance(&mut self) -> Result<bool, String> {
        if self.offset >= self.block.restarts_at {
            self.valid = false;
            return Ok(false);
        }
        let e = self.block.entry_at(self.offset)?;
        if e.shared > self.key.len() {
            return Err(format!(
                "entry at block offset {} shares more than the previous key",
                self.offset
            ));
        }
        let (shared, next, value_len) = (e.shared, e.next, e.value.len());
        self.key.truncate(shared);
        self.key.extend_from_slice(e.key_delta);
        self.value = (next - value_len, next);
        self.offset = next;
        self.valid = true;
        Ok(true)
    }

    /// Positions at the first entry `>= (user_key, seq)`. Returns whether an
    /// entry of `user_key` newer than `seq` was passed on the way (so the
    /// key is in the block even if no version is visible at `seq`); an entry
    /// before the block's first is not seen.
    pub fn seek(&mut self, user_key: &[u8], seq: u64) -> Result<bool, String> {
        let cmp = |ikey: &[u8]| -> Result<(Ordering, bool), String> {
            let (u, s, _) = split_internal_key(ikey).ok_or("internal key shorter than its tag")?;
            Ok((compare_keys(u, s, user_key, seq), u == user_key))
        };
        let block: &Block = &self.block;
        // The last restart whose key is < the target (or restart 0).
        let (mut lo, mut hi) = (0usize, block.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if cmp(block.restart_key(mid)?)?.0 == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.offset = block.restart(lo);
        self.key.clear();
        self.valid = false;
        let mut newer_seen = false;
        while self.advance()? {
            let (order, same_user) = cmp(&self.key)?;
            if order != Ordering::Less {
                break;
            }
            newer_seen = same_user;
        }
        Ok(newer_seen)
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current internal key. REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value. REQUIRES: `valid()`.
    pub fn value(&self) -> &[u8] {
        self.block
            .bytes
            .get(self.value.0..self.value.1)
            .unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_builder::BlockBuilder;
    use crate::entry::{EntryKind, encode_internal_key};
    use proptest::prelude::*;

    fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
        let mut k = Vec::new();
        encode_internal_key(&mut k, user, seq, EntryKind::Put);
        k
    }

    #[test]
    fn seek_finds_newest_visible_version() {
        let mut b = BlockBuilder::new(2);
        for (u, s) in [
            (&b"a"[..], 9),
            (b"a", 5),
            (b"b", 7),
            (b"c", 3),
            (b"c", 2),
            (b"d", 1),
        ] {
            b.add(&ikey(u, s), &[s as u8]);
        }
        let block = Block::new(b.finish()).unwrap();
        let it = block.seek(b"a", 6).unwrap();
        assert_eq!(it.key(), &ikey(b"a", 5)[..]);
        let it = block.seek(b"c", u64::MAX >> 8).unwrap();
        assert_eq!(it.value(), &[3]);
        let it = block.seek(b"e", 1).unwrap();
        assert!(!it.valid());
        let it = block.seek(b"", 0).unwrap();
        assert_eq!(it.key(), &ikey(b"a", 9)[..]);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), key in proptest::collection::vec(any::<u8>(), 0..8)) {
            if let Ok(block) = Block::new(bytes) {
                let _ = block.seek(&key, 5);
                let mut it = block.iter();
                let mut n = 0;
                while let Ok(true) = it.advance() { n += 1; if n > 1000 { break; } }
            }
        }
    }
}
