//! Tables read back exactly what was written, by get and by scan, with and
//! without a cache, at several block sizes, for every filter setting.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;
use std::collections::BTreeMap;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{EntryKind, FilterStatus, FilterVerdict, Outcome, TableIter};
use common::{Model, open, options, write_table};
use proptest::prelude::*;

fn entries() -> impl Strategy<Value = Model> {
    let key = proptest::collection::vec(any::<u8>(), 1..12);
    let versions = proptest::collection::vec(
        (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..40)),
        1..4,
    );
    proptest::collection::btree_map(key, versions, 1..150).prop_map(|m| {
        let mut seq = 1u64;
        let mut model = BTreeMap::new();
        for (k, vs) in m {
            for (is_put, v) in vs {
                let (kind, value) = if is_put {
                    (EntryKind::Put, v)
                } else {
                    (EntryKind::Delete, Vec::new())
                };
                model.insert((k.clone(), Reverse(seq)), (kind, value));
                seq += 1;
            }
        }
        model
    })
}

/// The newest version of `key` with seq <= snapshot in the model.
fn model_get(model: &Model, key: &[u8], snapshot: u64) -> Option<(u64, Option<Vec<u8>>)> {
    model
        .range((key.to_vec(), Reverse(snapshot))..)
        .next()
        .filter(|((k, _), _)| k == key)
        .map(|((_, s), (kind, v))| (s.0, (*kind == EntryKind::Put).then(|| v.clone())))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn get_and_scan_match_the_model(
        model in entries(),
        filter in prop_oneof![Just(None), Just(Some(FilterKind::Standard)), Just(Some(FilterKind::Blocked)), Just(Some(FilterKind::Ribbon))],
        block_size in prop_oneof![Just(64usize), Just(256), Just(4096)],
        cached in any::<bool>(),
        probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..12), 0..30),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let summary = write_table(&path, &model, options(filter, block_size));
        prop_assert_eq!(summary.properties.entries, model.len() as u64);
        let table = open(&path, cached);
        let status = table.filter_status();
        if filter.is_some() {
            prop_assert!(matches!(status, FilterStatus::Loaded), "{status:?}");
        } else {
            prop_assert!(matches!(status, FilterStatus::Absent), "{status:?}");
        }

        // Scan equals the model, in order.
        let scanned: Vec<_> = TableIter::new(table.clone(), true).map(|e| e.unwrap()).collect();
        let expected: Vec<_> = model.iter().map(|((k, s), (kind, v))| (k.clone(), s.0, *kind, v.clone())).collect();
        let got: Vec<_> = scanned.into_iter().map(|e| (e.user_key, e.seq, e.kind, e.value)).collect();
        prop_assert_eq!(got, expected);

        // Every written key, at every snapshot, and random probes.
        let max_seq = model.keys().map(|(_, s)| s.0).max().unwrap_or(0);
        let keys: Vec<Vec<u8>> = model.keys().map(|(k, _)| k.clone()).chain(probes).collect();
        for key in &keys {
            for snapshot in [max_seq, max_seq / 2, 1, 0] {
                let lookup = table.get(key, KeyHash::of(key), snapshot).unwrap();
                let got = match lookup.outcome.clone() {
                    Outcome::Found { seq, value } => Some((seq, value)),
                    _ => None,
                };
                prop_assert_eq!(got, model_get(&model, key, snapshot), "key {:?} at {}", key, snapshot);
                let present = model.keys().any(|(k, _)| k == key);
                if present {
                    prop_assert!(lookup.verdict() != FilterVerdict::Negative, "false negative for {:?}", key);
                    prop_assert!(lookup.verdict() != FilterVerdict::FalsePositive);
                }
            }
        }

        // Seek lands on the first key >= the target.
        for key in &keys {
            let mut it = TableIter::new(table.clone(), false);
            it.seek(key).unwrap();
            let first = it.next().map(|e| e.unwrap().user_key);
            let expected = model.keys().map(|(k, _)| k).find(|k| k.as_slice() >= key.as_slice()).cloned();
            prop_assert_eq!(first, expected);
        }
    }
}

#[test]
fn rebuilt_filter_keeps_data_and_changes_bits_per_key() {
    use bloomlsm_filter::Filter;
    let model = common::simple_model(3000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(Some(FilterKind::Blocked), 4096));
    let table = open(&path, false);
    let out = dir.path().join("t2.sst");
    let summary = bloomlsm_sstable::rebuild_filter(
        &table,
        std::fs::File::create(&out).unwrap(),
        &out,
        FilterKind::Standard,
        16.0,
    )
    .unwrap();
    assert_eq!(summary.file_size, std::fs::metadata(&out).unwrap().len());
    let rebuilt = open(&out, false);
    let f = rebuilt.filter().unwrap();
    assert_eq!(f.kind(), FilterKind::Standard);
    assert_eq!(f.len(), 3000);
    assert!((f.bits_per_key() - 16.0).abs() < 0.1);
    // Data blocks are byte-identical.
    let (a, b) = (std::fs::read(&path).unwrap(), std::fs::read(&out).unwrap());
    let data_end = table.footer().filter.offset as usize;
    assert_eq!(a[..data_end], b[..data_end]);
    for ((key, _), (_, value)) in &model {
        let l = rebuilt.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
        assert!(
            matches!(l.outcome, Outcome::Found { value: Some(ref v), .. } if v == value),
            "{key:?}"
        );
    }
}
