//! Index separators at the ends of the sequence range (FORMAT.md, "Index
//! block"): a separator's sequence 0 must sort after every version of its
//! user key, including a real entry with sequence 0 (which the sstable
//! crate accepts from any writer), and an exact separator must split a
//! key's versions right up to `MAX_SEQUENCE`. Keys over `0x00`, `0x01`,
//! `a`, `0xfe`, `0xff` (prefixes of each other, neighbours by one byte),
//! each with some of the sequences 0, 1, 2, 3 and the four below and at
//! `MAX_SEQUENCE`, in blocks of one entry up to 4 KiB. Every key, every
//! key one byte longer or shorter, at every snapshot beside those
//! sequences: `get` and `get_in_range` give the model's version, a miss
//! says exactly whether newer versions exist (the stats' true against
//! false positive), and a seek yields the rest of the table; the same
//! after a filter rebuild, which copies the index block verbatim.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;
use std::sync::Arc;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::{EntryKind, MAX_SEQUENCE, Table};
use common::model_check::check_against_model;
use common::{Model, open, options, write_table};
use proptest::prelude::*;

const ALPHABET: [u8; 5] = [0x00, 0x01, b'a', 0xfe, 0xff];
const SEQS: [u64; 8] = [
    0,
    1,
    2,
    3,
    MAX_SEQUENCE - 3,
    MAX_SEQUENCE - 2,
    MAX_SEQUENCE - 1,
    MAX_SEQUENCE,
];

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::sample::select(&ALPHABET[..]), 1..5)
}

/// Keys with 1 to 8 of `SEQS` each, some versions tombstones, values of
/// 0 to 60 padding bytes (so blocks cut at different entries).
fn model() -> impl Strategy<Value = Model> {
    let versions = (
        proptest::sample::subsequence(SEQS.to_vec(), 1..=SEQS.len()),
        proptest::collection::vec((any::<bool>(), 0usize..60), SEQS.len()),
    );
    proptest::collection::btree_map(key(), versions, 1..25).prop_map(|keys| {
        let mut model = Model::new();
        for (k, (seqs, shapes)) in keys {
            for (seq, (delete, pad)) in seqs.into_iter().zip(shapes) {
                let (kind, value) = if delete {
                    (EntryKind::Delete, Vec::new())
                } else {
                    let mut v = format!("{k:?}@{seq}").into_bytes();
                    v.resize(v.len() + pad, b'.');
                    (EntryKind::Put, v)
                };
                model.insert((k.clone(), Reverse(seq)), (kind, value));
            }
        }
        model
    })
}

/// Every key, one byte longer (`0x00`, `a`, `0xff`) and one shorter, and
/// the one- and two-byte keys of the alphabet.
fn probes(model: &Model) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (k, _) in model.keys() {
        out.push(k.clone());
        for b in [0x00, b'a', 0xff] {
            out.push([k.as_slice(), &[b]].concat());
        }
        if k.len() > 1 {
            out.push(k[..k.len() - 1].to_vec());
        }
    }
    for &b in &ALPHABET {
        out.push(vec![b]);
        out.push(vec![b, b]);
    }
    out.sort();
    out.dedup();
    out
}

/// Each of `SEQS` and its neighbours.
fn snapshots() -> Vec<u64> {
    let mut out: Vec<u64> = SEQS
        .iter()
        .flat_map(|&s| [s.saturating_sub(1), s, s + 1])
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn check(table: &Arc<Table>, model: &Model) -> Result<(), TestCaseError> {
    let snapshots = snapshots();
    check_against_model("", table, model, probes(model), |_| snapshots.clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn sequence_zero_and_max_sequence_versions_read_at_every_snapshot(
        model in model(),
        block_size in prop_oneof![Just(1usize), Just(30), Just(60), Just(120), Just(4096)],
        filter in prop_oneof![Just(None), Just(Some(FilterKind::Blocked))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        write_table(&path, &model, options(filter, block_size));
        let table = open(&path, false);
        check(&table, &model)?;
        let rebuilt_path = dir.path().join("r.sst");
        let file = std::io::BufWriter::new(std::fs::File::create(&rebuilt_path).unwrap());
        bloomlsm_sstable::rebuild_filter(&table, file, &rebuilt_path, FilterKind::Ribbon, 4.0).unwrap();
        check(&open(&rebuilt_path, true), &model)?;
    }
}
