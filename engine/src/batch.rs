//! Write batches: applied atomically, logged as one WAL record.
//!
//! Encoding: `first seq: u64 | count: u32 | op*`, op = `kind: u8 (0 delete,
//! 1 put) | key len: u32 | key | [value len: u32 | value]` (value for puts).

use bloomlsm_sstable::EntryKind;

/// Bytes of the batch header.
pub(crate) const BATCH_HEADER_LEN: usize = 12;

/// Puts and deletes applied together: all or none survive a crash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<(EntryKind, Vec<u8>, Vec<u8>)>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.bytes += key.len() + value.len();
        self.ops
            .push((EntryKind::Put, key.to_vec(), value.to_vec()));
        self
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.bytes += key.len();
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
        self.bytes
    }

    /// The WAL payload for this batch starting at `first_seq`.
    pub(crate) fn encode(&self, first_seq: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(BATCH_HEADER_LEN + self.bytes + 9 * self.ops.len());
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

    /// Decodes a WAL payload into its first sequence number and batch.
    /// Never panics.
    pub(crate) fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        let short = || "batch record is truncated".to_string();
        let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
            let s = bytes
                .get(*at..at.checked_add(n).ok_or_else(short)?)
                .ok_or_else(short)?;
            *at += n;
            Ok(s)
        };
        let u32_at = |at: &mut usize| -> Result<u32, String> {
            let b = take(at, 4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let mut at = 0;
        let seq_bytes = take(&mut at, 8)?;
        let mut s = [0u8; 8];
        s.copy_from_slice(seq_bytes);
        let first_seq = u64::from_le_bytes(s);
        let count = u32_at(&mut at)?;
        let mut batch = Self::new();
        for _ in 0..count {
            let kind =
                EntryKind::from_tag(take(&mut at, 1)?[0]).ok_or("unknown op kind in batch")?;
            let key_len = u32_at(&mut at)? as usize;
            let key = take(&mut at, key_len)?.to_vec();
            match kind {
                EntryKind::Put => {
                    let value_len = u32_at(&mut at)? as usize;
                    let value = take(&mut at, value_len)?;
                    batch.put(&key, value);
                }
                EntryKind::Delete => {
                    batch.delete(&key);
                }
            }
        }
        if at != bytes.len() {
            return Err("trailing bytes after the batch".into());
        }
        Ok((first_seq, batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v").delete(b"gone").put(b"e", b"");
        let bytes = b.encode(42);
        assert_eq!(WriteBatch::decode(&bytes), Ok((42, b)));
        for cut in 0..bytes.len() {
            assert!(WriteBatch::decode(&bytes[..cut]).is_err());
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = WriteBatch::decode(&bytes);
        }
    }
}
