//! One table read through a `DirectFile` and through the page cache, on a
//! disk file system, at the shapes where aligned reads go wrong: a file
//! smaller than one aligned unit; one entry larger than a 4 KiB unit; an
//! index and a filter each longer than `MAX_CHUNK` (read at open in
//! several chunks, from unaligned offsets); and a table whose filter is
//! rebuilt in place (appended to its own file) while a reader opened at
//! the old size is still reading, so that reader's last aligned ranges
//! take in the appended bytes. Invariant: the two readers load the same
//! footer, properties and filter and give the same answer for every key,
//! present and absent, and every entry in order.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::direct::{DirectFile, MAX_CHUNK};
use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{EntryKind, FilterStatus, Table, TableBuilder, TableIter, TableOptions};
use common::disk_dir;

/// Writes a table of `n` keys (every third a tombstone) with values of
/// `value_len(i)` bytes to `path`; returns its size.
fn write(path: &Path, n: u64, value_len: fn(u64) -> usize, options: TableOptions) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut b = TableBuilder::new(file, path, options);
    for i in 0..n {
        let kind = if i % 3 == 2 {
            EntryKind::Delete
        } else {
            EntryKind::Put
        };
        let value = vec![(i % 253) as u8; value_len(i)];
        b.add(&key(i), 1000 + i, kind, &value).unwrap();
    }
    b.finish().unwrap().file_size
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn open(path: &Path, direct: bool, size: u64) -> Arc<Table> {
    let file: Arc<dyn bloomlsm_sstable::RandomAccessFile> = if direct {
        Arc::new(DirectFile::open(path).unwrap())
    } else {
        Arc::new(std::fs::File::open(path).unwrap())
    };
    Arc::new(Table::open_at(file, path, size, 1, None).unwrap())
}

/// The two readers agree on everything, and it is what was written.
fn same(direct: &Arc<Table>, buffered: &Arc<Table>, n: u64, what: &str) {
    assert_eq!(direct.footer(), buffered.footer(), "{what}");
    assert_eq!(direct.properties(), buffered.properties(), "{what}");
    assert_eq!(
        direct.filter().map(|f| f.to_bytes()),
        buffered.filter().map(|f| f.to_bytes()),
        "{what}"
    );
    assert!(
        matches!(
            direct.filter_status(),
            FilterStatus::Loaded | FilterStatus::Absent
        ),
        "{what}: {:?}",
        direct.filter_status()
    );
    // Every key of a small table; a sample of a large one (each get is a
    // device read).
    for i in (0..n).step_by((n / 3000).max(1) as usize).chain([n - 1]) {
        for k in [key(i), [key(i), b"~".to_vec()].concat()] {
            let h = KeyHash::of(&k);
            let got = direct.get(&k, h, u64::MAX).unwrap();
            assert_eq!(got, buffered.get(&k, h, u64::MAX).unwrap(), "{what}: {k:?}");
        }
    }
    let entries = |t: &Arc<Table>| -> Vec<_> {
        TableIter::new(Arc::clone(t), true)
            .map(|e| {
                let e = e.unwrap();
                (e.user_key, e.seq, e.value)
            })
            .collect()
    };
    if n <= 5000 {
        let all = entries(direct);
        assert_eq!(all.len() as u64, n, "{what}");
        assert!(all == entries(buffered), "{what}");
    }
}

/// A table to write: what it is, its keys, its value lengths, its options.
type Shape = (&'static str, u64, fn(u64) -> usize, TableOptions);

#[test]
fn tiny_huge_entry_and_long_index_and_filter_tables_read_the_same() {
    let Some(dir) = disk_dir() else { return };
    let shapes: [Shape; 4] = [
        ("one empty value", 1, |_| 0, TableOptions::default()),
        (
            "values past a 4 KiB unit",
            7,
            |i| 4000 + i as usize * 1500,
            TableOptions::default(),
        ),
        (
            "index longer than a chunk",
            70_000,
            |_| 64,
            TableOptions {
                block_size: 64,
                bits_per_key: 0.0,
                ..TableOptions::default()
            },
        ),
        (
            "filter longer than a chunk",
            40_000,
            |_| 1,
            TableOptions {
                block_size: 4096,
                bits_per_key: 60.0,
                filter_kind: FilterKind::Standard,
                ..TableOptions::default()
            },
        ),
    ];
    for (what, n, value_len, options) in shapes {
        let path = dir.path().join("t.sst");
        let size = write(&path, n, value_len, options);
        let (direct, buffered) = (open(&path, true, size), open(&path, false, size));
        let footer = *direct.footer();
        match what {
            "index longer than a chunk" => {
                assert!(footer.index.size > MAX_CHUNK as u64, "{what}: {footer:?}")
            }
            "filter longer than a chunk" => {
                assert!(footer.filter.size > MAX_CHUNK as u64, "{what}: {footer:?}")
            }
            _ => {}
        }
        same(&direct, &buffered, n, what);
    }
}

/// Appends filters of several kinds to the table at `path` (of `n` keys,
/// `size` bytes) one after another; after each, the reader opened before
/// it and a reader of the new size answer as buffered readers do.
fn append_rounds(path: &Path, n: u64, mut size: u64) {
    let mut old = open(path, true, size);
    for (round, bits) in [12.0, 0.0, 7.5, 20.0].into_iter().enumerate() {
        let file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        let summary =
            bloomlsm_sstable::append_filter(&old, file, path, FilterKind::Ribbon, bits).unwrap();
        assert!(summary.file_size > size);
        // The reader at the old size: its reads near its end now take in
        // appended bytes, which must not leak into its answers.
        let what = format!("{n} keys, round {round}");
        same(&old, &open(path, false, size), n, &format!("{what}: old"));
        let new = open(path, true, summary.file_size);
        let buffered = open(path, false, summary.file_size);
        same(&new, &buffered, n, &format!("{what}: new"));
        assert_eq!(new.filter().is_some(), bits > 0.0);
        size = summary.file_size;
        old = new;
    }
}

#[test]
fn a_reader_at_the_old_size_reads_on_while_the_filter_is_appended() {
    let Some(dir) = disk_dir() else { return };
    let mut tails_past_the_end = 0;
    for n in (1..40).chain([3000]) {
        let path = dir.path().join(format!("t{n}.sst"));
        let options = TableOptions {
            block_size: 300,
            bits_per_key: if n < 40 { 0.0 } else { 4.0 },
            ..TableOptions::default()
        };
        let size = write(&path, n, |i| (i * 7 % 97) as usize, options);
        // Where the last data block's aligned range passes the end of the
        // file (a short read at the old size), the first append puts
        // bytes inside it.
        let align = DirectFile::open(&path).unwrap().alignment() as u64;
        let data_end = open(&path, false, size).properties().data_bytes;
        if data_end.div_ceil(align) * align > size {
            tails_past_the_end += 1;
        }
        append_rounds(&path, n, size);
    }
    assert!(tails_past_the_end > 0);
}
