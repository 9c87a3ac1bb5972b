//! `Table::get_in_range` skips the range check `Table::get` makes: inside
//! the range the two answer alike (outcome, filter probe, block read), and
//! outside it the answer is still "nothing here", with `key_in_table`
//! false, never a version of another key.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{EntryKind, Outcome};
use common::{Model, open, options, write_table};

/// Keys with an eight-byte common prefix and short keys differing by
/// trailing zeros, each with several versions (puts and tombstones).
fn model() -> Model {
    let mut keys: Vec<Vec<u8>> = vec![b"b".to_vec(), b"b\0".to_vec(), b"b\0\0".to_vec()];
    keys.extend((0..300u32).map(|i| format!("prefix!!{i:05}").into_bytes()));
    keys.push(b"prefix!!\xff".to_vec());
    let mut m = Model::new();
    let mut seq = 1;
    for (i, k) in keys.iter().enumerate() {
        for v in 0..=(i % 3) {
            let kind = if (i + v) % 4 == 3 {
                EntryKind::Delete
            } else {
                EntryKind::Put
            };
            m.insert(
                (k.clone(), Reverse(seq)),
                (kind, format!("{i}/{v}").into_bytes()),
            );
            seq += 7;
        }
    }
    m
}

#[test]
fn agrees_with_get_inside_the_range_and_finds_nothing_outside() {
    let model = model();
    let max_seq = model.keys().map(|(_, s)| s.0).max().unwrap();
    let smallest = model.keys().next().unwrap().0.clone();
    let largest = model.keys().next_back().unwrap().0.clone();
    let mut probes: Vec<Vec<u8>> = model.keys().map(|(k, _)| k.clone()).collect();
    probes.dedup();
    for k in probes.clone() {
        probes.push([&k[..], b"\0"].concat());
        probes.push(k[..k.len() - 1].to_vec());
    }
    probes.extend([
        b"a".to_vec(),
        b"a\xff\xff".to_vec(),
        b"\0".to_vec(),
        b"prefix!!\xff\0".to_vec(),
        b"prefix!!\xff\xff".to_vec(),
        b"z".to_vec(),
    ]);
    for kind in [None, Some(FilterKind::Blocked), Some(FilterKind::Ribbon)] {
        for block_size in [64, 4096] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.sst");
            write_table(&path, &model, options(kind, block_size));
            // No cache: both calls read the same block from the file.
            let table = open(&path, false);
            for key in &probes {
                let hash = KeyHash::of(key);
                for snapshot in [0, 1, 50, max_seq / 2, max_seq, u64::MAX >> 8] {
                    let got = table.get_in_range(key, hash, snapshot).unwrap();
                    let in_range = smallest <= *key && *key <= largest;
                    let what = format!("{kind:?} block {block_size} key {key:?} at {snapshot}");
                    if in_range {
                        assert_eq!(got, table.get(key, hash, snapshot).unwrap(), "{what}");
                        continue;
                    }
                    match got.outcome {
                        Outcome::FilterNegative
                        | Outcome::NotFound {
                            key_in_table: false,
                        } => {}
                        other => panic!("{what}: outside the range, {other:?}"),
                    }
                }
            }
        }
    }
}
