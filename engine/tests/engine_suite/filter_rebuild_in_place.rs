//! Filter rebuilds append the new filter to the table's own file: the
//! table keeps its number, the rebuild writes the filter's bytes and not
//! the table's, and every answer stays right for readers holding the old
//! table (snapshots, open iterators), after more flushes and compactions
//! over the rebuilt tables, and after a reopen. Bytes left unused by the
//! appends stay bounded: past the bound a rebuild copies the table.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::{Db, FilterPolicy, Options};
use bloomlsm_sstable::Table;
use common::{absent, key, pairs};

/// Tables of about 24 KiB (100-byte values) over several levels, inline
/// work so a rebuild is the only thing that changes the tables; at most
/// `max_open_files` table files open (`Some(1)`: nearly every block read
/// reopens its file, one appended to while the set held or closed it).
fn options(direct: bool, max_open_files: Option<usize>) -> Options {
    Options {
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        memtable_bytes: 24 << 10,
        l1_bytes: 64 << 10,
        level_size_ratio: 4,
        target_file_bytes: 24 << 10,
        block_cache_bytes: 0,
        background_work: false,
        use_direct_reads: direct,
        max_open_files,
        ..Options::default()
    }
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.resize(100, b'v');
    v
}

/// Writes `keys` keys in scattered order over `rounds` rounds of
/// overwrites, deleting every fifth key in the last round; returns the
/// expected contents.
fn load(db: &Db, keys: u64, rounds: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut expected = BTreeMap::new();
    for round in 0..rounds {
        for j in 0..keys {
            let i = (j * 7919) % keys;
            if round + 1 == rounds && i.is_multiple_of(5) {
                db.delete(&key(i)).unwrap();
                expected.remove(&key(i));
            } else {
                db.put(&key(i), &value(i, round)).unwrap();
                expected.insert(key(i), value(i, round));
            }
        }
    }
    expected
}

fn check(db: &Db, expected: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u64) {
    for i in 0..keys {
        assert_eq!(
            db.get(&key(i)).unwrap().as_ref(),
            expected.get(&key(i)),
            "key {i}"
        );
        assert_eq!(db.get(&absent(i)).unwrap(), None);
    }
    let scanned = pairs(db.scan::<Vec<u8>, _>(..).unwrap());
    let want: Vec<_> = expected
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(scanned, want);
}

/// (name, size) of every table file in `dir`.
fn table_files(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect()
}

fn rebuild_keeps_tables_and_answers(direct: bool, max_open_files: Option<usize>) {
    const KEYS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    if direct && !common::direct_reads_work(dir.path()) {
        println!("skipped: no O_DIRECT here");
        return;
    }
    let db = Db::open(dir.path(), options(direct, max_open_files)).unwrap();
    let before_load = load(&db, KEYS, 3);
    let stats = db.stats();
    let deep = stats.levels.iter().filter(|l| l.tables > 0).count();
    assert!(deep >= 3, "levels with tables: {deep}");
    let tables_before = table_files(dir.path());
    let table_bytes: u64 = tables_before.values().sum();
    let written_before = stats.total.bytes_written;

    // Readers of the tables as they are: a snapshot and an open iterator.
    let snapshot = db.snapshot();
    let mut open_iter = db.scan::<Vec<u8>, _>(..).unwrap();
    let first = open_iter.next().unwrap().unwrap();

    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 20.0 })
        .unwrap();
    let after = db.stats();
    let tables_after = table_files(dir.path());
    assert_eq!(
        tables_after.keys().collect::<Vec<_>>(),
        tables_before.keys().collect::<Vec<_>>(),
        "every table keeps its file"
    );
    for (name, size) in &tables_after {
        assert!(*size > tables_before[name], "{name} grew by its new filter");
    }
    let appended = after.total.bytes_written - written_before;
    let grown: u64 = tables_after.values().sum::<u64>() - table_bytes;
    assert_eq!(appended, grown, "bytes written are the bytes appended");
    // 20 bits per key of about 3,000 keys in every level's tables, with
    // properties and footers: a few percent of the tables, not a copy.
    assert!(
        appended * 10 < table_bytes,
        "a rebuild wrote {appended} bytes for {table_bytes} bytes of tables"
    );
    // The new filters are the ones in use (bits per key here are filter
    // bytes over keys, whole blocks included).
    assert!(
        after.total.bits_per_key > 1.8 * stats.total.bits_per_key,
        "{} bits per key after, {} before",
        after.total.bits_per_key,
        stats.total.bits_per_key
    );
    check(&db, &before_load, KEYS);

    // The old readers still read the old tables, through the same files.
    let rest: Vec<_> = open_iter.map(|r| r.unwrap()).collect();
    let mut seen = vec![first];
    seen.extend(rest);
    let want: Vec<_> = before_load
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(seen, want);
    for i in 0..KEYS {
        assert_eq!(
            snapshot.get(&key(i)).unwrap().as_ref(),
            before_load.get(&key(i))
        );
    }

    // More writes: flushes and compactions over the rebuilt tables, while
    // the snapshot still holds the tables as they were before the rebuild.
    let expected = load(&db, KEYS, 2);
    check(&db, &expected, KEYS);
    for i in 0..KEYS {
        assert_eq!(
            snapshot.get(&key(i)).unwrap().as_ref(),
            before_load.get(&key(i))
        );
    }
    drop(snapshot);
    drop(db);

    let db = Db::open(dir.path(), options(direct, max_open_files)).unwrap();
    check(&db, &expected, KEYS);
    let live = db.stats().total.tables;
    assert_eq!(table_files(dir.path()).len() as u64, live, "no orphan");
}

