//! A data block's keys are prefix-compressed against the previous key,
//! and every 16th entry (`RESTART_INTERVAL`) is a restart that stores its
//! key whole. With restarts that far apart at most, the keys a block
//! yields hold at most 16 times the block's bytes (each key is no longer
//! than its group's bytes from its restart on). A crafted block with one
//! restart and a long first key, followed by entries that share all of it
//! in 13 bytes each, yields that key again per entry: here 2.9 GB of
//! keys from a 0.7 MB table, a scan or compaction quadratic in the block's
//! size and a get that compares the long key once per entry.
//!
//! The reader must refuse an entry past the 16th since a restart (and a
//! restart entry that shares a prefix) as corruption naming the file,
//! the data block and the entry, before the keys it yields pass 16 times
//! the table's size.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::format::block_trailer;
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{BlockKind, Error, Table, TableIter};

/// Length of the long user key the crafted entries share.
const LONG: usize = 60_000;

/// The long user key: "kaaa...", before the table's separator
/// ("key00029999"), so a get of it reads the block.
fn long_key() -> Vec<u8> {
    let mut key = vec![b'a'; LONG];
    key[0] = b'k';
    key
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_tag(out: &mut Vec<u8>, seq: u64) {
    out.extend_from_slice(&((seq << 8) | 1).to_le_bytes());
}

/// A block of exactly `size` bytes: one restart (offset 0), a first entry
/// with a `LONG`-byte user key, then entries sharing that whole user key
/// with a new tag (descending sequence numbers), the last one's value
/// padding the entries to fill the block.
fn one_restart_block(size: usize) -> Vec<u8> {
    let entries_len = size - 8;
    let mut out = Vec::with_capacity(size);
    out.push(0);
    varint(&mut out, (LONG + 8) as u64);
    out.push(0);
    out.extend_from_slice(&long_key());
    let mut seq = 1 << 40;
    put_tag(&mut out, seq);
    let mut shared = Vec::new();
    varint(&mut shared, LONG as u64);
    let entry_len = shared.len() + 2 + 8;
    // Room left for a last entry with a value of up to 3 varint bytes.
    while entries_len - out.len() >= 2 * entry_len + 2 {
        seq -= 1;
        out.extend_from_slice(&shared);
        out.extend_from_slice(&[8, 0]);
        put_tag(&mut out, seq);
    }
    let rest = entries_len - out.len();
    let value_len = (1..=3)
        .find_map(|n| {
            let v = rest.checked_sub(shared.len() + 1 + n + 8)?;
            let mut enc = Vec::new();
            varint(&mut enc, v as u64);
            (enc.len() == n).then_some(v)
        })
        .unwrap();
    seq -= 1;
    out.extend_from_slice(&shared);
    out.push(8);
    varint(&mut out, value_len as u64);
    put_tag(&mut out, seq);
    out.extend(std::iter::repeat_n(b'v', value_len));
    assert_eq!(out.len(), entries_len);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out
}

/// A valid table of one data block, that block replaced by the crafted
/// one of the same size (fresh trailer): index, properties and footer
/// still agree with it.
fn crafted_table(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join("t.sst");
    common::write_table(
        &path,
        &common::simple_model(30_000),
        common::options(None, 1 << 20),
    );
    let mut bytes = std::fs::read(&path).unwrap();
    let table = Table::open(Arc::new(MemFile(bytes.clone())), &path, 1, None).unwrap();
    assert_eq!(table.data_block_count(), 1);
    let size = table.properties().data_bytes as usize - 5;
    let block = one_restart_block(size);
    bytes[..size].copy_from_slice(&block);
    let trailer = block_trailer(BlockKind::Data, &block);
    bytes[size..size + trailer.len()].copy_from_slice(&trailer);
    (path, bytes)
}

fn assert_names_the_data_block(e: &Error, path: &std::path::Path) {
    match e {
        Error::Corruption {
            path: p,
            kind: BlockKind::Data,
            offset: 0,
            ..
        } if p == path => {}
        other => panic!("not a corruption of the data block at 0: {other}"),
    }
}

#[test]
fn a_scan_yields_at_most_sixteen_times_the_table_in_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = crafted_table(dir.path());
    let file_size = bytes.len() as u64;
    let table = Arc::new(Table::open(Arc::new(MemFile(bytes)), &path, 1, None).unwrap());
    let mut it = TableIter::new(table, false);
    let mut key_bytes = 0u64;
    let end = loop {
        match it.advance() {
            Ok(true) => key_bytes += it.user_key().len() as u64,
            other => break other,
        }
    };
    assert!(
        key_bytes <= 16 * file_size,
        "{key_bytes} bytes of keys from a table of {file_size} bytes"
    );
    assert_names_the_data_block(&end.unwrap_err(), &path);
}

#[test]
fn a_get_is_refused_within_a_restart_group() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = crafted_table(dir.path());
    let table = Table::open(Arc::new(MemFile(bytes)), &path, 1, None).unwrap();
    let key = long_key();
    // At snapshot 1 every version is newer: a seek passes all of them.
    let got = table.get_in_range(&key, KeyHash::of(&key), 1);
    assert_names_the_data_block(&got.unwrap_err(), &path);
}
