//! A table's open copies the properties block's smallest and largest keys
//! out of the block it read. Each key's length is recorded in the block,
//! which may be as large as memory admits once (a key as long as the
//! writer's `max_key_bytes` allows, or a crafted block over a sparse
//! file): the copies must be reserved fallibly, and a refusal must fail
//! the open with an `OutOfMemory` I/O error naming the properties block,
//! not abort the process.
//!
//! Modelled with a global allocator that, once armed, refuses an
//! allocation of [`one_large::LARGE`] bytes or more while another one is
//! live: here the properties block's buffer is live while its 2 MiB
//! smallest key is copied.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;
mod one_large;

use std::sync::atomic::Ordering;

use bloomlsm_sstable::{BlockKind, EntryKind, Table, TableBuilder, TableOptions};
use one_large::{ARMED, LARGE, LIVE_LARGE};

#[test]
fn properties_keys_larger_than_memory_admits_twice_fail_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let key = vec![b'k'; 2 * LARGE];
    let options = TableOptions {
        bits_per_key: 0.0,
        max_key_bytes: 4 * LARGE,
        ..TableOptions::default()
    };
    let file = std::fs::File::create(&path).unwrap();
    let mut b = TableBuilder::new(std::io::BufWriter::new(file), &path, options);
    b.add(&key, 1, EntryKind::Put, b"v").unwrap();
    b.finish().unwrap();
    drop(key);
    let footer = *Table::open_path(&path, 1, None).unwrap().footer();

    assert_eq!(LIVE_LARGE.load(Ordering::SeqCst), 0);
    ARMED.store(true, Ordering::SeqCst);
    let opened = Table::open_path(&path, 1, None);
    ARMED.store(false, Ordering::SeqCst);

    let (kind, offset, message) = common::refused_block(opened);
    assert_eq!(
        (kind, offset),
        (BlockKind::Properties, footer.properties.offset)
    );
    assert!(message.contains("smallest key"), "{message}");
    println!("{message}");
}
