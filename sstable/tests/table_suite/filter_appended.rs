//! `append_filter`: a table given new filters in its own file answers
//! every key at every size it has had (each append's footer names the
//! same data and index), the bytes below an old size never change, and
//! the unused-bytes accounting matches the file.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::fs::OpenOptions;
use std::sync::Arc;

use bloomlsm_filter::{Filter, FilterKind, KeyHash};
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{FilterStatus, Outcome, Table, append_filter};
use common::{Model, options, write_table};
use proptest::prelude::*;

fn open_at(path: &std::path::Path, size: u64) -> Arc<Table> {
    let file = Arc::new(std::fs::File::open(path).unwrap());
    Arc::new(Table::open_at(file, path, size, 1, None).unwrap())
}

fn answers_every_key(table: &Table, model: &Model) {
    for ((key, _), (_, value)) in model {
        let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
        assert!(
            matches!(l.outcome, Outcome::Found { value: Some(ref v), .. } if v == value),
            "{key:?}"
        );
    }
}

#[test]
fn appended_filters_keep_every_size_readable() {
    let model = common::simple_model(3000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let first = write_table(&path, &model, options(Some(FilterKind::Blocked), 4096));
    let mut sizes = vec![first.file_size];
    let mut table = open_at(&path, first.file_size);
    // A table as first written has nothing unused; an append would leave
    // its filter, properties and footer.
    assert_eq!(table.live_bytes(), table.file_size());
    let f = table.footer();
    assert_eq!(
        table.bytes_dead_after_append(),
        f.filter.size + 5 + f.properties.size + 5 + 64
    );
    for (kind, bits) in [
        (FilterKind::Ribbon, 7.5),
        (FilterKind::Standard, 16.0),
        (FilterKind::Blocked, 0.0),
        (FilterKind::Blocked, 12.0),
    ] {
        let before = std::fs::read(&path).unwrap();
        let size = table.file_size();
        let dead = table.bytes_dead_after_append();
        let file = OpenOptions::new().append(true).open(&path).unwrap();
        let summary = append_filter(&table, file, &path, kind, bits).unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after.len() as u64, summary.file_size);
        assert_eq!(
            &after[..size as usize],
            &before[..],
            "bytes below the old size unchanged"
        );
        table = open_at(&path, summary.file_size);
        assert_eq!(
            table.file_size() - table.live_bytes(),
            dead,
            "unused bytes as predicted"
        );
        if bits > 0.0 {
            let f = table.filter().unwrap();
            assert_eq!(f.kind(), kind);
            assert_eq!(f.len(), 3000);
            assert_eq!(table.properties().bits_per_key, bits);
        } else {
            assert!(matches!(table.filter_status(), FilterStatus::Absent));
            assert_eq!(table.properties().filter_kind, None);
        }
        answers_every_key(&table, &model);
        sizes.push(summary.file_size);
    }
    // Every earlier size is still a whole table, with its own filter.
    for (i, &size) in sizes.iter().enumerate() {
        let t = open_at(&path, size);
        answers_every_key(&t, &model);
        if i == 0 {
            assert_eq!(t.filter().unwrap().kind(), FilterKind::Blocked);
        }
    }
    // `Table::open` takes the file's length: the last append.
    let t = Table::open_path(&path, 1, None).unwrap();
    assert_eq!(t.file_size(), *sizes.last().unwrap());
}

#[test]
fn an_unrecorded_tail_is_not_the_table() {
    let model = common::simple_model(500);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let first = write_table(&path, &model, options(Some(FilterKind::Blocked), 1024));
    let table = open_at(&path, first.file_size);
    let file = OpenOptions::new().append(true).open(&path).unwrap();
    append_filter(&table, file, &path, FilterKind::Ribbon, 9.0).unwrap();
    // Half an append more: junk past the last footer.
    let mut bytes = std::fs::read(&path).unwrap();
    let appended = bytes.len();
    bytes.extend_from_within(first.file_size as usize..appended - 30);
    std::fs::write(&path, &bytes).unwrap();
    // Opened at either recorded size, the table is whole.
    answers_every_key(&open_at(&path, first.file_size), &model);
    let t = open_at(&path, appended as u64);
    assert_eq!(t.filter().unwrap().kind(), FilterKind::Ribbon);
    answers_every_key(&t, &model);
    // At the file's length, the junk is the footer's place: refused.
    assert!(Table::open_path(&path, 1, None).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A table with a filter appended, random bytes after it, opened at any
    /// size up to the file's: an error or a table, never a panic; at either
    /// size a footer really ends at, every key is answered.
    #[test]
    fn any_size_of_an_appended_table_opens_or_fails_cleanly(
        tail in prop::collection::vec(any::<u8>(), 0..200),
        cut in any::<u16>(),
    ) {
        let model = common::simple_model(200);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let first = write_table(&path, &model, options(Some(FilterKind::Blocked), 512));
        let table = open_at(&path, first.file_size);
        let file = OpenOptions::new().append(true).open(&path).unwrap();
        let appended = append_filter(&table, file, &path, FilterKind::Ribbon, 8.0).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&tail);
        let len = bytes.len() as u64;
        let file = Arc::new(MemFile(bytes));
        for size in [first.file_size, appended.file_size] {
            let t = Table::open_at(file.clone(), "t.sst", size, 1, None).unwrap();
            answers_every_key(&t, &model);
        }
        let size = len - u64::from(cut) % (len + 1);
        if let Ok(t) = Table::open_at(file, "t.sst", size, 1, None) {
            let _ = (t.live_bytes(), t.bytes_dead_after_append());
            for (key, _) in model.keys() {
                let _ = t.get(key, KeyHash::of(key), u64::MAX >> 8);
            }
        }
    }
}

/// `open_at` any size of a file holding two appends reads exactly what
/// `open` reads of the file cut to that size: the same table, or a refusal
/// (never a panic, never bytes past the size). Whatever opens has its
/// unused-bytes figures within its size.
#[test]
fn open_at_every_size_is_open_of_the_file_cut_there() {
    let model = common::simple_model(200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let first = write_table(&path, &model, options(Some(FilterKind::Blocked), 512));
    let mut table = open_at(&path, first.file_size);
    for (kind, bits) in [(FilterKind::Ribbon, 9.0), (FilterKind::Blocked, 0.0)] {
        let file = OpenOptions::new().append(true).open(&path).unwrap();
        let summary = append_filter(&table, file, &path, kind, bits).unwrap();
        table = open_at(&path, summary.file_size);
    }
    let bytes = std::fs::read(&path).unwrap();
    let whole: Arc<dyn bloomlsm_sstable::RandomAccessFile> = Arc::new(MemFile(bytes.clone()));
    let mut opened = 0;
    for size in 0..=bytes.len() {
        let at = Table::open_at(Arc::clone(&whole), "t.sst", size as u64, 1, None);
        let cut = Table::open(Arc::new(MemFile(bytes[..size].to_vec())), "t.sst", 1, None);
        match (at, cut) {
            (Ok(a), Ok(c)) => {
                opened += 1;
                assert_eq!(a.footer(), c.footer(), "size {size}");
                assert_eq!(a.file_size(), size as u64);
                assert!(a.live_bytes() <= a.file_size(), "size {size}");
                assert!(a.bytes_dead_after_append() <= a.file_size());
                answers_every_key(&a, &model);
            }
            (Err(a), Err(c)) => assert_eq!(a.to_string(), c.to_string(), "size {size}"),
            (a, c) => panic!("size {size}: open_at {:?}, open {:?}", a.is_ok(), c.is_ok()),
        }
    }
    assert_eq!(opened, 3, "the table at each of its three sizes");
}
