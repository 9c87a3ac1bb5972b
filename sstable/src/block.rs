//! A decoded, verified block and the search and iteration over it.
//! Every read of block bytes is bounds-checked: corrupt bytes give an error,
//! never a panic.

use std::cmp::Ordering;
use std::ops::Deref;

use crate::block_error::BlockError;
use crate::entry::{compare_keys, split_internal_key};
use crate::format::{RESTART_INTERVAL, read_u32};
use crate::varint;

/// A block's bytes: entries, then the restart array.
/// Invariants (checked by [`Block::new`]): at least one byte of entries,
/// at least one restart, restart 0 at offset 0, restarts strictly
/// increasing and all inside the entries.
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
    pub fn new(bytes: Vec<u8>) -> Result<Self, BlockError> {
        let len = bytes.len();
        let too_short = BlockError::TooShort { len };
        let count_at = len.checked_sub(4).ok_or(too_short.clone())?;
        let restarts = read_u32(&bytes, count_at).ok_or(too_short)?;
        if restarts == 0 {
            return Err(BlockError::NoRestarts);
        }
        let num_restarts = restarts as usize;
        let restarts_at = num_restarts
            .checked_mul(4)
            .and_then(|n| count_at.checked_sub(n))
            .ok_or(BlockError::RestartArrayTooLarge { restarts, len })?;
        if restarts_at == 0 {
            return Err(BlockError::NoEntries);
        }
        let block = Self {
            bytes,
            restarts_at,
            num_restarts,
        };
        let mut previous = None;
        for index in 0..num_restarts {
            let offset = block.restart(index);
            if offset >= restarts_at {
                return Err(BlockError::RestartPastEntries {
                    index,
                    offset,
                    entries_len: restarts_at,
                });
            }
            match previous {
                None if offset != 0 => return Err(BlockError::FirstRestartNotZero { offset }),
                Some(previous) if previous >= offset => {
                    return Err(BlockError::RestartOutOfOrder {
                        index,
                        offset,
                        previous,
                    });
                }
                _ => {}
            }
            previous = Some(offset);
        }
        Ok(block)
    }

    fn restart(&self, i: usize) -> usize {
        read_u32(&self.bytes, self.restarts_at + 4 * i).unwrap_or(u32::MAX) as usize
    }

    /// Offset of restart `i`, or `usize::MAX` past the last.
    fn restart_or_end(&self, i: usize) -> usize {
        if i < self.num_restarts {
            self.restart(i)
        } else {
            usize::MAX
        }
    }

    /// Bytes held (for cache accounting).
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Parses the entry at `offset` (REQUIRES: `offset < restarts_at`).
    pub(crate) fn entry_at(&self, offset: usize) -> Result<RawEntry<'_>, BlockError> {
        let entries = &self.bytes[..self.restarts_at];
        let bad = BlockError::MalformedEntry { offset };
        let mut at = offset;
        let mut next_varint = || -> Option<usize> {
            let (v, n) = varint::get_u32(entries.get(at..)?)?;
            at += n;
            Some(v as usize)
        };
        let (Some(shared), Some(unshared), Some(value_len)) =
            (next_varint(), next_varint(), next_varint())
        else {
            return Err(bad);
        };
        let key_end = at.checked_add(unshared).ok_or(bad.clone())?;
        let value_end = key_end.checked_add(value_len).ok_or(bad.clone())?;
        let key_delta = entries.get(at..key_end).ok_or(bad.clone())?;
        let value = entries.get(key_end..value_end).ok_or(bad)?;
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

    /// The full internal key of restart `i` and the offset of its entry.
    fn restart_key(&self, i: usize) -> Result<(&[u8], usize), BlockError> {
        let offset = self.restart(i);
        let e = self.entry_at(offset)?;
        if e.shared != 0 {
            return Err(BlockError::RestartSharesPrefix {
                offset,
                shared: e.shared,
            });
        }
        Ok((e.key_delta, offset))
    }

    /// An iterator at the first entry whose internal key is `>= (user_key,
    /// seq)` in table order (`valid()` is false past the end).
    pub fn seek(&self, user_key: &[u8], seq: u64) -> Result<BlockIter<&Block>, BlockError> {
        let mut it = self.iter();
        it.seek(user_key, seq)?;
        Ok(it)
    }
}

