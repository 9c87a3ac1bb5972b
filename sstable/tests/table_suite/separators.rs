//! Index separators: a block's index key is the shortest user key between
//! its last entry and the next block's first (FORMAT.md, "Index block").
//! Tables of keys over a four-letter alphabet (`0x00`, `a`, `b`, `0xff`),
//! with shared prefixes, keys that are prefixes of others, and up to eight
//! versions a key under interleaved sequence numbers, in blocks of a few
//! entries, so separators fall between, on and inside keys and a key's
//! versions span block boundaries. Every key the alphabet spells up to the
//! longest written, at every snapshot, must answer as a model does; scans
//! from each must start at the first key not before it; and a missing
//! version must say whether newer ones exist.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;
use std::collections::BTreeMap;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{EntryKind, Outcome, TableIter};
use common::{Model, open, options, write_table};
use proptest::prelude::*;

const ALPHABET: [u8; 4] = [0x00, b'a', b'b', 0xff];

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::sample::select(&ALPHABET[..]), 1..5)
}

/// Keys with 1 to 8 versions each; sequence numbers 1.. shuffled across
/// all versions, so a key's versions interleave with other keys'.
fn model() -> impl Strategy<Value = Model> {
    proptest::collection::btree_map(key(), (1usize..9, any::<bool>()), 1..40)
        .prop_flat_map(|keys| {
            let versions: usize = keys.values().map(|(n, _)| n).sum();
            let seqs = Just((1..=versions as u64).collect::<Vec<_>>()).prop_shuffle();
            (Just(keys), seqs)
        })
        .prop_map(|(keys, seqs)| {
            let mut seqs = seqs.into_iter();
            let mut model = BTreeMap::new();
            for (k, (n, deletes)) in keys {
                for v in 0..n {
                    let seq = seqs.next().unwrap();
                    let kind = if deletes && v % 2 == 1 {
                        EntryKind::Delete
                    } else {
                        EntryKind::Put
                    };
                    let value = match kind {
                        EntryKind::Put => format!("{k:?}@{seq}").into_bytes(),
                        EntryKind::Delete => Vec::new(),
                    };
                    model.insert((k.clone(), Reverse(seq)), (kind, value));
                }
            }
            model
        })
}

/// Every key over the alphabet of 1 to `max_len` bytes.
fn all_keys(max_len: usize) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new()];
    let mut all = Vec::new();
    for _ in 0..max_len {
        out = out
            .iter()
            .flat_map(|k| {
                ALPHABET.iter().map(move |&b| {
                    let mut k = k.clone();
                    k.push(b);
                    k
                })
            })
            .collect();
        all.extend(out.iter().cloned());
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn gets_scans_and_newer_versions_agree_with_the_model(
        model in model(),
        block_size in prop_oneof![Just(24usize), Just(48), Just(96), Just(300)],
        filter in prop_oneof![Just(None), Just(Some(FilterKind::Blocked))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        write_table(&path, &model, options(filter, block_size));
        let table = open(&path, false);
        let max_seq = model.len() as u64;
        for key in all_keys(4) {
            let versions: Vec<u64> = model
                .range((key.clone(), Reverse(u64::MAX))..)
                .take_while(|((k, _), _)| *k == key)
                .map(|((_, s), _)| s.0)
                .collect();
            for snapshot in 0..=max_seq + 1 {
                let lookup = table.get(&key, KeyHash::of(&key), snapshot).unwrap();
                let visible = model
                    .range((key.clone(), Reverse(snapshot))..)
                    .next()
                    .filter(|((k, _), _)| *k == key);
                match (&lookup.outcome, visible) {
                    (Outcome::Found { seq, value }, Some(((_, s), (kind, v)))) => {
                        prop_assert_eq!(*seq, s.0, "{:?} at {}", key, snapshot);
                        let want = (*kind == EntryKind::Put).then(|| v.clone());
                        prop_assert_eq!(value, &want, "{:?} at {}", key, snapshot);
                    }
                    (Outcome::NotFound { key_in_table }, None) => {
                        prop_assert_eq!(*key_in_table, !versions.is_empty(), "{:?} at {}", key, snapshot);
                    }
                    (Outcome::FilterNegative | Outcome::OutOfRange, None) => {
                        prop_assert!(versions.is_empty(), "{:?} ruled out but present", key);
                    }
                    (got, want) => prop_assert!(false, "{:?} at {}: got {:?}, model {:?}", key, snapshot, got, want),
                }
            }
            let mut it = TableIter::new(table.clone(), false);
            it.seek(&key).unwrap();
            let first = it.next().map(|e| e.unwrap()).map(|e| (e.user_key, e.seq));
            let expected = model
                .range((key.clone(), Reverse(u64::MAX))..)
                .next()
                .map(|((k, s), _)| (k.clone(), s.0));
            prop_assert_eq!(first, expected, "seek {:?}", key);
        }
    }
}

/// Decimal keys like the benchmark's, 20,000 in 603 blocks: neighbouring
/// blocks' keys first differ within their first five digits, so the index
/// keeps about five bytes of each 16-byte key and two 4-byte ends a block,
/// no sequence numbers (a block's full last key and 24 bytes, before).
#[test]
fn index_memory_is_separators_plus_eight_bytes_a_block() {
    let mut model = Model::new();
    for i in 0..20_000u64 {
        let k = format!(
            "{:016}",
            i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 10u64.pow(16)
        );
        model.insert(
            (k.into_bytes(), Reverse(i + 1)),
            (EntryKind::Put, vec![7; 100]),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(None, 4096));
    let table = open(&path, false);
    let blocks = table.properties().data_blocks as usize;
    let index = table.memory_bytes();
    assert!(blocks > 500, "{blocks} blocks");
    assert!(
        index <= blocks * (8 + 6),
        "index {index} bytes for {blocks} blocks"
    );
    assert!(
        index >= blocks * (8 + 3),
        "index {index} bytes for {blocks} blocks"
    );
}
