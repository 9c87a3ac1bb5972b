//! The index block's bytes (FORMAT.md, "Index block"): one entry per data
//! block, its separator and where the block is, written as the table's
//! format version lays them out, and decoded from either layout into the
//! in-memory [`TableIndex`].
//!
//! - Version 1: a data block with a restart at every entry; key = the
//!   separator as an internal key (user key and 8-byte tag), value = the
//!   block's 16-byte handle. About 37 bytes a block.
//! - Version 2: entries back to back, nothing else: the separator's user
//!   key delta-encoded against the previous one's, its sequence number and
//!   the block's size as varints. The block's offset is not stored: data
//!   blocks tile the file from offset 0, so it is where the previous
//!   block's trailer ends. About 8 bytes a block for short separators (7.6 measured, 16-digit keys).
//!
//! Both decoders accept exactly the indexes whose handles tile the data
//! region from offset 0, end before `limit`, and whose separators are
//! strictly ascending; anything else is a [`BlockError`] naming the entry's
//! offset in the block. They never panic, whatever the bytes, and never
//! abort: the decoded index's buffers are reserved fallibly, and a refusal
//! is an `OutOfMemory` I/O error (a version 2 index over a sparse file can
//! decode to gigabytes within the checks: FORMAT.md, "Index block").

use crate::block::Block;
use crate::block_builder::BlockBuilder;
use crate::block_error::BlockError;
use crate::entry::{
    EntryKind, MAX_SEQUENCE, compare_keys, encode_internal_key, split_internal_key,
};
use crate::format::BlockHandle;
use crate::index::{TableIndex, TableIndexBuilder};
use crate::varint;

/// Table format version 1, whose index block is a data block; every
/// other version this module sees (the footer admits only 1 and 2) has
/// version 2's layout.
const V1: u32 = 1;

/// Accumulates a table's index block in the layout of its format version.
#[derive(Debug)]
pub(crate) enum IndexBlockWriter {
    /// Version 1: a data block with a restart at every entry.
    V1(BlockBuilder),
    /// Version 2: the entries so far, and the last separator's user key.
    V2 { bytes: Vec<u8>, previous: Vec<u8> },
}

impl IndexBlockWriter {
    /// A writer for tables of `version`. REQUIRES: a version this build
    /// writes (1 or 2; the table builder checks).
    pub(crate) fn new(version: u32) -> Self {
        if version == V1 {
            Self::V1(BlockBuilder::new(1))
        } else {
            Self::V2 {
                bytes: Vec::new(),
                previous: Vec::new(),
            }
        }
    }

    /// Appends the entry of the block at `handle`, whose separator is
    /// `(user_key, seq)`. REQUIRES: the separators ascend strictly, the
    /// handles tile the file from offset 0, `seq <= MAX_SEQUENCE`.
    pub(crate) fn add(&mut self, user_key: &[u8], seq: u64, handle: BlockHandle) {
        match self {
            Self::V1(block) => {
                let mut key = Vec::with_capacity(user_key.len() + crate::entry::TAG_LEN);
                encode_internal_key(&mut key, user_key, seq, EntryKind::Put);
                let mut value = Vec::with_capacity(crate::format::HANDLE_LEN);
                handle.encode_to(&mut value);
                block.add(&key, &value);
            }
            Self::V2 { bytes, previous } => {
                let shared = previous
                    .iter()
                    .zip(user_key)
                    .take_while(|(a, b)| a == b)
                    .count();
                varint::put_u64(bytes, shared as u64);
                varint::put_u64(bytes, (user_key.len() - shared) as u64);
                bytes.extend_from_slice(&user_key[shared..]);
                varint::put_u64(bytes, seq);
                varint::put_u64(bytes, handle.size);
                previous.clear();
                previous.extend_from_slice(user_key);
            }
        }
    }

    /// The block's bytes (trailer not included); the writer is left
    /// empty.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        match self {
            Self::V1(block) => block.finish(),
            Self::V2 { bytes, .. } => std::mem::take(bytes),
        }
    }
}

/// Decodes the index block `bytes` of a table of format `version` (1 or
/// 2), whose data blocks must end at or before file offset `limit`. The
/// outer error is the allocator's refusal (kind `OutOfMemory`), the inner
/// one says what is wrong with the bytes.
pub(crate) fn decode(
    version: u32,
    bytes: Vec<u8>,
    limit: u64,
) -> std::io::Result<Result<TableIndex, BlockError>> {
    let decoded = if version == V1 {
        decode_v1(bytes, limit)
    } else {
        decode_v2(&bytes, limit)
    };
    match decoded {
        Ok(index) => Ok(Ok(index)),
        Err(Refused::Bytes(e)) => Ok(Err(e)),
        Err(Refused::Memory(e)) => Err(e),
    }
}

