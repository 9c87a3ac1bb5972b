//! The properties block: what a table holds, readable without a scan.

use bloomlsm_filter::FilterKind;

use crate::format::{FORMAT_VERSION, read_u32, read_u64};

/// Facts about one table (FORMAT.md, "Properties block").
#[derive(Clone, Debug, PartialEq)]
pub struct TableProperties {
    /// Table format version.
    pub format_version: u32,
    /// Entries (all versions, tombstones included).
    pub entries: u64,
    /// Distinct user keys (= the filter's item count).
    pub distinct_keys: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Bytes of data blocks with their trailers.
    pub data_bytes: u64,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// Filter kind, `None` when the table has no filter.
    pub filter_kind: Option<FilterKind>,
    /// Hash id of the filter (0 without a filter).
    pub filter_hash_id: u8,
    /// k.
    pub filter_hashes: u32,
    /// m.
    pub filter_bits: u64,
    /// Bits per key the builder was asked for.
    pub bits_per_key: f64,
    /// Bytes of the filter block, trailer excluded.
    pub filter_bytes: u64,
    /// Creation time, microseconds since the Unix epoch.
    pub created_micros: u64,
    /// Smallest user key.
    pub smallest_key: Vec<u8>,
    /// Largest user key.
    pub largest_key: Vec<u8>,
}

/// Bytes of the fixed-width part of the encoding.
pub const PROPERTIES_FIXED_LEN: usize = 4 + 7 * 8 + 1 + 1 + 4 + 8 + 8 + 8 + 8;

impl TableProperties {
    /// Encodes the block (without trailer).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            PROPERTIES_FIXED_LEN + 8 + self.smallest_key.len() + self.largest_key.len(),
        );
        out.extend_from_slice(&self.format_version.to_le_bytes());
        for v in [
            self.entries,
            self.distinct_keys,
            self.tombstones,
            self.data_blocks,
            self.data_bytes,
            self.smallest_seq,
            self.largest_seq,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(self.filter_kind.map_or(0, FilterKind::tag));
        out.push(self.filter_hash_id);
        out.extend_from_slice(&self.filter_hashes.to_le_bytes());
        out.extend_from_slice(&self.filter_bits.to_le_bytes());
        out.extend_from_slice(&self.bits_per_key.to_bits().to_le_bytes());
        out.extend_from_slice(&self.filter_bytes.to_le_bytes());
        out.extend_from_slice(&self.created_micros.to_le_bytes());
        for key in [&self.smallest_key, &self.largest_key] {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
        }
        out
    }

    /// Decodes the block, or says what is wrong. Never panics.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let short = || "properties block is truncated".to_string();
        let u64_at = |i: usize| read_u64(bytes, 4 + 8 * i).ok_or_else(short);
        let format_version = read_u32(bytes, 0).ok_or_else(short)?;
        if format_version != FORMAT_VERSION {
            return Err(format!("properties name format version {format_version}"));
        }
        let mut at = 4 + 7 * 8;
        let kind_tag = *bytes.get(at).ok_or_else(short)?;
        let filter_kind = match kind_tag {
            0 => None,
            t => Some(FilterKind::from_tag(t).map_err(|e| e.to_string())?),
        };
        let filter_hash_id = *bytes.get(at + 1).ok_or_else(short)?;
        at += 2;
        let filter_hashes = read_u32(bytes, at).ok_or_else(short)?;
        at += 4;
        let filter_bits = read_u64(bytes, at).ok_or_else(short)?;
        let bits_per_key = f64::from_bits(read_u64(bytes, at + 8).ok_or_else(short)?);
        let filter_bytes = read_u64(bytes, at + 16).ok_or_else(short)?;
        let created_micros = read_u64(bytes, at + 24).ok_or_else(short)?;
        at += 32;
        let mut keys = [Vec::new(), Vec::new()];
        for key in &mut keys {
            let len = read_u32(bytes, at).ok_or_else(short)? as usize;
            at += 4;
            *key = bytes
                .get(at..at.checked_add(len).ok_or_else(short)?)
                .ok_or_else(short)?
                .to_vec();
            at += len;
        }
        if at != bytes.len() {
            return Err(format!(
                "{} unexpected bytes after the properties",
                bytes.len() - at
            ));
        }
        let [smallest_key, largest_key] = keys;
        Ok(Self {
            format_version,
            entries: u64_at(0)?,
            distinct_keys: u64_at(1)?,
            tombstones: u64_at(2)?,
            data_blocks: u64_at(3)?,
            data_bytes: u64_at(4)?,
            smallest_seq: u64_at(5)?,
            largest_seq: u64_at(6)?,
            filter_kind,
            filter_hash_id,
            filter_hashes,
            filter_bits,
            bits_per_key,
            filter_bytes,
            created_micros,
            smallest_key,
            largest_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> TableProperties {
        TableProperties {
            format_version: FORMAT_VERSION,
            entries: 10,
            distinct_keys: 8,
            tombstones: 2,
            data_blocks: 1,
            data_bytes: 300,
            smallest_seq: 1,
            largest_seq: 10,
            filter_kind: Some(FilterKind::Blocked),
            filter_hash_id: 1,
            filter_hashes: 7,
            filter_bits: 512,
            bits_per_key: 9.9,
            filter_bytes: 104,
            created_micros: 1,
            smallest_key: b"a".to_vec(),
            largest_key: b"zz".to_vec(),
        }
    }

    #[test]
    fn round_trip_and_size() {
        let p = sample();
        let bytes = p.encode();
        assert_eq!(bytes.len(), PROPERTIES_FIXED_LEN + 4 + 1 + 4 + 2);
        assert_eq!(TableProperties::decode(&bytes), Ok(p));
        for len in 0..bytes.len() {
            assert!(TableProperties::decode(&bytes[..len]).is_err());
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = TableProperties::decode(&bytes);
        }
    }
}
