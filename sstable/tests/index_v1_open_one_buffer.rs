//! A table's open decodes a version 1 index (a data block's layout)
//! through a block cursor that rebuilds each key in a buffer of its own.
//! A key's length is recorded in the block, up to the block's own, and
//! the block's buffer is live meanwhile: the key buffer (and the decoded
//! separators) must be reserved fallibly, and a refusal must fail the
//! open with an `OutOfMemory` I/O error naming the index block, not abort
//! the process.
//!
//! Modelled with a global allocator that, once armed, refuses an
//! allocation of [`one_large::LARGE`] bytes or more while another one is
//! live: here a crafted version 1 table (every checksum valid) whose one
//! separator is 2 MiB long, its properties' keys short.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;
mod one_large;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_sstable::format::{TRAILER_LEN, block_trailer};
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{BlockHandle, BlockKind, Footer, Table, TableProperties};
use one_large::{ARMED, LARGE, LIVE_LARGE};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A version 1 table: one empty data block at offset 0, an index naming
/// it with the separator `user_key` (sequence 0), properties that agree;
/// and the index block's offset.
fn v1_table(user_key: &[u8]) -> (Vec<u8>, u64) {
    let mut bytes = block_trailer(BlockKind::Data, &[]).to_vec();
    let mut index = Vec::new();
    let key_len = user_key.len() + 8;
    varint(&mut index, 0); // shared
    varint(&mut index, key_len as u64);
    varint(&mut index, 16); // a handle
    index.extend_from_slice(user_key);
    index.extend_from_slice(&1u64.to_le_bytes()); // sequence 0, kind 1
    BlockHandle { offset: 0, size: 0 }.encode_to(&mut index);
    index.extend_from_slice(&0u32.to_le_bytes()); // restart 0
    index.extend_from_slice(&1u32.to_le_bytes()); // one restart
    let push = |bytes: &mut Vec<u8>, kind: BlockKind, block: &[u8]| {
        let handle = BlockHandle {
            offset: bytes.len() as u64,
            size: block.len() as u64,
        };
        bytes.extend_from_slice(block);
        bytes.extend_from_slice(&block_trailer(kind, block));
        handle
    };
    let properties = TableProperties {
        data_bytes: TRAILER_LEN as u64,
        smallest_key: b"k".to_vec(),
        largest_key: b"k".to_vec(),
        ..common::properties::unfiltered()
    };
    let index = push(&mut bytes, BlockKind::Index, &index);
    let properties = push(&mut bytes, BlockKind::Properties, &properties.encode());
    let footer = Footer {
        filter: BlockHandle { offset: 0, size: 0 },
        index,
        properties,
        version: 1,
    };
    bytes.extend_from_slice(&footer.encode());
    (bytes, index.offset)
}

#[test]
fn a_version_1_index_key_larger_than_memory_admits_twice_fails_the_open() {
    // Unarmed, a short separator opens: the crafted layout is valid.
    let (small, _) = v1_table(b"k");
    let table = Table::open(Arc::new(MemFile(small)), "t.sst", 1, None).unwrap();
    assert_eq!(table.data_block_count(), 1);
    drop(table);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let (bytes, index_at) = v1_table(&vec![b'k'; 2 * LARGE]);
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(LIVE_LARGE.load(Ordering::SeqCst), 0);
    ARMED.store(true, Ordering::SeqCst);
    let opened = Table::open_path(&path, 1, None);
    ARMED.store(false, Ordering::SeqCst);

    let (kind, offset, message) = common::refused_block(opened);
    assert_eq!((kind, offset), (BlockKind::Index, index_at));
    println!("{message}");
}
