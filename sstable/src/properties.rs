//! The properties block: what a table holds, readable without a scan.

use bloomlsm_filter::FilterKind;
use thiserror::Error;

use crate::format::{PROPERTIES_VERSION, read_u32, read_u64};

/// Facts about one table (FORMAT.md, "Properties block").
#[derive(Clone, Debug, PartialEq)]
pub struct TableProperties {
    /// Layout version of the properties block
    /// ([`crate::format::PROPERTIES_VERSION`], 1 in every table format
    /// version; the table's own version is the footer's).
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
    /// Bits per key the builder was asked for (as last set before
    /// `finish`).
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
    pub fn decode(bytes: &[u8]) -> Result<Self, PropertiesError> {
        let (mut properties, [smallest, largest]) = Self::decode_fields(bytes)?;
        properties.smallest_key = bytes[smallest].to_vec();
        properties.largest_key = bytes[largest].to_vec();
        Ok(properties)
    }

    /// [`Self::decode`] for a table's open: the keys' buffers are reserved
    /// fallibly, and a refusal is the outer error (an `OutOfMemory` I/O
    /// error). Each key is as long as its recorded length, up to the
    /// block's, and a crafted properties block over a sparse file may be
    /// as large as memory admits once, for its read, but not twice.
    pub(crate) fn decode_for_open(bytes: &[u8]) -> std::io::Result<Result<Self, PropertiesError>> {
        let (mut properties, [smallest, largest]) = match Self::decode_fields(bytes) {
            Ok(decoded) => decoded,
            Err(e) => return Ok(Err(e)),
        };
        properties.smallest_key = crate::room::try_copy(&bytes[smallest], "the smallest key")?;
        properties.largest_key = crate::room::try_copy(&bytes[largest], "the largest key")?;
        Ok(Ok(properties))
    }

    /// Every field but the keys (left empty), and where the keys are in
    /// `bytes`.
    fn decode_fields(bytes: &[u8]) -> Result<(Self, [std::ops::Range<usize>; 2]), PropertiesError> {
        let len = bytes.len();
        let short = |field| PropertiesError::Truncated { field, len };
        let u64_at = |i: usize, field| read_u64(bytes, 4 + 8 * i).ok_or(short(field));
        let format_version = read_u32(bytes, 0).ok_or(short("format version"))?;
        if format_version != PROPERTIES_VERSION {
            return Err(PropertiesError::Version(format_version));
        }
        let entries = u64_at(0, "entries")?;
        let distinct_keys = u64_at(1, "distinct keys")?;
        let tombstones = u64_at(2, "tombstones")?;
        let data_blocks = u64_at(3, "data blocks")?;
        let data_bytes = u64_at(4, "data bytes")?;
        let smallest_seq = u64_at(5, "smallest sequence")?;
        let largest_seq = u64_at(6, "largest sequence")?;
        // Every entry takes bytes of data, and the table's open checks the
        // data bytes against the index: no count claims more than the
        // table's data (which a crafted index over a sparse file can still
        // put near 2^63: readers sum counts saturating).
        if distinct_keys > entries || tombstones > entries || entries > data_bytes {
            return Err(PropertiesError::Counts {
                entries,
                distinct_keys,
                tombstones,
                data_bytes,
            });
        }
        let mut at = 4 + 7 * 8;
        let kind_tag = *bytes.get(at).ok_or(short("filter kind"))?;
        let filter_kind = match kind_tag {
            0 => None,
            t => Some(FilterKind::from_tag(t).map_err(|_| PropertiesError::FilterKind(t))?),
        };
        let filter_hash_id = *bytes.get(at + 1).ok_or(short("filter hash id"))?;
        at += 2;
        let filter_hashes = read_u32(bytes, at).ok_or(short("filter k"))?;
        at += 4;
        let filter_bits = read_u64(bytes, at).ok_or(short("filter m"))?;
        let bits_per_key =
            f64::from_bits(read_u64(bytes, at + 8).ok_or(short("filter bits per key"))?);
        let filter_bytes = read_u64(bytes, at + 16).ok_or(short("filter bytes"))?;
        let created_micros = read_u64(bytes, at + 24).ok_or(short("creation time"))?;
        at += 32;
        let mut keys = [0..0, 0..0];
        for (key, field) in keys.iter_mut().zip(["smallest key", "largest key"]) {
            let key_len = read_u32(bytes, at).ok_or(short(field))? as usize;
            at += 4;
            let end = at
                .checked_add(key_len)
                .filter(|&end| end <= len)
                .ok_or(short(field))?;
            *key = at..end;
            at = end;
        }
        if at != len {
            return Err(PropertiesError::TrailingBytes(len - at));
        }
        let properties = Self {
            format_version,
            entries,
            distinct_keys,
            tombstones,
            data_blocks,
            data_bytes,
            smallest_seq,
            largest_seq,
            filter_kind,
            filter_hash_id,
            filter_hashes,
            filter_bits,
            bits_per_key,
            filter_bytes,
            created_micros,
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
        };
        Ok((properties, keys))
    }
}

