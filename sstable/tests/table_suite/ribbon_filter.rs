//! Tables carry Ribbon filters like the Bloom kinds: recorded in the
//! properties, used on every get, and fail-open when the filter's own bytes
//! are damaged behind an intact block trailer (every key "maybe", data
//! readable, the reason kept).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm_filter::{Filter, FilterError, FilterKind, KeyHash, RibbonFilter};
use bloomlsm_sstable::{FilterLoadError, FilterStatus, FilterVerdict, Outcome};
use common::{open, options, simple_model, write_table};

/// Block type byte of a filter block (FORMAT.md, block trailer).
const FILTER_BLOCK_TYPE: u8 = 2;

#[test]
fn ribbon_tables_record_and_use_their_filter() {
    let n = 5000;
    let model = simple_model(n);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(Some(FilterKind::Ribbon), 4096));
    let table = open(&path, false);
    assert!(matches!(table.filter_status(), FilterStatus::Loaded));
    let p = table.properties();
    let f = table.filter().unwrap();
    assert_eq!(p.filter_kind, Some(FilterKind::Ribbon));
    assert_eq!(
        (p.filter_hashes, p.filter_bits),
        (f.num_hashes(), f.num_bits())
    );
    assert_eq!(f.len(), n);
    // Ten bits per key buy about 2^-9.6 with Ribbon, 0.13%.
    assert!(f.theoretical_fpr() < 0.002, "{}", f.theoretical_fpr());
    for (key, _) in model.keys() {
        let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
        assert_eq!(l.verdict(), FilterVerdict::TruePositive);
    }
}

/// The table file with its filter block replaced by `filter` (same length)
/// and the block trailer's checksum recomputed, so only the filter decoder
/// can notice.
fn with_filter_bytes(file: &[u8], offset: usize, filter: &[u8]) -> Vec<u8> {
    let mut bytes = file.to_vec();
    bytes[offset..offset + filter.len()].copy_from_slice(filter);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(filter);
    hasher.update(&[FILTER_BLOCK_TYPE]);
    let trailer = offset + filter.len();
    assert_eq!(bytes[trailer], FILTER_BLOCK_TYPE);
    bytes[trailer + 1..trailer + 5].copy_from_slice(&hasher.finalize().to_le_bytes());
    bytes
}

#[test]
fn a_damaged_ribbon_filter_turns_every_key_into_maybe() {
    let n = 2000;
    let model = simple_model(n);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(Some(FilterKind::Ribbon), 4096));
    let original = std::fs::read(&path).unwrap();
    let handle = open(&path, false).footer().filter;
    let (offset, size) = (handle.offset as usize, handle.size as usize);
    let filter = &original[offset..offset + size];
    assert!(RibbonFilter::from_bytes(filter).is_ok());

    // Three kinds of damage inside the filter, each under a good trailer:
    // a flipped solution bit (the filter's crc32), a kind tag from a newer
    // writer (5), and a format version this build does not know.
    let mut flipped = filter.to_vec();
    flipped[size / 2] ^= 0x10;
    let mut newer_kind = filter.to_vec();
    newer_kind[6] = 5;
    let mut newer_version = filter.to_vec();
    newer_version[4] = 3;
    for (what, damaged) in [
        ("flipped bit", flipped),
        ("unknown kind", newer_kind),
        ("unknown version", newer_version),
    ] {
        let bytes = with_filter_bytes(&original, offset, &damaged);
        std::fs::write(&path, &bytes).unwrap();
        let table = open(&path, false);
        match table.filter_status() {
            FilterStatus::Unusable(FilterLoadError::Decode { offset: at, source }) => {
                assert_eq!(*at as usize, offset, "{what}");
                assert!(
                    matches!(
                        source,
                        FilterError::ChecksumMismatch { .. }
                            | FilterError::UnknownKind(5)
                            | FilterError::UnsupportedVersion(3)
                    ),
                    "{what}: {source:?}"
                );
            }
            other => panic!("{what}: filter status {other:?}"),
        }
        assert!(table.filter().is_none());
        // Every present key is found; every in-range absent key reads a
        // block, because nothing can rule it out.
        for (i, ((key, _), (_, value))) in model.iter().enumerate() {
            let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
            assert_eq!(
                l.outcome,
                Outcome::Found {
                    seq: i as u64 + 1,
                    value: Some(value.clone())
                },
                "{what}"
            );
        }
        for i in 0..200 {
            let key = format!("key{:08}x", i * 7);
            let l = table
                .get(key.as_bytes(), KeyHash::of(key.as_bytes()), u64::MAX >> 8)
                .unwrap();
            assert_eq!(l.verdict(), FilterVerdict::NoFilter, "{what}");
            assert!(l.block.is_some(), "{what}");
        }
    }
}
