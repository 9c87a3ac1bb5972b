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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<(EntryKind, Vec<u8>, Vec<u8>)>,
    /// Bytes of the encoding so far.
    encoded: usize,
    /// Key and value bytes.
    payload: usize,
}

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
        Self {
            ops: Vec::new(),
            encoded: BATCH_HEADER_LEN,
            payload: 0,
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.put_owned(key.to_vec(), value.to_vec())
    }

    /// Sets `key` to `value`, taking both buffers without copying.
    pub fn put_owned(&mut self, key: Vec<u8>, value: Vec<u8>) -> &mut Self {
        self.payload += key.len() + value.len();
        self.encoded = self
            .encoded
            .saturating_add(1 + 4 + 4)
            .saturating_add(key.len())
            .saturating_add(value.len());
        self.ops.push((EntryKind::Put, key, value));
        self
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.payload += key.len();
        self.encoded = self.encoded.saturating_add(1 + 4).saturating_add(key.len());
        self.ops.push((EntryKind::Delete, key.to_vec(), Vec::new()));
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// No operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Key and value bytes in the batch.
    pub fn payload_bytes(&self) -> usize {
        self.payload
    }

    /// Bytes of the batch's WAL record payload (saturating).
    pub fn encoded_len(&self) -> usize {
        self.encoded
    }

    /// The WAL payload for this batch starting at `first_seq`.
    /// REQUIRES: `encoded_len() <= MAX_BATCH_BYTES` (so every length fits
    /// its u32 field).
    pub(crate) fn encode(&self, first_seq: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&first_seq.to_le_bytes());
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for (kind, key, value) in &self.ops {
            out.push(kind.tag());
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            if *kind == EntryKind::Put {
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
        }
        out
    }

    /// Decodes a WAL payload into its first sequence number and the batch.
    /// Never panics.
    pub(crate) fn decode(bytes: &[u8]) -> Result<(u64, Self), BatchError> {
        let mut r = Reader { bytes, at: 0 };
        let first_seq = u64::from_le_bytes(r.array("first sequence")?);
        let count = u32::from_le_bytes(r.array("op count")?);
        let mut batch = Self::new();
        for _ in 0..count {
            let at = r.at;
            let [tag] = r.array("op kind")?;
            let kind = EntryKind::from_tag(tag).ok_or(BatchError::UnknownKind { tag, at })?;
            let key_len = u32::from_le_bytes(r.array("key length")?) as usize;
            let key = r.take(key_len, "key")?.to_vec();
            match kind {
                EntryKind::Put => {
                    let value_len = u32::from_le_bytes(r.array("value length")?) as usize;
                    let value = r.take(value_len, "value")?.to_vec();
                    batch.put_owned(key, value);
                }
                EntryKind::Delete => {
                    batch.delete(&key);
                }
            }
        }
        if r.at != bytes.len() {
            return Err(BatchError::TrailingBytes {
                extra: bytes.len() - r.at,
                count,
            });
        }
        Ok((first_seq, batch))
    }
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
        let bytes = b.encode(42);
        assert_eq!(bytes.len(), b.encoded_len());
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
        }
    }
}
