//! Attacks on the filter swap: a table whose filter is replaced while it
//! lives, by appends to its own file (in place) or by a copy, across
//! reopens with other filter kinds, held readers, and damage.
//!
//! - Bytes of a table file that its current footer does not name (the
//!   filters, properties and footers that earlier appends replaced, and
//!   bytes past the recorded size) are never read: flipped all, a reopen
//!   under `CorruptFilterPolicy::Fail` still opens with every filter in
//!   use, in every read mode, and rebuilds in place over them stay right.
//! - A damaged *appended* filter (the one the newest footer names, past
//!   the index block) is read around under `Ignore` in every read mode and
//!   filter kind, is refused under `Fail` naming that table and that
//!   filter's offset (not the first filter's), and `Rebuild` gives the
//!   table a usable filter again, after which `Fail` opens.
//! - One `rebuild_filters` that appends to some tables and copies others
//!   (their unused bytes past `MAX_DEAD_SHARE`), round after round, under
//!   snapshots and iterators held from every earlier round, with newer
//!   versions and tombstones flushed over the rebuilt tables in between.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::sstable::format::{FOOTER_LEN, TRAILER_LEN};
use bloomlsm::sstable::{BlockHandle, FilterLoadError, Table};
use bloomlsm::{
    CorruptFilterPolicy, Damage, Db, Error, FilterKind, FilterPolicy, FilterVerdict, Options,
    TraceSource,
};
use common::pairs;

/// Inline work and tables of a few KiB over L0..L2 or deeper; Ribbon
/// filters' stores keep one table file open, so their rebuilds append to
/// (and cut the junk of) files the set holds or has closed.
fn options(kind: FilterKind) -> Options {
    Options {
        filter_kind: kind,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        memtable_bytes: 16 << 10,
        l1_bytes: 32 << 10,
        level_size_ratio: 3,
        target_file_bytes: 8 << 10,
        block_size: 1024,
        background_work: false,
        max_open_files: (kind == FilterKind::Ribbon).then_some(1),
        ..Options::default()
    }
}

/// The read modes: (direct reads, block cache bytes, table files open at
/// most).
const READ_MODES: [(bool, u64, Option<usize>); 6] = [
    (false, 0, None),
    (false, 8 << 20, None),
    (true, 0, None),
    (true, 8 << 20, None),
    (false, 0, Some(1)),
    (true, 0, Some(2)),
];

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(7919) % 100_000_007).into_bytes()
}