/// Initial capacity of an iterator's key buffer: typical keys plus the tag.
const KEY_CAPACITY: usize = 64;

/// Walks a block's entries in order, rebuilding prefix-compressed keys.
/// `B` is `&Block` or `Arc<Block>` (an owning cursor for table iterators).
///
/// Every entry at a restart offset must share nothing, and no entry may be
/// more than `RESTART_INTERVAL - 1` entries past the last restart
/// (FORMAT.md, "Data block"): so each key is no longer than the bytes from
/// its restart on, and the keys a block yields hold at most
/// `RESTART_INTERVAL` times its bytes. Without it a crafted block of one
/// restart could repeat a long key in a few bytes per entry, and a scan,
/// a compaction or a get would pay for it once per entry.
#[derive(Debug)]
pub struct BlockIter<B: Deref<Target = Block>> {
    block: B,
    /// Offset of the next entry to parse.
    offset: usize,
    /// Index of the first restart at or after `offset` (restarts before it
    /// are passed).
    next_restart: usize,
    /// Where restart `next_restart` begins (`usize::MAX` past the last): an
    /// entry before it is no restart, the common case, with no read of the
    /// restart array.
    next_restart_at: usize,
    /// Entries parsed since the last restart entry.
    since_restart: usize,
    /// Offset of the current entry (valid when `valid`).
    current: usize,
    key: Vec<u8>,
    value: (usize, usize),
    valid: bool,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// A cursor before the first entry of `block`.
    pub fn new(block: B) -> Self {
        // One allocation up front instead of a realloc per doubling while
        // the first keys are rebuilt (the largest cost of a cached get).
        let next_restart_at = block.restart_or_end(0);
        Self {
            block,
            offset: 0,
            next_restart: 0,
            next_restart_at,
            since_restart: 0,
            current: 0,
            key: Vec::with_capacity(KEY_CAPACITY),
            value: (0, 0),
            valid: false,
        }
    }

    /// Moves to the next entry; `Ok(false)` at the end.
    pub fn advance(&mut self) -> Result<bool, BlockError> {
        let grow = |key: &mut Vec<u8>, more: usize| {
            key.reserve(more);
            Ok::<(), std::convert::Infallible>(())
        };
        match self.advance_growing(grow) {
            Ok(moved) => moved,
            Err(never) => match never {},
        }
    }

    /// [`Self::advance`] whose key buffer is reserved fallibly: the outer
    /// error, kind `OutOfMemory`, is the allocator's refusal. A table's
    /// open decodes a version 1 index through this: a key's length is
    /// recorded in the block, up to the block's own, whose buffer is live.
    pub(crate) fn try_advance(&mut self) -> std::io::Result<Result<bool, BlockError>> {
        self.advance_growing(|key: &mut Vec<u8>, more: usize| {
            crate::room::try_room(key, more, "a key")
        })
    }