/// Why a properties block did not decode.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PropertiesError {
    /// The block ends inside a field.
    #[error("properties of {len} bytes end inside the {field}")]
    Truncated {
        /// The field cut off, as FORMAT.md names it.
        field: &'static str,
        /// Bytes in the block, trailer excluded.
        len: usize,
    },
    /// The properties block's layout version is not the one every table
    /// format version uses.
    #[error("properties block version {0}; this build reads version {PROPERTIES_VERSION}")]
    Version(u32),
    /// The filter kind tag is neither 0 (none) nor a known kind.
    #[error("unknown filter kind tag {0}")]
    FilterKind(u8),
    /// The counts cannot describe one table: more distinct keys or
    /// tombstones than entries, or more entries than data bytes.
    #[error(
        "properties claim {entries} entries ({distinct_keys} distinct keys, {tombstones} tombstones) in {data_bytes} data bytes"
    )]
    Counts {
        /// Entries claimed.
        entries: u64,
        /// Distinct user keys claimed.
        distinct_keys: u64,
        /// Tombstones claimed.
        tombstones: u64,
        /// Data bytes claimed.
        data_bytes: u64,
    },
    /// Bytes follow the largest key.
    #[error("{0} unexpected bytes after the properties")]
    TrailingBytes(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> TableProperties {
        TableProperties {
            format_version: PROPERTIES_VERSION,
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
            assert!(
                matches!(
                    TableProperties::decode(&bytes[..len]),
                    Err(PropertiesError::Truncated { len: l, .. }) if l == len
                ),
                "cut to {len}"
            );
        }
    }

    #[test]
    fn hand_built_properties_give_each_error() {
        let bytes = sample().encode();
        let cut = |len: usize| TableProperties::decode(&bytes[..len]).unwrap_err();
        let truncated = |field, len| PropertiesError::Truncated { field, len };
        assert_eq!(cut(3), truncated("format version", 3));
        assert_eq!(cut(4), truncated("entries", 4));
        assert_eq!(cut(60), truncated("filter kind", 60));
        assert_eq!(
            cut(PROPERTIES_FIXED_LEN + 2),
            truncated("smallest key", PROPERTIES_FIXED_LEN + 2)
        );
        assert_eq!(
            cut(bytes.len() - 1),
            truncated("largest key", bytes.len() - 1)
        );

        let mut bad = bytes.clone();
        bad[0] = 2;
        assert_eq!(
            TableProperties::decode(&bad),
            Err(PropertiesError::Version(2))
        );
        let mut bad = bytes.clone();
        bad[4 + 7 * 8] = 9;
        assert_eq!(
            TableProperties::decode(&bad),
            Err(PropertiesError::FilterKind(9))
        );
        let mut bad = bytes.clone();
        bad.extend_from_slice(b"xyz");
        assert_eq!(
            TableProperties::decode(&bad),
            Err(PropertiesError::TrailingBytes(3))
        );
        // A key length far past the end of the block.
        let mut bad = bytes[..PROPERTIES_FIXED_LEN].to_vec();
        bad.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            TableProperties::decode(&bad),
            Err(truncated("smallest key", PROPERTIES_FIXED_LEN + 4))
        );
        assert_eq!(
            PropertiesError::Truncated {
                field: "entries",
                len: 4
            }
            .to_string(),
            "properties of 4 bytes end inside the entries"
        );
    }

    /// Counts no table can hold are refused; counts at their limits
    /// decode.
    #[test]
    fn counts_no_table_can_hold_are_refused() {
        let counts = |entries, distinct_keys, tombstones, data_bytes| TableProperties {
            entries,
            distinct_keys,
            tombstones,
            data_bytes,
            ..sample()
        };
        for p in [
            counts(10, 11, 2, 300),
            counts(10, 8, 11, 300),
            counts(301, 8, 2, 300),
            counts(1 << 63, 1 << 63, 1 << 63, 300),
            counts(u64::MAX, 0, u64::MAX, 300),
        ] {
            assert_eq!(
                TableProperties::decode(&p.encode()),
                Err(PropertiesError::Counts {
                    entries: p.entries,
                    distinct_keys: p.distinct_keys,
                    tombstones: p.tombstones,
                    data_bytes: p.data_bytes,
                }),
                "{p:?}"
            );
        }
        for p in [counts(300, 300, 300, 300), counts(0, 0, 0, 0)] {
            assert_eq!(TableProperties::decode(&p.encode()), Ok(p.clone()));
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = TableProperties::decode(&bytes);
        }
    }
}