fn absent(i: u64) -> Vec<u8> {
    let mut k = key(i);
    k.push(b'~');
    k
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("v{i}-{round}-").into_bytes();
    v.resize(24 + (i % 7) as usize * 8, b'.');
    v
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Rounds of overwrites of `keys` keys, every fifth one deleted in odd
/// rounds; returns what the store holds.
fn load(db: &Db, keys: u64, rounds: std::ops::Range<u64>, model: &mut Model) {
    for round in rounds {
        for i in 0..keys {
            if round % 2 == 1 && i % 5 == round % 5 {
                db.delete(&key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(&key(i), &value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
    }
}

/// Every written key as the model says, absent keys absent, the scan.
fn check(db: &Db, model: &Model, keys: u64, what: &str) {
    for i in 0..keys {
        assert_eq!(
            db.get(&key(i)).unwrap().as_ref(),
            model.get(&key(i)),
            "{what}: key {i}"
        );
        assert_eq!(db.get(&absent(i)).unwrap(), None, "{what}: absent {i}");
    }
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(
        pairs(db.scan::<Vec<u8>, _>(..).unwrap()),
        want,
        "{what}: scan"
    );
}

/// (path, recorded size) of every table the closed store names.
fn recorded_tables(dir: &Path) -> Vec<(PathBuf, u64)> {
    bloomlsm::table_records(dir)
        .unwrap()
        .into_iter()
        .map(|t| (dir.join(format!("{:06}.sst", t.number)), t.file_size))
        .collect()
}

/// The table in `path` that ends at `size`.
fn open_at(path: &Path, size: u64) -> Table {
    let file = std::fs::File::open(path).unwrap();
    Table::open_at(Arc::new(file), path, size, 0, None).unwrap()
}

/// The byte ranges of the table ending at `size` that its footer names:
/// the data region and the filter, index and properties blocks with
/// their trailers, and the footer.
fn live_ranges(table: &Table, size: u64) -> Vec<std::ops::Range<u64>> {
    let block = |h: BlockHandle| h.offset..h.offset + h.size + TRAILER_LEN as u64;
    let f = table.footer();
    let mut ranges = vec![
        0..table.properties().data_bytes,
        block(f.index),
        block(f.properties),
        size - FOOTER_LEN as u64..size,
    ];
    if !f.filter.is_null() {
        ranges.push(block(f.filter));
    }
    ranges
}

#[test]
fn bytes_no_current_footer_names_are_never_read() {
    const KEYS: u64 = 1_500;
    for (first, second) in [
        (FilterKind::Standard, FilterKind::Ribbon),
        (FilterKind::Ribbon, FilterKind::Blocked),
        (FilterKind::Blocked, FilterKind::Standard),
    ] {
        let what = format!("{first:?} then {second:?}");
        let dir = tempfile::tempdir().unwrap();
        let mut model = Model::new();
        {
            let db = Db::open(dir.path(), options(first)).unwrap();
            load(&db, KEYS, 0..4, &mut model);
            db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 12.0 })
                .unwrap();
            db.close().unwrap();
        }
        {
            // Another kind: the next appends write filters of it.
            let db = Db::open(dir.path(), options(second)).unwrap();
            db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: 9.0 })
                .unwrap();
            check(&db, &model, KEYS, &what);
            db.close().unwrap();
        }
        // Flip every byte below each recorded size that the current footer
        // does not name, and leave junk past it (an append never recorded).
        let mut flipped = 0u64;
        let mut appended_twice = 0;
        for (path, size) in recorded_tables(dir.path()) {
            let table = open_at(&path, size);
            let live = live_ranges(&table, size);
            if table.footer().filter.offset > table.footer().index.offset {
                appended_twice += usize::from(size > table.live_bytes() + 200);
            }
            let mut bytes = std::fs::read(&path).unwrap();
            assert!(bytes.len() as u64 >= size, "{}", path.display());
            bytes.truncate(size as usize);
            for (at, b) in bytes.iter_mut().enumerate() {
                if !live.iter().any(|r| r.contains(&(at as u64))) {
                    *b ^= 0xff;
                    flipped += 1;
                }
            }
            bytes.extend(std::iter::repeat_n(0xa5u8, 5000));
            std::fs::write(&path, bytes).unwrap();
        }
        assert!(
            appended_twice > 0,
            "{what}: no table holds replaced filters"
        );
        assert!(flipped > 0, "{what}: nothing flipped");

        for (direct, cache, max_open_files) in READ_MODES {
            if direct && !common::direct_reads_work(dir.path()) {
                continue;
            }
            let opts = Options {
                filter_kind: second,
                use_direct_reads: direct,
                block_cache_bytes: cache,
                max_open_files,
                on_corrupt_filter: CorruptFilterPolicy::Fail,
                ..options(second)
            };
            let mode = format!("{what}, direct {direct}, cache {cache}, open {max_open_files:?}");
            let db = Db::open(dir.path(), opts.clone())
                .unwrap_or_else(|e| panic!("{mode}: unused bytes refused the store: {e}"));
            assert_eq!(db.stats().total.tables_without_usable_filter, 0, "{mode}");
            check(&db, &model, KEYS, &mode);
            db.close().unwrap();
        }
        // Appends over the damaged unused bytes (the junk cut first), new
        // writes, another reopen under `Fail`.
        let opts = Options {
            on_corrupt_filter: CorruptFilterPolicy::Fail,
            ..options(second)
        };
        {
            let db = Db::open(dir.path(), opts.clone()).unwrap();
            db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 7.0 })
                .unwrap();
            check(&db, &model, KEYS, &format!("{what}: rebuilt over damage"));
            load(&db, KEYS, 4..5, &mut model);
            db.rebuild_filters(FilterPolicy::PerLevel(vec![14.0, 6.0, 3.0]))
                .unwrap();
            db.close().unwrap();
        }
        let db = Db::open(dir.path(), opts).unwrap();
        assert_eq!(db.stats().total.tables_without_usable_filter, 0, "{what}");
        check(&db, &model, KEYS, &format!("{what}: reopened"));
        db.close().unwrap();
    }
}

/// The filter kinds a table filter may have.
const KINDS: [FilterKind; 3] = [
    FilterKind::Standard,
    FilterKind::Blocked,
    FilterKind::Ribbon,
];

