//! Write batches: applied atomically, logged as one WAL record.
//!
//! Encoding: `first seq: u64 | count: u32 | op*`, op = `kind: u8 (0 delete,
//! 1 put) | key len: u32 | key | [value len: u32 | value]` (value for puts).

use bloomlsm_sstable::EntryKind;

/// Bytes of the batch header.
pub(crate) const BATCH_HEADER_LEN: usize = 12;
/// Largest encoded batch: the WAL record's length field is a u32. FROZEN.
pub const MAX_BATCH_BYTES: usize = u32::MAX as usize;

/// Puts and deletes applied together: all or none survive a crash.
///
/// The batch is kept as its own WAL encoding (as LevelDB's is): adding an
/// op appends it to one buffer, and writing the batch patches the header's
/// first sequence number and logs the buffer as it is, so a put costs one
/// allocation however its bytes travel to the log and the memtable.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    /// The encoding: header (first sequence patched at write time, op
    /// count), then the ops. Invariant: every length field fits its u32
    /// unless `oversized`.
    rep: Vec<u8>,
    count: u32,
    /// Key and value bytes.
    payload: usize,
    /// Some key or value was longer than a u32 length field holds (or the
    /// op count overflowed): the batch is refused as too large.
    oversized: bool,
}

impl PartialEq for WriteBatch {
    /// Equal ops in the same order (the header's sequence is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
            && self.oversized == other.oversized
            && self.rep.get(BATCH_HEADER_LEN..) == other.rep.get(BATCH_HEADER_LEN..)
    }
}

impl Eq for WriteBatch {}

/// Why WAL bytes are not a batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The record ends inside a field.
    #[error("batch record is truncated at byte {at} (reading {field})")]
    Truncated {
        /// Offset in the record where the field starts.
        at: usize,
        /// The field being read.
        field: &'static str,
    },
    /// An op's kind byte is neither put nor delete.
    #[error("unknown op kind {tag} at byte {at}")]
    UnknownKind {
        /// The byte.
        tag: u8,
        /// Its offset in the record.
        at: usize,
    },
    /// The ops end before the record does.
    #[error("{extra} trailing bytes after the batch's {count} ops")]
    TrailingBytes {
        /// Bytes left over.
        extra: usize,
        /// Ops decoded.
        count: u32,
    },
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty batch with room for `bytes` bytes of ops (a hint: at most
    /// [`MAX_BATCH_BYTES`] are reserved, and a reservation the allocator
    /// refuses leaves the batch to grow as ops are added).
    pub fn with_capacity(bytes: usize) -> Self {
        // Invariant: a hint never panics or aborts. No batch past
        // `MAX_BATCH_BYTES` is written, so room past it is never used, and
        // `Vec::with_capacity` panics past `isize::MAX` and aborts where the
        // allocator says no.
        let mut rep = Vec::new();
        let _ = rep.try_reserve_exact(BATCH_HEADER_LEN + bytes.min(MAX_BATCH_BYTES));
        rep.resize(BATCH_HEADER_LEN, 0);
        Self {
            rep,
            count: 0,
            payload: 0,
            oversized: false,
        }
    }

    /// Appends one op (its value only for a put).
    fn push(&mut self, kind: EntryKind, key: &[u8], value: &[u8]) {
        let (Ok(key_len), Ok(value_len), Some(count)) = (
            u32::try_from(key.len()),
            u32::try_from(value.len()),
            self.count.checked_add(1),
        ) else {
            self.oversized = true;
            return;
        };
        self.count = count;
        self.payload += key.len() + value.len();
        self.rep.push(kind.tag());
        self.rep.extend_from_slice(&key_len.to_le_bytes());
        self.rep.extend_from_slice(key);
        if kind == EntryKind::Put {
            self.rep.extend_from_slice(&value_len.to_le_bytes());
            self.rep.extend_from_slice(value);
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.push(EntryKind::Put, key, value);
        self
    }

    /// Sets `key` to `value` (the bytes are copied into the batch's
    /// encoding; kept for callers that hold owned buffers).
    pub fn put_owned(&mut self, key: Vec<u8>, value: Vec<u8>) -> &mut Self {
        self.put(&key, &value)
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.push(EntryKind::Delete, key, &[]);
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// No operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0 && !self.oversized
    }

    /// Key and value bytes in the batch.
    pub fn payload_bytes(&self) -> usize {
        self.payload
    }

    /// Bytes of the batch's WAL record payload; `usize::MAX` when some op
    /// could not be encoded (a length past u32), so the batch is refused.
    pub fn encoded_len(&self) -> usize {
        if self.oversized {
            usize::MAX
        } else {
            self.rep.len()
        }
    }

    /// The ops in order: (kind, key, value; empty for a delete).
    pub(crate) fn ops(&self) -> impl Iterator<Item = (EntryKind, &[u8], &[u8])> + '_ {
        let mut r = Reader {
            bytes: &self.rep,
            at: BATCH_HEADER_LEN,
        };
        // The encoding was written by `push` (or checked by `decode`), so
        // it parses; were it not to, the ops would end early, never panic.
        std::iter::from_fn(move || r.op().ok())
    }

    /// The WAL payload for this batch starting at `first_seq`.
    /// REQUIRES: `encoded_len() <= MAX_BATCH_BYTES` (so every length fits
    /// its u32 field).
    pub(crate) fn encode(&mut self, first_seq: u64) -> &[u8] {
        self.rep[..8].copy_from_slice(&first_seq.to_le_bytes());
        self.rep[8..BATCH_HEADER_LEN].copy_from_slice(&self.count.to_le_bytes());
        &self.rep
    }

    /// Decodes a WAL payload into its first sequence number and the batch.
    /// Never panics.
    pub(crate) fn decode(bytes: &[u8]) -> Result<(u64, Self), BatchError> {
        let mut r = Reader { bytes, at: 0 };
        let first_seq = u64::from_le_bytes(r.array("first sequence")?);
        let count = u32::from_le_bytes(r.array("op count")?);
        let mut payload = 0;
        for _ in 0..count {
            let (_, key, value) = r.op()?;
            payload += key.len() + value.len();
        }
        if r.at != bytes.len() {
            return Err(BatchError::TrailingBytes {
                extra: bytes.len() - r.at,
                count,
            });
        }
        let batch = Self {
            rep: bytes.to_vec(),
            count,
            payload,
            oversized: false,
        };
        Ok((first_seq, batch))
    }
}

