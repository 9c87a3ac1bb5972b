//! Entries, their kinds and the internal key order.

use std::cmp::Ordering;

/// Bytes of the tag that follows the user key in an internal key.
pub const TAG_LEN: usize = 8;
/// Largest sequence number: sequence numbers have 56 bits.
pub const MAX_SEQUENCE: u64 = (1 << 56) - 1;

/// Whether an entry sets a value or deletes the key. Tags are FROZEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A tombstone: the key is deleted as of this sequence number.
    Delete,
    /// A value.
    Put,
}

impl EntryKind {
    /// The on-disk tag. FROZEN.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Delete => 0,
            Self::Put => 1,
        }
    }

    /// The kind a tag names, if any.
    pub const fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            0 => Some(Self::Delete),
            1 => Some(Self::Put),
            _ => None,
        }
    }
}

/// One version of one key, as stored in a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The user key.
    pub user_key: Vec<u8>,
    /// Its sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: EntryKind,
    /// The value (empty for a tombstone).
    pub value: Vec<u8>,
}

/// Appends the internal key of `(user_key, seq, kind)` to `out`.
/// REQUIRES: `seq <= MAX_SEQUENCE`.
pub(crate) fn encode_internal_key(out: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: EntryKind) {
    out.extend_from_slice(user_key);
    out.extend_from_slice(&((seq << 8) | u64::from(kind.tag())).to_le_bytes());
}

/// Splits an internal key into user key, sequence number and kind tag.
/// `None` when it is shorter than a tag.
pub(crate) fn split_internal_key(ikey: &[u8]) -> Option<(&[u8], u64, u8)> {
    let split = ikey.len().checked_sub(TAG_LEN)?;
    let (user, tag) = ikey.split_at(split);
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(tag);
    let tag = u64::from_le_bytes(t);
    Some((user, tag >> 8, (tag & 0xff) as u8))
}

/// The table order: user key ascending, then sequence number descending.
#[inline]
pub fn compare_keys(a_user: &[u8], a_seq: u64, b_user: &[u8], b_seq: u64) -> Ordering {
    a_user.cmp(b_user).then(b_seq.cmp(&a_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_key_round_trip_and_order() {
        let mut k = Vec::new();
        encode_internal_key(&mut k, b"abc", 42, EntryKind::Put);
        assert_eq!(k.len(), 3 + TAG_LEN);
        assert_eq!(split_internal_key(&k), Some((&b"abc"[..], 42, 1)));
        assert_eq!(split_internal_key(b"short"), None);
        assert_eq!(compare_keys(b"a", 5, b"a", 3), Ordering::Less);
        assert_eq!(compare_keys(b"a", 5, b"b", 9), Ordering::Less);
    }
}