#[test]
fn a_damaged_appended_filter_is_read_around_named_and_rebuilt() {
    const KEYS: u64 = 1_200;
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let mut model = Model::new();
        {
            let db = Db::open(dir.path(), options(kind)).unwrap();
            load(&db, KEYS, 0..3, &mut model);
            db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 13.0 })
                .unwrap();
            db.close().unwrap();
        }
        // The deepest table whose filter was appended: its footer names a
        // filter after its index block.
        let records = bloomlsm::table_records(dir.path()).unwrap();
        let victim = records
            .iter()
            .filter(|t| {
                let path = dir.path().join(format!("{:06}.sst", t.number));
                let table = open_at(&path, t.file_size);
                table.footer().filter.offset > table.footer().index.offset
            })
            .max_by_key(|t| (t.level, t.entries))
            .unwrap_or_else(|| panic!("{kind:?}: no filter was appended"))
            .clone();
        let path = dir.path().join(format!("{:06}.sst", victim.number));
        let filter = open_at(&path, victim.file_size).footer().filter;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[(filter.offset + filter.size / 2) as usize] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();

        let fail = Options {
            on_corrupt_filter: CorruptFilterPolicy::Fail,
            ..options(kind)
        };
        match Db::open(dir.path(), fail.clone()) {
            Err(Error::Corruption {
                path: p,
                offset,
                reason: Damage::Filter(reason),
            }) => {
                assert_eq!(p, path, "{kind:?}");
                assert_eq!(offset, filter.offset, "{kind:?}: the appended filter");
                assert!(
                    matches!(reason, FilterLoadError::Block { offset: o, .. } if o == filter.offset),
                    "{kind:?}: {reason}"
                );
            }
            Err(e) => panic!("{kind:?}: expected a filter refusal, got {e}"),
            Ok(_) => panic!("{kind:?}: a damaged filter opened under Fail"),
        }

        for (direct, cache, max_open_files) in READ_MODES {
            if direct && !common::direct_reads_work(dir.path()) {
                continue;
            }
            let mode = format!("{kind:?}, direct {direct}, cache {cache}, open {max_open_files:?}");
            let db = Db::open(
                dir.path(),
                Options {
                    use_direct_reads: direct,
                    block_cache_bytes: cache,
                    max_open_files,
                    ..options(kind)
                },
            )
            .unwrap();
            assert_eq!(db.stats().total.tables_without_usable_filter, 1, "{mode}");
            check(&db, &model, KEYS, &mode);
            // A key the damaged table is asked for: read from its block.
            // (an absent key in its range: no shallower version answers).
            let step = (0..KEYS)
                .map(absent)
                .filter(|k| *k >= victim.smallest_key && *k <= victim.largest_key)
                .find_map(|k| {
                    let (found, trace) = db.get_traced(&k).unwrap();
                    assert_eq!(found, None, "{mode}");
                    trace.steps.into_iter().find(|s| {
                        matches!(s.source, TraceSource::Table { number, .. } if number == victim.number)
                    })
                })
                .unwrap_or_else(|| panic!("{mode}: the damaged table was never asked"));
            assert_eq!(step.filter, Some(FilterVerdict::NoFilter), "{mode}");
            db.close().unwrap();
        }

        {
            let db = Db::open(
                dir.path(),
                Options {
                    on_corrupt_filter: CorruptFilterPolicy::Rebuild,
                    ..options(kind)
                },
            )
            .unwrap();
            db.wait_for_background_work().unwrap();
            assert_eq!(db.stats().total.tables_without_usable_filter, 0, "{kind:?}");
            check(&db, &model, KEYS, &format!("{kind:?}: rebuilt"));
            db.close().unwrap();
        }
        let db = Db::open(dir.path(), fail).unwrap();
        assert_eq!(db.stats().total.tables_without_usable_filter, 0, "{kind:?}");
        check(&db, &model, KEYS, &format!("{kind:?}: reopened"));
        db.close().unwrap();
    }
}

/// Keys of the narrow tables: one-byte values, so a table's filter is a
/// large share of it and a second replaced filter passes the bound on
/// unused bytes (the table is copied).
fn small_key(i: u64) -> Vec<u8> {
    format!("a{i:06}").into_bytes()
}

/// Keys of the wide tables: values of 400 bytes, appended to every time.
fn big_key(i: u64) -> Vec<u8> {
    format!("b{i:06}").into_bytes()
}