    /// [`Self::advance`], making room for the key's bytes past the shared
    /// prefix with `grow` (the refusal is the outer error).
    #[inline]
    fn advance_growing<E>(
        &mut self,
        grow: impl FnOnce(&mut Vec<u8>, usize) -> Result<(), E>,
    ) -> Result<Result<bool, BlockError>, E> {
        if self.offset >= self.block.restarts_at {
            self.valid = false;
            return Ok(Ok(false));
        }
        let e = match self.block.entry_at(self.offset) {
            Ok(e) => e,
            Err(damage) => return Ok(Err(damage)),
        };
        if e.shared > self.key.len() {
            return Ok(Err(BlockError::SharesTooMuch {
                offset: self.offset,
                shared: e.shared,
                previous_len: self.key.len(),
            }));
        }
        if self.offset >= self.next_restart_at {
            // Restarts a crafted block placed inside entries are passed.
            let block: &Block = &self.block;
            while self.next_restart_at < self.offset {
                self.next_restart += 1;
                self.next_restart_at = block.restart_or_end(self.next_restart);
            }
        }
        if self.offset == self.next_restart_at {
            if e.shared != 0 {
                return Ok(Err(BlockError::RestartSharesPrefix {
                    offset: self.offset,
                    shared: e.shared,
                }));
            }
            self.next_restart += 1;
            self.next_restart_at = self.block.restart_or_end(self.next_restart);
            self.since_restart = 0;
        } else {
            self.since_restart += 1;
            if self.since_restart >= RESTART_INTERVAL {
                return Ok(Err(BlockError::TooFarFromRestart {
                    offset: self.offset,
                    interval: RESTART_INTERVAL,
                }));
            }
        }
        let (shared, next, value_len) = (e.shared, e.next, e.value.len());
        self.key.truncate(shared);
        if self.key.capacity() - shared < e.key_delta.len() {
            grow(&mut self.key, e.key_delta.len())?;
        }
        self.key.extend_from_slice(e.key_delta);
        self.value = (next - value_len, next);
        self.current = self.offset;
        self.offset = next;
        self.valid = true;
        Ok(Ok(true))
    }

