//! Opening a table decodes its whole index into memory. Crafted version 2
//! indexes that a checksum cannot catch, each the worst of its shape for
//! the bytes it takes, must open (or be refused) holding at most a small
//! multiple of the file's size at once: one long separator repeated by
//! entries of a few bytes (bounded by `IndexKeysPastData`: the separators
//! together never pass the bytes before the index), and the most entries
//! a file can hold (about 11 bytes a block: a 6-byte entry, a 5-byte
//! trailer). Measured with a counting allocator (one test: nothing else
//! in this binary allocates meanwhile): 2.0x, 2.4x and 3.3x the file's
//! size when written; the bound asserted is 4x.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::sync::Arc;

use bloomlsm_filter::fuzzing::CountingAlloc;
use bloomlsm_sstable::format::{TRAILER_LEN, block_trailer};
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{
    BlockError, BlockHandle, BlockKind, CorruptionReason, Error, Footer, Table, TableProperties,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A version 2 index entry.
fn entry(out: &mut Vec<u8>, shared: u64, delta: &[u8], seq: u64, size: u64) {
    varint(out, shared);
    varint(out, delta.len() as u64);
    out.extend_from_slice(delta);
    varint(out, seq);
    varint(out, size);
}

/// A version 2 table: `data_end` zero bytes of data (never read at the
/// open), the index block `index` naming `blocks` blocks that end there,
/// properties that agree, a footer.
fn table(index: &[u8], blocks: u64, data_end: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; data_end as usize];
    let push = |bytes: &mut Vec<u8>, kind: BlockKind, block: &[u8]| {
        let handle = BlockHandle {
            offset: bytes.len() as u64,
            size: block.len() as u64,
        };
        bytes.extend_from_slice(block);
        bytes.extend_from_slice(&block_trailer(kind, block));
        handle
    };
    let index = push(&mut bytes, BlockKind::Index, index);
    let properties = TableProperties {
        entries: blocks,
        data_blocks: blocks,
        data_bytes: data_end,
        ..common::properties::unfiltered()
    };
    let properties = push(&mut bytes, BlockKind::Properties, &properties.encode());
    let footer = Footer {
        filter: BlockHandle { offset: 0, size: 0 },
        index,
        properties,
        version: 2,
    };
    bytes.extend_from_slice(&footer.encode());
    bytes
}

/// One `long`-byte separator, then `repeats` entries naming it again (a
/// lower sequence each) in 13 bytes, each block `block` bytes.
fn long_key_repeated(long: usize, repeats: u64, block: u64) -> (Vec<u8>, u64, u64) {
    let mut index = Vec::new();
    let seq = 1 << 55;
    entry(&mut index, 0, &vec![b'k'; long], seq, block);
    for i in 1..=repeats {
        entry(&mut index, long as u64, &[], seq - i, block);
    }
    (
        index,
        repeats + 1,
        (repeats + 1) * (block + TRAILER_LEN as u64),
    )
}

/// `n` entries of two-byte separators (big-endian 0, 1, 2, ...) over
/// empty blocks: 6 bytes an entry.
fn most_entries(n: u64) -> (Vec<u8>, u64, u64) {
    let mut index = Vec::new();
    for i in 0..n {
        entry(&mut index, 0, &(i as u16).to_be_bytes(), 0, 0);
    }
    (index, n, n * TRAILER_LEN as u64)
}

/// The most bytes live at once during the open of `bytes`, and the open.
fn open_peak(bytes: Vec<u8>) -> (usize, bloomlsm_sstable::Result<Table>) {
    let file = Arc::new(MemFile(bytes));
    let base = CountingAlloc::start();
    let table = Table::open(file, "t.sst", 1, None);
    (CountingAlloc::peak_since(base), table)
}

#[test]
fn crafted_indexes_open_within_a_small_multiple_of_the_file() {
    // (what, index, blocks, data end, opens).
    let cases = [
        // Separators of 60,000 bytes over blocks as long: 60 MB of keys
        // from a 50 KB index, within the data region.
        (
            "long key over long blocks",
            long_key_repeated(60_000, 999, 60_000),
            true,
        ),
        // The same separators over empty blocks: refused once they pass
        // the bytes before the index.
        (
            "long key over empty blocks",
            long_key_repeated(60_000, 5_000, 0),
            false,
        ),
        ("most entries", most_entries(65_536), true),
    ];
    for (what, (index, blocks, data_end), opens) in cases {
        let bytes = table(&index, blocks, data_end);
        let size = bytes.len();
        let (peak, table) = open_peak(bytes);
        match table {
            Ok(t) => {
                assert!(opens, "{what}: opened");
                assert_eq!(t.data_block_count() as u64, blocks, "{what}");
            }
            Err(Error::Corruption {
                kind: BlockKind::Index,
                reason,
                ..
            }) => {
                assert!(!opens, "{what}: {reason}");
                assert!(
                    matches!(
                        reason,
                        CorruptionReason::Block(BlockError::IndexKeysPastData { .. })
                    ),
                    "{what}: {reason}"
                );
            }
            Err(other) => panic!("{what}: {other}"),
        }
        println!(
            "{what}: file {size} bytes, peak {peak} ({:.2}x)",
            peak as f64 / size as f64
        );
        assert!(
            peak <= 4 * size,
            "{what}: the open held {peak} bytes at once for a file of {size}"
        );
    }
}