/// What one round leaves readers holding: the model at the time, a
/// snapshot, an untouched iterator and one read halfway.
struct Held {
    model: Model,
    snapshot: bloomlsm::Snapshot,
    fresh: bloomlsm::DbIter,
    half: bloomlsm::DbIter,
    half_seen: Vec<(Vec<u8>, Vec<u8>)>,
}

fn hold(db: &Db, model: &Model) -> Held {
    let mut half = db.scan::<Vec<u8>, _>(..).unwrap();
    let half_seen = half
        .by_ref()
        .take(model.len() / 2)
        .map(|r| r.unwrap())
        .collect();
    Held {
        model: model.clone(),
        snapshot: db.snapshot(),
        fresh: db.scan::<Vec<u8>, _>(..).unwrap(),
        half,
        half_seen,
    }
}

/// (number, size) of every table file.
fn sizes(dir: &Path) -> BTreeMap<u64, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_suffix(".sst")?.parse().ok()?;
            Some((n, e.metadata().unwrap().len()))
        })
        .collect()
}

#[test]
fn one_rebuild_appending_to_some_tables_and_copying_others_under_held_readers() {
    const SMALL: u64 = 3_000;
    const BIG: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        memtable_bytes: 64 << 10,
        l1_bytes: 256 << 10,
        target_file_bytes: 32 << 10,
        block_cache_bytes: 4 << 20,
        ..options(FilterKind::Blocked)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut model = Model::new();
    let put = |db: &Db, model: &mut Model, k: Vec<u8>, v: Vec<u8>| {
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    };
    // Narrow and wide tables apart: each flush holds one kind of key.
    for i in 0..SMALL {
        put(&db, &mut model, small_key(i), vec![b'0' + (i % 10) as u8]);
    }
    db.flush().unwrap();
    for i in 0..BIG {
        put(&db, &mut model, big_key(i), vec![b'w'; 400]);
    }
    db.flush().unwrap();

    let mut held: Vec<Held> = Vec::new();
    let mut mixed_rounds = 0;
    for round in 0..6u64 {
        held.push(hold(&db, &model));
        let before = sizes(dir.path());
        let bits = if round % 2 == 0 { 20.0 } else { 24.0 };
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
            .unwrap();
        let after = sizes(dir.path());
        let grown = after
            .iter()
            .filter(|(n, s)| before.get(n).is_some_and(|b| *s > b))
            .count();
        let new = after.keys().filter(|n| !before.contains_key(n)).count();
        if grown > 0 && new > 0 {
            mixed_rounds += 1;
        }
        check_round(&db, &model, &held, &format!("round {round}"));
        // Newer versions and tombstones over the rebuilt tables, in L0.
        for i in (round..SMALL).step_by(97) {
            if i % 2 == 0 {
                db.delete(&small_key(i)).unwrap();
                model.remove(&small_key(i));
            } else {
                put(
                    &db,
                    &mut model,
                    small_key(i),
                    format!("r{round}").into_bytes(),
                );
            }
        }
        for i in (round..BIG).step_by(13) {
            put(&db, &mut model, big_key(i), vec![b'a' + round as u8; 400]);
        }
        db.flush().unwrap();
        check_round(&db, &model, &held, &format!("round {round}, written over"));
    }
    assert!(mixed_rounds > 0, "no rebuild both appended and copied");

    // Every held reader, drained now, sees its round's store.
    for (r, h) in held.into_iter().enumerate() {
        let want: Vec<_> = h
            .model
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let rest: Vec<_> = h.half.map(|r| r.unwrap()).collect();
        assert_eq!([h.half_seen, rest].concat(), want, "held round {r}: half");
        assert_eq!(pairs(h.fresh), want, "held round {r}: fresh");
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    check_round(&db, &model, &[], "reopened");
    db.close().unwrap();
}

/// Gets of every key of the latest model and of each held snapshot.
fn check_round(db: &Db, model: &Model, held: &[Held], what: &str) {
    let keys = || (0..3_000).map(small_key).chain((0..300).map(big_key));
    for k in keys() {
        assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k), "{what}");
    }
    for (r, h) in held.iter().enumerate() {
        for k in keys() {
            assert_eq!(
                h.snapshot.get(&k).unwrap().as_ref(),
                h.model.get(&k),
                "{what}: snapshot of round {r}, key {}",
                String::from_utf8_lossy(&k)
            );
        }
    }
}