#[test]
fn a_rebuild_appends_filters_and_every_reader_stays_right() {
    for max_open_files in [None, Some(1)] {
        rebuild_keeps_tables_and_answers(false, max_open_files);
    }
}

#[test]
fn a_rebuild_appends_filters_and_every_reader_stays_right_with_direct_reads() {
    for max_open_files in [None, Some(1)] {
        rebuild_keeps_tables_and_answers(true, max_open_files);
    }
}

/// Bytes of a closed store's table file that its footer no longer names.
fn dead_and_live(path: &Path) -> (u64, u64) {
    let table = Arc::new(Table::open_path(path, 1, None).unwrap());
    let live = table.live_bytes();
    (table.file_size() - live, live)
}

#[test]
fn rebuilds_over_and_over_keep_unused_bytes_bounded() {
    const KEYS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(false, None)).unwrap();
    let expected = load(&db, KEYS, 2);
    let start = table_files(dir.path());
    let table_bytes: u64 = start.values().sum();
    let written = db.stats().total.bytes_written;
    let (mut in_place, mut copied) = (0, 0);
    let mut names = start.clone();
    for round in 0..24 {
        let bits = [20.0, 4.0, 12.0][round % 3];
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
            .unwrap();
        let now = table_files(dir.path());
        assert_eq!(now.len(), names.len(), "one table for one");
        let kept = now.keys().filter(|n| names.contains_key(*n)).count();
        in_place += kept;
        copied += now.len() - kept;
        names = now;
        check(&db, &expected, KEYS);
        for name in names.keys() {
            let (dead, live) = dead_and_live(&dir.path().join(name));
            assert!(
                dead * 8 <= live,
                "round {round}: {name} has {dead} unused bytes beside {live}"
            );
        }
    }
    let stats = db.stats();
    let unused: u64 = names
        .keys()
        .map(|n| dead_and_live(&dir.path().join(n)).0)
        .sum();
    assert_eq!(stats.total.unused_bytes, unused);
    assert_eq!(stats.total.file_bytes, names.values().sum::<u64>());
    let rebuilt = stats.total.bytes_written - written;
    println!(
        "24 rebuilds of {} tables: {in_place} in place, {copied} copies; \
         {rebuilt} bytes written for {table_bytes} bytes of tables",
        start.len()
    );
    assert!(in_place > 0 && copied > 0, "{in_place} / {copied}");
    // A copy every few rebuilds instead of every time.
    assert!(
        rebuilt < 12 * table_bytes,
        "{rebuilt} bytes written by 24 rebuilds of {table_bytes}"
    );
    drop(db);
    let db = Db::open(dir.path(), options(false, None)).unwrap();
    check(&db, &expected, KEYS);
}

/// A reader holding the tables as they were before a rebuild in place
/// (an open iterator) outlives the rebuilt tables: a compaction replaces
/// them. Their files stay until that reader lets go (as a copy's original
/// does), and once it has, no block of theirs is left in the block cache:
/// the blocks it read (cached under the tables' numbers) are evicted with
/// the files, not left to take cache room from live tables.
#[test]
fn an_old_reader_outliving_tables_rebuilt_in_place_keeps_their_files_and_leaves_no_cached_block() {
    // With one file open the old reader reopens files the set closed,
    // tables rebuilt in place and then dropped from the tree among them.
    for max_open_files in [None, Some(1)] {
        old_reader_outlives_tables_rebuilt_in_place(max_open_files);
    }
}

fn old_reader_outlives_tables_rebuilt_in_place(max_open_files: Option<usize>) {
    const KEYS: u64 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        block_cache_bytes: 16 << 20,
        ..options(false, max_open_files)
    };
    let db = Db::open(dir.path(), options).unwrap();
    let first_load = load(&db, KEYS, 2);
    db.flush().unwrap();
    let old_files = table_files(dir.path());

    // The reader: opened before the rebuild, it holds the old handles.
    let old_iter = db.scan::<Vec<u8>, _>(..).unwrap();
    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 14.0 })
        .unwrap();
    let rebuilt = table_files(dir.path());
    let in_place: Vec<&String> = rebuilt
        .keys()
        .filter(|n| old_files.contains_key(*n))
        .collect();
    assert!(!in_place.is_empty(), "no table was rebuilt in place");

    // Every key overwritten, then everything merged: the rebuilt tables
    // leave the tree (compactions read without filling the cache).
    let expected = load(&db, KEYS, 1);
    db.compact().unwrap();
    let kept_for_reader: Vec<&&String> = in_place
        .iter()
        .filter(|n| dir.path().join(n).exists())
        .collect();
    // The iterator's first blocks are cached already (it was positioned
    // when opened); the rest come as it reads on.
    let cached_before = db.stats().block_cache_used_bytes;

    let mut old_iter = old_iter;
    let want: Vec<_> = first_load
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // Every pair, but not yet the end: an iterator lets go of its view
    // (and so of the old tables) when it reports its end.
    let seen: Vec<_> = old_iter
        .by_ref()
        .take(want.len())
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(seen, want, "the old reader's answers");
    assert!(
        db.stats().block_cache_used_bytes > cached_before,
        "the old reader filled the cache"
    );
    assert!(old_iter.next().is_none(), "the old reader's end");
    for name in &in_place {
        assert!(!dir.path().join(name).exists(), "{name}: an orphan");
    }
    // No live table was read since the compaction wrote them (which does
    // not fill the cache): every cached block was the old tables'.
    assert_eq!(
        db.stats().block_cache_used_bytes,
        0,
        "blocks of tables that no reader holds stay cached"
    );
    assert_eq!(
        kept_for_reader,
        in_place.iter().collect::<Vec<_>>(),
        "files deleted while a reader still held their tables"
    );
    check(&db, &expected, KEYS);
}
