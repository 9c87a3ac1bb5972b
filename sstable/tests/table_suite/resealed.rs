//! Bytes that pass every checksum: valid tables with random bytes edited
//! inside their blocks and footer, every checksum then recomputed
//! (`bloomlsm_sstable::fuzzing::reseal`), so the index, data, properties
//! and filter decoders see the edits themselves. Opening, getting and
//! scanning must answer with a value or an error, never panic or hang.
//! The fuzz target `table_resealed` runs the same with coverage guidance.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::format::{FORMAT_VERSION, OLDEST_FORMAT_VERSION};
use bloomlsm_sstable::fuzzing::{blocks, exercise, reseal};
use bloomlsm_sstable::{EntryKind, TableOptions};
use common::{Model, options, write_table};
use proptest::prelude::*;

fn table_bytes(keys: &[Vec<u8>], filter: Option<FilterKind>, block_size: usize) -> Vec<u8> {
    table_bytes_of_version(keys, filter, block_size, FORMAT_VERSION)
}

fn table_bytes_of_version(
    keys: &[Vec<u8>],
    filter: Option<FilterKind>,
    block_size: usize,
    format_version: u32,
) -> Vec<u8> {
    let mut model = Model::new();
    for (i, k) in keys.iter().enumerate() {
        let seq = i as u64 + 1;
        let kind = if i % 5 == 4 {
            EntryKind::Delete
        } else {
            EntryKind::Put
        };
        let value = if kind == EntryKind::Put {
            vec![i as u8; i % 40]
        } else {
            Vec::new()
        };
        model.insert((k.clone(), Reverse(seq)), (kind, value));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let options = TableOptions {
        format_version,
        ..options(filter, block_size)
    };
    write_table(&path, &model, options);
    std::fs::read(&path).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resealed_edits_are_read_without_panic(
        keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..10), 1..60),
        filter in prop_oneof![Just(None), Just(Some(FilterKind::Blocked)), Just(Some(FilterKind::Ribbon)), Just(Some(FilterKind::Standard))],
        block_size in prop_oneof![Just(32usize), Just(128), Just(4096)],
        edits in proptest::collection::vec((any::<usize>(), 1u8..), 1..8),
        // Aim at one block: the edits land inside it.
        aim in any::<prop::sample::Index>(),
    ) {
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        let mut table = table_bytes(&keys, filter, block_size);
        let blocks = blocks(&table);
        prop_assert!(!blocks.is_empty());
        let (_, h) = blocks[aim.index(blocks.len())];
        let aimed: Vec<(usize, u8)> = edits
            .iter()
            .map(|&(at, b)| (h.offset as usize + at % (h.size as usize).max(1), b))
            .collect();
        reseal(&mut table, &blocks, &aimed);
        let probes: Vec<&[u8]> = keys.iter().map(Vec::as_slice).take(20).collect();
        exercise(table, &probes, 10_000);
    }

    /// Version 1's index block (a data block of separators and handles)
    /// edited: the tests above write version 2 only.
    #[test]
    fn resealed_edits_to_a_version_1_table_are_read_without_panic(
        keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..10), 1..60),
        block_size in prop_oneof![Just(32usize), Just(128)],
        edits in proptest::collection::vec((any::<usize>(), 1u8..), 1..8),
        aim in any::<prop::sample::Index>(),
    ) {
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        let mut table =
            table_bytes_of_version(&keys, None, block_size, OLDEST_FORMAT_VERSION);
        let blocks = blocks(&table);
        // Data blocks, then the index, then the properties: aim at the
        // index one time in two.
        let (_, h) = if aim.index(2) == 0 {
            blocks[blocks.len() - 2]
        } else {
            blocks[aim.index(blocks.len())]
        };
        let aimed: Vec<(usize, u8)> = edits
            .iter()
            .map(|&(at, b)| (h.offset as usize + at % (h.size as usize).max(1), b))
            .collect();
        reseal(&mut table, &blocks, &aimed);
        let probes: Vec<&[u8]> = keys.iter().map(Vec::as_slice).take(20).collect();
        exercise(table, &probes, 10_000);
    }

    #[test]
    fn resealed_edits_anywhere_are_read_without_panic(
        keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..10), 1..40),
        edits in proptest::collection::vec((any::<usize>(), 1u8..), 1..6),
    ) {
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        let mut table = table_bytes(&keys, Some(FilterKind::Blocked), 64);
        let blocks = blocks(&table);
        reseal(&mut table, &blocks, &edits);
        let probes: Vec<&[u8]> = keys.iter().map(Vec::as_slice).take(20).collect();
        exercise(table, &probes, 10_000);
    }
}

/// With no edits, resealing changes nothing: the blocks found are the
/// table's, and every read answers.
#[test]
fn resealing_without_edits_keeps_the_table() {
    let keys: Vec<Vec<u8>> = (0..200u32)
        .map(|i| format!("k{i:05}").into_bytes())
        .collect();
    let table = table_bytes(&keys, Some(FilterKind::Ribbon), 128);
    let found = blocks(&table);
    assert!(found.len() > 20, "{} blocks", found.len());
    let mut resealed = table.clone();
    reseal(&mut resealed, &found, &[]);
    assert_eq!(resealed, table);
    let probes: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    // 200 keys at two snapshots, then 200 entries twice (a full scan and a
    // scan from the first key).
    assert_eq!(exercise(table, &probes, 10_000), 400 + 400);
}