/// Why a decode stopped: damage, or memory the allocator refused.
enum Refused {
    Bytes(BlockError),
    Memory(std::io::Error),
}

impl From<BlockError> for Refused {
    fn from(e: BlockError) -> Self {
        Self::Bytes(e)
    }
}

impl From<std::io::Error> for Refused {
    fn from(e: std::io::Error) -> Self {
        Self::Memory(e)
    }
}

/// Checks the next entry against the ones before it and appends it.
fn push_checked(
    entries: &mut TableIndexBuilder,
    offset: usize,
    user_key: &[u8],
    seq: u64,
    handle: BlockHandle,
    limit: u64,
) -> Result<(), Refused> {
    let expected = entries.next_offset();
    if handle.offset != expected {
        return Err(BlockError::HandleMisplaced {
            offset,
            handle,
            expected,
        }
        .into());
    }
    if !handle.fits_before(limit) {
        return Err(BlockError::PastEnd { handle, limit }.into());
    }
    if let Some((prev_user, prev_seq)) = entries.last()
        && !compare_keys(prev_user, prev_seq, user_key, seq).is_lt()
    {
        return Err(BlockError::IndexOutOfOrder { offset }.into());
    }
    // A separator is never longer than its block's last user key, which
    // the block holds, so the separators together fit in the data region.
    // Checked as they come: an entry can reuse the whole previous key in a
    // few bytes, so a small crafted index could otherwise claim gigabytes.
    // Within the limit it still can, over a sparse file: `push` reserves
    // fallibly.
    let key_bytes = (entries.key_bytes() + user_key.len()) as u64;
    if key_bytes > limit {
        return Err(BlockError::IndexKeysPastData {
            offset,
            key_bytes,
            limit,
        }
        .into());
    }
    Ok(entries.push(user_key, seq, handle)?)
}

fn decode_v1(bytes: Vec<u8>, limit: u64) -> Result<TableIndex, Refused> {
    // `Block::new` refuses a block without entries: the index names at
    // least one data block.
    let block = Block::new(bytes)?;
    let mut it = block.iter();
    let mut entries = TableIndexBuilder::default();
    while it.try_advance()?? {
        let offset = it.entry_offset();
        let (user, seq, _) =
            split_internal_key(it.key()).ok_or_else(|| BlockError::KeyShorterThanTag {
                offset,
                len: it.key().len(),
            })?;
        let handle = BlockHandle::decode(it.value()).ok_or_else(|| BlockError::HandleLength {
            offset,
            len: it.value().len(),
        })?;
        push_checked(&mut entries, offset, user, seq, handle, limit)?;
    }
    Ok(entries.finish()?)
}

fn decode_v2(bytes: &[u8], limit: u64) -> Result<TableIndex, Refused> {
    if bytes.is_empty() {
        return Err(BlockError::NoEntries.into());
    }
    let mut entries = TableIndexBuilder::default();
    let mut key: Vec<u8> = Vec::new();
    let mut reader = Reader { bytes, at: 0 };
    while reader.at < bytes.len() {
        let offset = reader.at;
        let malformed = || BlockError::MalformedEntry { offset };
        let (shared, unshared) = reader.varint().zip(reader.varint()).ok_or_else(malformed)?;
        if shared > key.len() as u64 {
            return Err(BlockError::SharesTooMuch {
                offset,
                shared: usize::try_from(shared).unwrap_or(usize::MAX),
                previous_len: key.len(),
            }
            .into());
        }
        let delta = reader.bytes(unshared).ok_or_else(malformed)?;
        key.truncate(shared as usize);
        // At most the block's bytes (each was a delta once), and reserved
        // as fallibly as the rest: a capacity check but when it grows.
        crate::room::try_room(&mut key, delta.len(), "a separator")?;
        key.extend_from_slice(delta);
        let (seq, size) = reader.varint().zip(reader.varint()).ok_or_else(malformed)?;
        if seq > MAX_SEQUENCE {
            return Err(malformed().into());
        }
        let handle = BlockHandle {
            offset: entries.next_offset(),
            size,
        };
        push_checked(&mut entries, offset, &key, seq, handle, limit)?;
    }
    Ok(entries.finish()?)
}

/// Reads a version 2 block front to back. Invariant: `at <= bytes.len()`.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// The varint at `at`, moving past it; `None` (and `at` unchanged) when
    /// the block ends inside it or it overflows a u64.
    fn varint(&mut self) -> Option<u64> {
        let (value, len) = varint::get_u64(&self.bytes[self.at..])?;
        self.at += len;
        Some(value)
    }

    /// The next `n` bytes, moving past them; `None` when fewer are left.
    fn bytes(&mut self, n: u64) -> Option<&'a [u8]> {
        let end = self.at.checked_add(usize::try_from(n).ok()?)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }
}

#[cfg(test)]
mod tests;
