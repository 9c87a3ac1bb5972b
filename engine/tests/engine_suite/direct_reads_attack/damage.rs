//! Damaged tables under `use_direct_reads`, on a disk file system: a
//! flipped byte in a data block is the same typed corruption error, naming
//! the file, the block kind and the block's offset, as through the page
//! cache (the first block, at an aligned offset; the last, whose trailer
//! ends at an unaligned offset); a flipped byte in a filter block never
//! makes a present key read as absent, under every `CorruptFilterPolicy`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::{Path, PathBuf};

use bloomlsm::{CorruptFilterPolicy, Db, Options};
use bloomlsm_sstable::Table;
use common::{disk_dir, read_manifest};

fn options(direct: bool, on_corrupt_filter: CorruptFilterPolicy) -> Options {
    Options {
        use_direct_reads: direct,
        // One cache byte: every get of a table key reads its block.
        block_cache_bytes: 1,
        block_size: 300,
        memtable_bytes: 32 << 10,
        target_file_bytes: 20_000,
        on_corrupt_filter,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; 1 + (i as usize * 37) % 500]
}

const N: u64 = 600;

/// A store of `N` keys, each written once (so each is in exactly one
/// table), in several L0 tables; its table files, smallest number first.
fn store(dir: &Path) -> Vec<PathBuf> {
    let db = Db::open(dir, options(false, CorruptFilterPolicy::Ignore)).unwrap();
    for i in 0..N {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let mut tables: Vec<_> = read_manifest(dir)
        .tables
        .iter()
        .map(|r| dir.join(format!("{:06}.sst", r.numbers[0])))
        .collect();
    tables.sort();
    assert!(tables.len() > 1, "{} tables", tables.len());
    tables
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

/// Every key's answer from the store at `dir`, opened with or without
/// direct reads: the value, or the error's text.
fn answers(dir: &Path, direct: bool) -> Vec<Result<Option<Vec<u8>>, String>> {
    let db = Db::open(dir, options(direct, CorruptFilterPolicy::Ignore)).unwrap();
    (0..N)
        .map(|i| {
            db.get(&key(i)).map_err(|e| {
                assert!(e.is_corruption(), "key {i}: {e}");
                e.to_string()
            })
        })
        .collect()
}

#[test]
fn a_damaged_data_block_is_the_same_typed_error_as_through_the_page_cache() {
    let Some(dir) = disk_dir() else { return };
    let tables = store(dir.path());
    let path = &tables[tables.len() / 2];
    let table = Table::open_path(path, 0, None).unwrap();
    let data_bytes = table.properties().data_bytes;
    let (first, last) = (table.smallest_key().to_vec(), table.largest_key().to_vec());
    drop(table);
    // A byte of the first block's entries, then the last byte of the last
    // block's trailer (its checksum), which ends at an unaligned offset.
    for (at, damaged) in [(7, first), (data_bytes - 1, last)] {
        flip(path, at);
        let direct = answers(dir.path(), true);
        assert!(direct == answers(dir.path(), false), "flip at {at}");
        for (i, answer) in direct.iter().enumerate() {
            match answer {
                Ok(v) => assert!(*v == Some(value(i as u64)), "flip at {at}: key {i}"),
                Err(text) => {
                    assert!(text.contains(&path.display().to_string()), "{text}");
                    assert!(text.contains("data block at offset"), "{text}");
                }
            }
        }
        let i = (0..N).position(|i| key(i) == damaged).unwrap();
        assert!(direct[i].is_err(), "flip at {at}: key {i} read");
        flip(path, at);
    }
}

#[test]
fn a_damaged_filter_block_never_hides_a_key() {
    let Some(dir) = disk_dir() else { return };
    let tables = store(dir.path());
    let path = &tables[0];
    let table = Table::open_path(path, 0, None).unwrap();
    let filter = table.footer().filter;
    assert!(!filter.is_null());
    drop(table);
    flip(path, filter.offset + filter.size / 2);
    for policy in [
        CorruptFilterPolicy::Ignore,
        CorruptFilterPolicy::Fail,
        CorruptFilterPolicy::Rebuild,
    ] {
        let opened = Db::open(dir.path(), options(true, policy));
        if policy == CorruptFilterPolicy::Fail {
            let direct = opened.unwrap_err();
            let buffered = Db::open(dir.path(), options(false, policy)).unwrap_err();
            let text = direct.to_string();
            assert!(direct.is_corruption(), "{text}");
            assert_eq!(text, buffered.to_string());
            assert!(text.contains(&path.display().to_string()), "{text}");
            continue;
        }
        let db = opened.unwrap();
        for i in 0..N {
            assert!(
                db.get(&key(i)).unwrap() == Some(value(i)),
                "{policy:?}: key {i}"
            );
        }
        db.wait_for_background_work().unwrap();
        for i in 0..N {
            assert!(
                db.get(&key(i)).unwrap() == Some(value(i)),
                "{policy:?}: key {i}"
            );
        }
        let unusable = db.stats().total.tables_without_usable_filter;
        assert_eq!(
            unusable,
            u64::from(policy == CorruptFilterPolicy::Ignore),
            "{policy:?}"
        );
        db.close().unwrap();
    }
    // Repaired by the rebuild: a store that refuses damaged filters opens,
    // and reads every key through the new filter.
    let db = Db::open(dir.path(), options(true, CorruptFilterPolicy::Fail)).unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    for i in 0..N {
        assert!(
            db.get(&key(i)).unwrap() == Some(value(i)),
            "repaired: key {i}"
        );
    }
}