/// How many whole ops a WAL payload's bytes after its batch header hold,
/// when they are exactly ops (none left over, at least one); the header's
/// op count is not read. For a record whose payload fails its checksum:
/// when only its count was damaged, this is the count it was written with.
pub(crate) fn ops_filling(payload: &[u8]) -> Option<u64> {
    let mut r = Reader {
        bytes: payload,
        at: BATCH_HEADER_LEN,
    };
    let mut ops = 0u64;
    while r.at < payload.len() {
        r.op().ok()?;
        ops += 1;
    }
    (r.at == payload.len() && ops > 0).then_some(ops)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], BatchError> {
        let truncated = BatchError::Truncated { at: self.at, field };
        let end = self.at.checked_add(n).ok_or(truncated.clone())?;
        let s = self.bytes.get(self.at..end).ok_or(truncated)?;
        self.at = end;
        Ok(s)
    }

    /// One op: (kind, key, value; empty for a delete).
    fn op(&mut self) -> Result<(EntryKind, &'a [u8], &'a [u8]), BatchError> {
        let at = self.at;
        let [tag] = self.array("op kind")?;
        let kind = EntryKind::from_tag(tag).ok_or(BatchError::UnknownKind { tag, at })?;
        let key_len = u32::from_le_bytes(self.array("key length")?) as usize;
        let key = self.take(key_len, "key")?;
        let value = match kind {
            EntryKind::Put => {
                let value_len = u32::from_le_bytes(self.array("value length")?) as usize;
                self.take(value_len, "value")?
            }
            EntryKind::Delete => &[],
        };
        Ok((kind, key, value))
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], BatchError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_encoded_len() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v").delete(b"gone").put(b"e", b"");
        let bytes = b.encode(42).to_vec();
        assert_eq!(bytes.len(), b.encoded_len());
        let ops: Vec<_> = b.ops().collect();
        assert_eq!(
            ops,
            vec![
                (EntryKind::Put, &b"k"[..], &b"v"[..]),
                (EntryKind::Delete, b"gone", b""),
                (EntryKind::Put, b"e", b""),
            ]
        );
        assert_eq!(WriteBatch::decode(&bytes), Ok((42, b)));
        for cut in 0..bytes.len() {
            assert!(matches!(
                WriteBatch::decode(&bytes[..cut]),
                Err(BatchError::Truncated { .. })
            ));
        }
        let mut bad = bytes.clone();
        bad[12] = 7;
        assert_eq!(
            WriteBatch::decode(&bad),
            Err(BatchError::UnknownKind { tag: 7, at: 12 })
        );
        let mut long = bytes;
        long.push(0);
        assert_eq!(
            WriteBatch::decode(&long),
            Err(BatchError::TrailingBytes { extra: 1, count: 3 })
        );
        assert_eq!(WriteBatch::new().encoded_len(), BATCH_HEADER_LEN);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = WriteBatch::decode(&bytes);
        }

        #[test]
        fn encoded_len_is_exact(ops in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..20), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))), 0..20)) {
            let mut b = WriteBatch::new();
            for (k, v) in &ops {
                match v { Some(v) => { b.put(k, v); } None => { b.delete(k); } }
            }
            prop_assert_eq!(b.encode(1).len(), b.encoded_len());
            prop_assert_eq!(b.len(), ops.len());
            let (seq, back) = WriteBatch::decode(b.encode(7)).unwrap();
            prop_assert_eq!(seq, 7);
            prop_assert_eq!(back.ops().count(), ops.len());
            prop_assert_eq!(&back, &b);
        }
    }
}
