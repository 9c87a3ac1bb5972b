//! Properties blocks for tables that tests put together by hand.

use bloomlsm_sstable::TableProperties;
use bloomlsm_sstable::format::PROPERTIES_VERSION;

/// Properties of a table of one entry in one data block of one byte, keys
/// in "a"..="z", sequence 1, no filter. A test states what its own table
/// holds beside this with struct-update syntax.
pub fn unfiltered() -> TableProperties {
    TableProperties {
        format_version: PROPERTIES_VERSION,
        entries: 1,
        distinct_keys: 1,
        tombstones: 0,
        data_blocks: 1,
        data_bytes: 1,
        smallest_seq: 1,
        largest_seq: 1,
        filter_kind: None,
        filter_hash_id: 0,
        filter_hashes: 0,
        filter_bits: 0,
        bits_per_key: 0.0,
        filter_bytes: 0,
        created_micros: 0,
        smallest_key: b"a".to_vec(),
        largest_key: b"z".to_vec(),
    }
}
