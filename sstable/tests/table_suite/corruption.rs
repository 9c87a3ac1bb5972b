//! Corruption sweep: flip every byte of a small table, one at a time. Each
//! outcome must be the right answer or an error naming the block; never a
//! wrong value, never a panic; flips inside the filter block only disable
//! the filter. Every flip is caught by a checksum (or the footer magic).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{
    BlockError, BlockKind, CorruptionReason, Error, FilterLoadError, FilterStatus, FooterError,
    Outcome, Table, TableIter,
};
use common::{options, simple_model, write_table};

fn check_table(
    bytes: &[u8],
    dir: &std::path::Path,
    model: &common::Model,
    flip_at: usize,
) -> &'static str {
    let path = dir.join(format!("flip{flip_at}.sst"));
    std::fs::write(&path, bytes).unwrap();
    let table = match Table::open_path(&path, 1, None) {
        Ok(t) => std::sync::Arc::new(t),
        Err(Error::Corruption { kind, reason, .. }) => {
            assert!(
                matches!(
                    kind,
                    BlockKind::Footer | BlockKind::Index | BlockKind::Properties
                ),
                "{kind}"
            );
            assert_caught_by_a_checksum(&reason, flip_at);
            std::fs::remove_file(&path).unwrap();
            return "refused at open";
        }
        Err(Error::UnsupportedVersion { .. }) => return "refused at open",
        Err(e) => panic!("unexpected error for flip at {flip_at}: {e}"),
    };
    let mut outcome = "readable";
    if let FilterStatus::Unusable(reason) = table.filter_status() {
        assert!(
            matches!(
                reason,
                FilterLoadError::Block {
                    source: BlockError::ChecksumMismatch { .. } | BlockError::WrongType { .. },
                    ..
                }
            ),
            "flip at {flip_at}: {reason:?}"
        );
        outcome = "filter disabled";
    }
    for ((key, seq), (_, value)) in model {
        match table.get(key, KeyHash::of(key), u64::MAX >> 8) {
            Ok(l) => match l.outcome {
                Outcome::Found {
                    seq: s,
                    value: Some(v),
                } => {
                    assert_eq!(
                        (s, &v),
                        (seq.0, value),
                        "wrong data after flip at {flip_at}"
                    );
                }
                other => panic!("flip at {flip_at}: key {key:?} not found ({other:?})"),
            },
            Err(Error::Corruption {
                kind: BlockKind::Data,
                reason,
                ..
            }) => {
                assert_caught_by_a_checksum(&reason, flip_at);
                outcome = "data block error";
            }
            Err(e) => panic!("flip at {flip_at}: unexpected error {e}"),
        }
    }
    for entry in TableIter::new(table, false) {
        if let Err(e) = entry {
            assert!(e.is_corruption(), "{e}");
            outcome = "data block error";
            break;
        }
    }
    std::fs::remove_file(&path).unwrap();
    outcome
}

/// One flipped byte is caught by a trailer or the footer checksum before
/// any block is parsed (the magic is outside the checksum).
fn assert_caught_by_a_checksum(reason: &CorruptionReason, flip_at: usize) {
    assert!(
        matches!(
            reason,
            CorruptionReason::Block(
                BlockError::ChecksumMismatch { .. } | BlockError::WrongType { .. }
            ) | CorruptionReason::Footer(FooterError::Checksum { .. } | FooterError::BadMagic(_))
        ),
        "flip at {flip_at}: {reason:?}"
    );
}

#[test]
fn every_byte_flip_is_detected_or_harmless() {
    byte_flips_are_detected_or_harmless(FilterKind::Blocked);
}

#[test]
fn every_byte_flip_of_a_ribbon_table_is_detected_or_harmless() {
    byte_flips_are_detected_or_harmless(FilterKind::Ribbon);
}

fn byte_flips_are_detected_or_harmless(kind: FilterKind) {
    let model = simple_model(300);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(Some(kind), 512));
    let original = std::fs::read(&path).unwrap();
    let table = Table::open_path(&path, 1, None).unwrap();
    let filter = table.footer().filter;
    let mut counts = std::collections::BTreeMap::new();
    for at in 0..original.len() {
        let mut bytes = original.clone();
        bytes[at] ^= 0x5a;
        let outcome = check_table(&bytes, dir.path(), &model, at);
        let in_filter =
            (filter.offset as usize..(filter.offset + filter.size + 5) as usize).contains(&at);
        if in_filter {
            assert_eq!(
                outcome, "filter disabled",
                "a filter flip at {at} must only disable the filter"
            );
        } else {
            assert_ne!(outcome, "readable", "a flip at {at} went unnoticed");
        }
        *counts.entry(outcome).or_insert(0) += 1;
    }
    println!("{kind}: {} offsets swept: {counts:?}", original.len());
}

#[test]
fn every_truncation_is_refused() {
    let model = simple_model(50);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(Some(FilterKind::Standard), 256));
    let original = std::fs::read(&path).unwrap();
    for len in 0..original.len() {
        std::fs::write(&path, &original[..len]).unwrap();
        // A cut-off file ends in bytes that are not a footer.
        match Table::open_path(&path, 1, None) {
            Err(Error::Corruption {
                kind: BlockKind::Footer,
                reason: CorruptionReason::Footer(FooterError::Length(_) | FooterError::BadMagic(_)),
                ..
            }) => {}
            other => panic!("truncation to {len}: {other:?}"),
        }
    }
}