    /// Positions at the first entry `>= (user_key, seq)`. Returns whether an
    /// entry of `user_key` newer than `seq` was passed on the way (so the
    /// key is in the block even if no version is visible at `seq`); an entry
    /// before the block's first is not seen.
    pub fn seek(&mut self, user_key: &[u8], seq: u64) -> Result<bool, BlockError> {
        let cmp = |ikey: &[u8], offset: usize| -> Result<(Ordering, bool), BlockError> {
            let (u, s, _) = split_internal_key(ikey).ok_or(BlockError::KeyShorterThanTag {
                offset,
                len: ikey.len(),
            })?;
            Ok((compare_keys(u, s, user_key, seq), u == user_key))
        };
        let block: &Block = &self.block;
        // The last restart whose key is < the target (or restart 0).
        let (mut lo, mut hi) = (0usize, block.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let (key, offset) = block.restart_key(mid)?;
            if cmp(key, offset)?.0 == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.offset = block.restart(lo);
        self.next_restart = lo;
        self.next_restart_at = self.offset;
        self.since_restart = 0;
        self.key.clear();
        self.valid = false;
        let mut newer_seen = false;
        while self.advance()? {
            let (order, same_user) = cmp(&self.key, self.current)?;
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

    /// Block offset of the current entry (for errors). REQUIRES: `valid()`.
    pub(crate) fn entry_offset(&self) -> usize {
        self.current
    }
}

#[cfg(test)]
mod restart_rule_tests;

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

    /// Appends an entry with one-byte varints. REQUIRES: lengths < 128.
    fn put_entry(out: &mut Vec<u8>, shared: u8, key_delta: &[u8], value: &[u8]) {
        out.extend_from_slice(&[shared, key_delta.len() as u8, value.len() as u8]);
        out.extend_from_slice(key_delta);
        out.extend_from_slice(value);
    }

    /// Entries followed by a restart array and its count.
    fn raw_block(entries: &[u8], restarts: &[u32]) -> Vec<u8> {
        let mut out = entries.to_vec();
        for r in restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
        out
    }

    /// Two well-formed full-key entries; the second begins at the returned offset.
    fn two_entries() -> (Vec<u8>, u32) {
        let mut e = Vec::new();
        put_entry(&mut e, 0, &ikey(b"a", 1), b"x");
        let second = e.len() as u32;
        put_entry(&mut e, 0, &ikey(b"b", 1), b"y");
        (e, second)
    }

    fn first_advance(bytes: Vec<u8>) -> Result<bool, BlockError> {
        Block::new(bytes).unwrap().iter().advance()
    }

    #[test]
    fn hand_built_blocks_give_each_layout_error() {
        let (entries, second) = two_entries();
        let len = entries.len();
        assert_eq!(
            Block::new(raw_block(&entries, &[0, second]))
                .unwrap()
                .iter()
                .advance(),
            Ok(true)
        );
        let cases: [(Vec<u8>, BlockError); 8] = [
            (vec![1, 0, 0], BlockError::TooShort { len: 3 }),
            (vec![], BlockError::TooShort { len: 0 }),
            (raw_block(&entries, &[]), BlockError::NoRestarts),
            (
                vec![9, 5, 0, 0, 0],
                BlockError::RestartArrayTooLarge {
                    restarts: 5,
                    len: 5,
                },
            ),
            (raw_block(&[], &[0]), BlockError::NoEntries),
            (
                raw_block(&entries, &[0, len as u32]),
                BlockError::RestartPastEntries {
                    index: 1,
                    offset: len,
                    entries_len: len,
                },
            ),
            (
                raw_block(&entries, &[second]),
                BlockError::FirstRestartNotZero {
                    offset: second as usize,
                },
            ),
            (
                raw_block(&entries, &[0, second, second]),
                BlockError::RestartOutOfOrder {
                    index: 2,
                    offset: second as usize,
                    previous: second as usize,
                },
            ),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                Block::new(bytes.clone()).unwrap_err(),
                expected,
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn hand_built_entries_give_each_entry_error() {
        let malformed = BlockError::MalformedEntry { offset: 0 };
        // A length varint that never ends.
        assert_eq!(
            first_advance(raw_block(&[0xff, 0xff], &[0])),
            Err(malformed.clone())
        );
        // A varint too large for a u32.
        assert_eq!(
            first_advance(raw_block(&[0xff, 0xff, 0xff, 0xff, 0x7f], &[0])),
            Err(malformed.clone())
        );
        // A key delta, then a value, running past the entries.
        assert_eq!(
            first_advance(raw_block(&[0, 9, 0, b'k'], &[0])),
            Err(malformed.clone())
        );
        assert_eq!(
            first_advance(raw_block(&[0, 1, 9, b'k'], &[0])),
            Err(malformed)
        );
        // The second entry is malformed: the error names its offset.
        let (mut entries, second) = two_entries();
        entries.truncate(entries.len() - 1);
        let block = Block::new(raw_block(&entries, &[0])).unwrap();
        let mut it = block.iter();
        assert_eq!(it.advance(), Ok(true));
        assert_eq!(
            it.advance(),
            Err(BlockError::MalformedEntry {
                offset: second as usize
            })
        );

        // The first entry shares bytes with a key that does not exist.
        let mut e = Vec::new();
        put_entry(&mut e, 3, b"abc", b"");
        assert_eq!(
            first_advance(raw_block(&e, &[0])),
            Err(BlockError::SharesTooMuch {
                offset: 0,
                shared: 3,
                previous_len: 0
            })
        );

        // A restart entry (found by the binary search) that shares a prefix.
        let mut e = Vec::new();
        put_entry(&mut e, 0, &ikey(b"a", 1), b"");
        let second = e.len();
        put_entry(&mut e, 1, b"b", b"");
        let block = Block::new(raw_block(&e, &[0, second as u32])).unwrap();
        assert_eq!(
            block.seek(b"z", 1).unwrap_err(),
            BlockError::RestartSharesPrefix {
                offset: second,
                shared: 1
            }
        );

        // Internal keys shorter than a tag: at a restart, and after one.
        let mut e = Vec::new();
        put_entry(&mut e, 0, b"abc", b"");
        let block = Block::new(raw_block(&e, &[0])).unwrap();
        assert_eq!(
            block.seek(b"a", 1).unwrap_err(),
            BlockError::KeyShorterThanTag { offset: 0, len: 3 }
        );
        let mut e = Vec::new();
        put_entry(&mut e, 0, &ikey(b"a", 9), b"");
        let second = e.len();
        put_entry(&mut e, 1, b"", b"");
        let block = Block::new(raw_block(&e, &[0])).unwrap();
        assert_eq!(
            block.seek(b"b", 1).unwrap_err(),
            BlockError::KeyShorterThanTag {
                offset: second,
                len: 1
            }
        );
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
