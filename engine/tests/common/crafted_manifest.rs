//! Rewrites a store's `MANIFEST` table records (layout:
//! engine/src/manifest.rs) and reseals its checksum, so the crafted
//! fields reach the decoder.

use std::path::Path;

/// Bytes before the manifest's payload.
const MANIFEST_HEADER_LEN: usize = 20;

/// Sets every table record's size to `size`, and its entries to
/// `entries` when given.
pub fn record_tables(dir: &Path, size: u64, entries: Option<u64>) {
    let path = dir.join("MANIFEST");
    let bytes = std::fs::read(&path).unwrap();
    let mut payload = bytes[MANIFEST_HEADER_LEN..].to_vec();
    let u32_at = |p: &[u8], at: usize| u32::from_le_bytes(p[at..at + 4].try_into().unwrap());
    let count = u32_at(&payload, 24);
    let mut at = 28;
    for _ in 0..count {
        // level u32, number u64, size u64, entries u64.
        payload[at + 12..at + 20].copy_from_slice(&size.to_le_bytes());
        if let Some(entries) = entries {
            payload[at + 20..at + 28].copy_from_slice(&entries.to_le_bytes());
        }
        at += 4 + 5 * 8;
        for _ in 0..2 {
            at += 4 + u32_at(&payload, at) as usize;
        }
    }
    assert_eq!(at, payload.len());
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    // Control byte: the store format version, payload given as is.
    let mut data = vec![version as u8 | 8];
    data.extend_from_slice(&payload);
    std::fs::write(&path, bloomlsm::fuzzing::resealed::reseal_manifest(&data)).unwrap();
}
