//! A few user keys with many versions each, in blocks far smaller than an
//! entry (so nearly every version of a key sits in a block of its own and
//! a key's versions span many blocks, the last block of the table often
//! holding one version of a key whose newer ones are in the blocks before),
//! with keys that are prefixes of each other and `0x00`/`0xff` bytes:
//!
//! - a point get of every key and of keys beside it at EVERY sequence
//!   number from 0 to past the newest, through `get` and `get_in_range`,
//!   with and without a cache and a filter;
//! - a seek to every key and every key beside it, then the whole rest of
//!   the table, compared entry by entry, and a second seek on the same
//!   cursor after reading part of the stream;
//! - the same after a filter rebuild (data blocks copied).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;
use std::sync::Arc;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{EntryKind, Outcome, Table, TableIter};
use common::{Model, open, write_table};
use proptest::prelude::*;

/// Key shapes: prefixes of one another, zero and 0xff bytes, eight-byte
/// common prefixes.
const SHAPES: &[&[u8]] = &[
    b"\x00",
    b"\x00\x00",
    b"a",
    b"a\x00",
    b"a\x00\x00",
    b"a\xff",
    b"ab",
    b"abcdefgh",
    b"abcdefgh\x00",
    b"abcdefghi",
    b"abcdefgi",
    b"\xff",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\x00",
];

fn model() -> impl Strategy<Value = Model> {
    let versions = proptest::collection::vec((0u8..4, 0usize..300), 1..14);
    (
        proptest::sample::subsequence(SHAPES.to_vec(), 1..6),
        proptest::collection::vec(versions, 6),
        1u64..5,
    )
        .prop_map(|(keys, versions, stride)| {
            // Sequence numbers interleave across keys, as a store's do.
            let mut model = Model::new();
            let mut seq = 1u64;
            let mut cursors: Vec<(usize, &Vec<(u8, usize)>)> = keys
                .iter()
                .enumerate()
                .map(|(i, _)| (0, &versions[i]))
                .collect();
            let mut live = true;
            while live {
                live = false;
                for (i, (at, vs)) in cursors.iter_mut().enumerate() {
                    if let Some(&(kind, len)) = vs.get(*at) {
                        live = true;
                        *at += 1;
                        let (kind, value) = if kind == 0 {
                            (EntryKind::Delete, Vec::new())
                        } else {
                            let mut v = format!("{seq}:").into_bytes();
                            v.resize(len.max(v.len()), b'.');
                            (EntryKind::Put, v)
                        };
                        model.insert((keys[i].to_vec(), Reverse(seq)), (kind, value));
                        seq += stride;
                    }
                }
            }
            model
        })
}

fn model_get(model: &Model, key: &[u8], snapshot: u64) -> Option<(u64, Option<Vec<u8>>)> {
    model
        .range((key.to_vec(), Reverse(snapshot))..)
        .next()
        .filter(|((k, _), _)| k == key)
        .map(|((_, s), (kind, v))| (s.0, (*kind == EntryKind::Put).then(|| v.clone())))
}

fn beside(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = SHAPES.iter().map(|k| k.to_vec()).collect();
    for k in keys {
        out.push([k.as_slice(), &[0]].concat());
        out.push([k.as_slice(), &[0xff]].concat());
        out.push(k[..k.len() - 1].to_vec());
    }
    out.sort();
    out.dedup();
    out
}

type Flat = Vec<(Vec<u8>, u64, EntryKind, Vec<u8>)>;

fn flat(model: &Model, from: &[u8]) -> Flat {
    model
        .iter()
        .filter(|((k, _), _)| k.as_slice() >= from)
        .map(|((k, s), (kind, v))| (k.clone(), s.0, *kind, v.clone()))
        .collect()
}

fn collect(it: &mut TableIter, n: Option<usize>) -> Flat {
    let mut out = Vec::new();
    while n.is_none_or(|n| out.len() < n) {
        match it.next() {
            Some(e) => {
                let e = e.unwrap();
                out.push((e.user_key, e.seq, e.kind, e.value));
            }
            None => break,
        }
    }
    out
}

fn check(table: &Arc<Table>, model: &Model) -> Result<(), TestCaseError> {
    let keys: Vec<Vec<u8>> = model.keys().map(|(k, _)| k.clone()).collect();
    let max_seq = model.keys().map(|(_, s)| s.0).max().unwrap();
    for key in beside(&keys) {
        let hash = KeyHash::of(&key);
        let in_range =
            key.as_slice() >= table.smallest_key() && key.as_slice() <= table.largest_key();
        for snapshot in 0..=max_seq + 1 {
            let want = model_get(model, &key, snapshot);
            let found = |o: Outcome| match o {
                Outcome::Found { seq, value } => Some((seq, value)),
                _ => None,
            };
            let got = found(table.get(&key, hash, snapshot).unwrap().outcome);
            prop_assert_eq!(&got, &want, "get {:?} at {}", key, snapshot);
            if in_range {
                let got = found(table.get_in_range(&key, hash, snapshot).unwrap().outcome);
                prop_assert_eq!(&got, &want, "get_in_range {:?} at {}", key, snapshot);
            }
        }
        for fill_cache in [true, false] {
            let mut it = TableIter::new(Arc::clone(table), fill_cache);
            it.seek(&key).unwrap();
            prop_assert_eq!(collect(&mut it, None), flat(model, &key), "seek {:?}", key);
            // Seek again on a cursor part way through the stream.
            let mut it = TableIter::new(Arc::clone(table), fill_cache);
            let _ = collect(&mut it, Some(3));
            it.seek(&key).unwrap();
            let head = collect(&mut it, Some(2));
            prop_assert_eq!(
                head.as_slice(),
                &flat(model, &key)[..head.len()],
                "re-seek {:?}",
                key
            );
            prop_assert_eq!(head.len(), flat(model, &key).len().min(2));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_version_at_every_sequence_and_every_seek(
        model in model(),
        block_size in prop_oneof![Just(1usize), Just(40), Just(64), Just(200), Just(1024)],
        filter in prop_oneof![Just(None), Just(Some(FilterKind::Blocked)), Just(Some(FilterKind::Ribbon))],
        cached in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let options = common::options(filter, block_size);
        write_table(&path, &model, options);
        let table = open(&path, cached);
        check(&table, &model)?;
        // A rebuilt table (data blocks copied, a new filter) reads the same.
        let rebuilt_path = dir.path().join("r.sst");
        let file = std::io::BufWriter::new(std::fs::File::create(&rebuilt_path).unwrap());
        bloomlsm_sstable::rebuild_filter(&table, file, &rebuilt_path, FilterKind::Blocked, 3.0).unwrap();
        let rebuilt = open(&rebuilt_path, cached);
        check(&rebuilt, &model)?;
    }
}
