//! The per-level figures of `Db::stats` that describe the tree (tables,
//! entries, tombstones, file bytes, filter bytes, bits per key, the
//! theoretical FPR, tables without a usable filter) against the same
//! figures computed here from the manifest and the table files, each table
//! opened and listed by this test: entries and tombstones counted entry by
//! entry, distinct keys counted here, each filter's bytes and formula
//! weighted by its own keys (docs/DESIGN.md, "Stats"), and the total
//! against the sum of the levels. Shapes: a deep narrow tree with
//! tombstones, tables of three filter kinds after reopens, filters rebuilt
//! per level (some levels to none), a damaged filter read without it, a
//! store of tombstones only, one key, and no table.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;

use bloomlsm::filter::Filter;
use bloomlsm::sstable::FilterStatus;
use bloomlsm::{CorruptFilterPolicy, Db, FilterKind, FilterPolicy, LevelStats, Options};

use common::scratch_dir;
use read_truth::Tree;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn options(kind: FilterKind) -> Options {
    Options {
        filter_kind: kind,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 7.0 },
        ..read_truth::narrow_tree_options()
    }
}

/// What one level's figures must be, from its tables' own files.
#[derive(Debug, Default)]
struct Want {
    tables: u64,
    entries: u64,
    tombstones: u64,
    file_bytes: u64,
    filter_bytes: u64,
    distinct: u64,
    without_usable_filter: u64,
    /// Sum of each filter's formula times its keys, and those keys.
    weighted_fpr: f64,
    filtered_keys: u64,
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
}

fn check(what: &str, level: &str, got: &LevelStats, want: &Want) {
    let at = format!("{what}, {level}");
    assert_eq!(got.tables, want.tables, "{at}: tables");
    assert_eq!(got.entries, want.entries, "{at}: entries");
    assert_eq!(got.tombstones, want.tombstones, "{at}: tombstones");
    assert_eq!(got.file_bytes, want.file_bytes, "{at}: file bytes");
    assert_eq!(got.filter_bytes, want.filter_bytes, "{at}: filter bytes");
    assert_eq!(
        got.tables_without_usable_filter, want.without_usable_filter,
        "{at}: tables without a usable filter"
    );
    let bits = if want.distinct == 0 {
        0.0
    } else {
        want.filter_bytes as f64 * 8.0 / want.distinct as f64
    };
    assert!(
        close(got.bits_per_key, bits),
        "{at}: bits per key {} vs {bits}",
        got.bits_per_key
    );
    let fpr = if want.filtered_keys == 0 {
        0.0
    } else {
        want.weighted_fpr / want.filtered_keys as f64
    };
    assert!(
        close(got.theoretical_fpr, fpr),
        "{at}: theoretical FPR {} vs {fpr}",
        got.theoretical_fpr
    );
    assert!((0.0..=1.0).contains(&got.theoretical_fpr), "{at}");
    assert!(got.bits_per_key.is_finite(), "{at}");
}

/// Every level's figures and the total's against the files of the store
/// `db` has open in `dir`. REQUIRES: no background work.
fn check_figures(what: &str, db: &Db, dir: &Path) {
    let s = db.stats();
    let tree = Tree::read(dir);
    let sizes: Vec<(u64, u64)> = bloomlsm::table_records(dir)
        .unwrap()
        .iter()
        .map(|m| (m.number, m.file_size))
        .collect();
    let mut total = Want::default();
    for (level, got) in s.levels.iter().enumerate() {
        let mut want = Want::default();
        for t in tree.levels.get(level).into_iter().flatten() {
            want.tables += 1;
            want.entries += t.entries.len() as u64;
            want.tombstones += t.entries.iter().filter(|e| e.2).count() as u64;
            want.file_bytes += sizes.iter().find(|s| s.0 == t.number).unwrap().1;
            let keys: BTreeSet<&[u8]> = t.entries.iter().map(|e| e.0.as_slice()).collect();
            want.distinct += keys.len() as u64;
            if let FilterStatus::Unusable(_) = t.table.filter_status() {
                want.without_usable_filter += 1;
            }
            if let Some(f) = t.table.filter() {
                // A table's filter holds each of its distinct keys once.
                assert_eq!(f.len(), keys.len() as u64, "{what}: table {}", t.number);
                want.filter_bytes += f.memory_bytes() as u64;
                want.weighted_fpr += f.theoretical_fpr() * f.len() as f64;
                want.filtered_keys += f.len();
            }
        }
        check(what, &format!("L{level}"), got, &want);
        total.tables += want.tables;
        total.entries += want.entries;
        total.tombstones += want.tombstones;
        total.file_bytes += want.file_bytes;
        total.filter_bytes += want.filter_bytes;
        total.distinct += want.distinct;
        total.without_usable_filter += want.without_usable_filter;
        total.weighted_fpr += want.weighted_fpr;
        total.filtered_keys += want.filtered_keys;
    }
    assert!(tree.levels.len() <= s.levels.len(), "{what}: levels");
    check(what, "total", &s.total, &total);
}

#[test]
fn deep_tree_of_mixed_kinds_and_rebuilt_filters() {
    let dir = scratch_dir();
    let mut db = Db::open(dir.path(), options(FilterKind::Blocked)).unwrap();
    read_truth::write_rounds(&db, key, 1500, 6, Some(11), "b");
    check_figures("blocked", &db, dir.path());
    for kind in [FilterKind::Ribbon, FilterKind::Standard] {
        db.close().unwrap();
        db = Db::open(dir.path(), options(kind)).unwrap();
        read_truth::write_rounds(&db, key, 700, 2, Some(5), "m");
        check_figures(&format!("then {kind:?}"), &db, dir.path());
    }
    let shape: Vec<usize> = Tree::read(dir.path()).levels.iter().map(Vec::len).collect();
    println!("shape {shape:?}");
    assert!(shape.len() >= 4, "a deep tree: {shape:?}");
    db.rebuild_filters(FilterPolicy::PerLevel(vec![3.0, 0.0, 12.5, 0.0, 5.0]))
        .unwrap();
    check_figures("rebuilt per level", &db, dir.path());
    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 0.0 })
        .unwrap();
    check_figures("rebuilt to none", &db, dir.path());
    db.close().unwrap();
}

#[test]
fn a_damaged_filter_read_without_it() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Standard)).unwrap();
    read_truth::write_rounds(&db, key, 1200, 5, Some(7), "");
    db.close().unwrap();
    let tree = Tree::read(dir.path());
    let t = &tree.levels.last().unwrap()[0];
    let filter = t.table.footer().filter;
    let path = dir.path().join(format!("{:06}.sst", t.number));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let at = filter.offset + filter.size / 2;
    let mut b = [0u8];
    file.read_exact_at(&mut b, at).unwrap();
    file.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
    drop(tree);
    let options = Options {
        on_corrupt_filter: CorruptFilterPolicy::Ignore,
        ..options(FilterKind::Standard)
    };
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 1);
    check_figures("damaged filter ignored", &db, dir.path());
    db.close().unwrap();
}

#[test]
fn small_stores() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Blocked)).unwrap();
    check_figures("no table", &db, dir.path());
    db.put(b"only", b"1").unwrap();
    db.flush().unwrap();
    check_figures("one key", &db, dir.path());
    for i in 0..300 {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    db.delete(b"only").unwrap();
    db.flush().unwrap();
    check_figures("tombstones over it", &db, dir.path());
    db.close().unwrap();
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    for i in 0..2000 {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    check_figures("tombstones only", &db, dir.path());
    db.close().unwrap();
}
