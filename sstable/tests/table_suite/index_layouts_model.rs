//! Every index a reader meets, against one model: format version 1 and 2
//! as this build writes them (shortened separators), and version 1 as
//! builds before shortened separators wrote it (each block's LAST INTERNAL
//! KEY, its real kind byte included, so a block ending on a tombstone has
//! kind 0 in its index key), rebuilt here from the data blocks of the
//! table this build wrote (FORMAT.md, "Index block": "every rule above
//! reads them unchanged"; the stores of those builds still open).
//!
//! Keys are stems (`0xff` x 9, `abcdefgh`, `0x00 0x00`, `a`) plus up to
//! three bytes of `0x00 0x01 a 0xfe 0xff`: prefixes of each other, `0xff`
//! runs past eight bytes where no shorter successor exists, keys one
//! `0x00` apart. Each key has 1 to 19 versions at sequences drawn from
//! 0..60 and the top of the 56-bit range (shared between keys), so in
//! blocks of one entry to 4 KiB a key's versions span several blocks, and
//! in 4 KiB blocks several restart points. Every key, every key one byte
//! longer or shorter, at each of its versions' sequences and beside them:
//! `get` and `get_in_range` answer the model's version, a miss says
//! exactly whether newer versions exist, and a seek yields the rest of the
//! table.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::Arc;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::format::{FOOTER_LEN, TRAILER_LEN, block_trailer};
use bloomlsm_sstable::fuzzing::{MemFile, blocks};
use bloomlsm_sstable::{
    BlockHandle, BlockKind, EntryKind, Footer, MAX_SEQUENCE, Table, TableOptions, decode_block,
};
use common::model_check::check_against_model;
use common::{Model, options, write_table};
use proptest::prelude::*;

const STEMS: [&[u8]; 5] = [
    b"",
    b"a",
    b"\x00\x00",
    b"abcdefgh",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
];
const TAIL: [u8; 5] = [0x00, 0x01, b'a', 0xfe, 0xff];

fn key() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(&STEMS[..]),
        proptest::collection::vec(proptest::sample::select(&TAIL[..]), 0..4),
    )
        .prop_map(|(stem, tail)| [stem, tail.as_slice()].concat())
        .prop_filter("keys are not empty", |k| !k.is_empty())
}

fn seq() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..60,
        1 => Just(0u64),
        1 => (MAX_SEQUENCE - 3)..=MAX_SEQUENCE,
    ]
}

fn model() -> impl Strategy<Value = Model> {
    let versions = proptest::collection::btree_map(seq(), (any::<bool>(), 0usize..80), 1..20);
    proptest::collection::btree_map(key(), versions, 1..16).prop_map(|keys| {
        let mut model = Model::new();
        for (k, versions) in keys {
            for (seq, (delete, pad)) in versions {
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

/// Appends `v` as an unsigned LEB128 varint (FORMAT.md).
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `table` (a version 1 table this build wrote) with its index block
/// replaced by the one builds before shortened separators wrote: a data
/// block with a restart at every entry, key = the block's last internal
/// key as stored, value = its 16-byte handle. Filter and properties are
/// kept; the footer names the new index.
fn with_last_key_index(table: &[u8]) -> Vec<u8> {
    let footer_at = table.len() - FOOTER_LEN;
    let footer = Footer::decode(&table[footer_at..]).unwrap();
    assert_eq!(footer.version, 1);
    let data: Vec<BlockHandle> = blocks(table)
        .into_iter()
        .filter(|(kind, _)| *kind == BlockKind::Data)
        .map(|(_, h)| h)
        .collect();
    let mut index = Vec::new();
    let mut restarts = Vec::new();
    for h in &data {
        let bytes = &table[h.offset as usize..(h.offset + h.size) as usize];
        let (last_key, _) = decode_block(bytes).unwrap().pop().unwrap();
        restarts.push(index.len() as u32);
        varint(&mut index, 0);
        varint(&mut index, last_key.len() as u64);
        varint(&mut index, 16);
        index.extend_from_slice(&last_key);
        h.encode_to(&mut index);
    }
    for r in &restarts {
        index.extend_from_slice(&r.to_le_bytes());
    }
    index.extend_from_slice(&(restarts.len() as u32).to_le_bytes());

    let data_end = data.last().map_or(0, |h| h.offset + h.size) as usize + TRAILER_LEN;
    let mut out = table[..data_end].to_vec();
    let copy = |out: &mut Vec<u8>, h: BlockHandle| {
        let at = out.len() as u64;
        let end = (h.offset + h.size) as usize + TRAILER_LEN;
        out.extend_from_slice(&table[h.offset as usize..end]);
        BlockHandle {
            offset: at,
            size: h.size,
        }
    };
    let filter = if footer.filter.is_null() {
        footer.filter
    } else {
        copy(&mut out, footer.filter)
    };
    let index_handle = BlockHandle {
        offset: out.len() as u64,
        size: index.len() as u64,
    };
    out.extend_from_slice(&index);
    out.extend_from_slice(&block_trailer(BlockKind::Index, &index));
    let properties = copy(&mut out, footer.properties);
    let footer = Footer {
        filter,
        index: index_handle,
        properties,
        version: 1,
    };
    out.extend_from_slice(&footer.encode());
    out
}

/// Every key, one byte longer (`0x00`, `0xff`) and one byte shorter, and
/// the stems.
fn probes(model: &Model) -> Vec<Vec<u8>> {
    let mut out: BTreeSet<Vec<u8>> = STEMS
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.to_vec())
        .collect();
    for (k, _) in model.keys() {
        out.insert(k.clone());
        out.insert([k.as_slice(), &[0x00]].concat());
        out.insert([k.as_slice(), &[0xff]].concat());
        if k.len() > 1 {
            out.insert(k[..k.len() - 1].to_vec());
        }
    }
    out.into_iter().collect()
}

/// The sequences `key` is read at: each of its versions' and the two
/// beside it, 0, and past every sequence.
fn snapshots(model: &Model, key: &[u8]) -> BTreeSet<u64> {
    let mut out: BTreeSet<u64> = [0, 1, MAX_SEQUENCE, MAX_SEQUENCE + 1, u64::MAX].into();
    for ((_, s), _) in model
        .range((key.to_vec(), Reverse(u64::MAX))..)
        .take_while(|((k, _), _)| k.as_slice() == key)
    {
        out.extend([s.0.saturating_sub(1), s.0, s.0 + 1]);
    }
    out
}

fn check(layout: &str, table: &Arc<Table>, model: &Model) -> Result<(), TestCaseError> {
    check_against_model(layout, table, model, probes(model), |key| {
        snapshots(model, key)
    })
}

fn open(bytes: Vec<u8>) -> Arc<Table> {
    Arc::new(Table::open(Arc::new(MemFile(bytes)), "t.sst", 1, None).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_index_layout_reads_the_model(
        model in model(),
        block_size in prop_oneof![Just(1usize), Just(40), Just(120), Just(400), Just(4096)],
        filter in prop_oneof![Just(None), Just(Some(FilterKind::Blocked))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        for version in [1, 2] {
            let path = dir.path().join(format!("v{version}.sst"));
            let options = TableOptions { format_version: version, ..options(filter, block_size) };
            write_table(&path, &model, options);
            written.push(std::fs::read(&path).unwrap());
        }
        let last_keys = with_last_key_index(&written[0]);
        check("v1", &open(written[0].clone()), &model)?;
        check("v2", &open(written[1].clone()), &model)?;
        check("v1 last-key index", &open(last_keys), &model)?;
    }
}
