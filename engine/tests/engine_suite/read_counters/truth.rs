//! The read-path numbers against ground truth, get by get: for every get,
//! the trace's table steps are those the tree's own files call for (which
//! tables, each filter's verdict as probed here, a block or not, the
//! result), each block from a file is one logged point read, and
//! `Db::stats` moves by exactly the trace's steps. Shapes: many levels of
//! narrow tables, overlapping L0 tables, keys only in deep levels,
//! tombstones over deeper values, keys outside every table's range.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};

use common::scratch_dir;
use read_truth::{At, CountingFs, Tree, check_get};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn options(kind: FilterKind, policy: FilterPolicy, cache: u64) -> Options {
    Options {
        filter_kind: kind,
        filter_policy: policy,
        block_cache_bytes: cache,
        ..read_truth::narrow_tree_options()
    }
}

/// `rounds` rounds of writes deleting every key with i % 11 == r
/// ([`read_truth::write_rounds`]), then two flushes of spread keys.
fn build(db: &Db, rounds: u64, n: u64) {
    read_truth::write_rounds(db, key, n, rounds, Some(11), "v");
    // Two more flushes of spread keys: L0 tables overlapping each other
    // and every level, with tombstones over deeper values.
    for r in 0..2 {
        for i in (0..n).filter(|i| i % 97 == 3 + r) {
            db.put(&key(i), b"l0").unwrap();
        }
        for i in (0..n).filter(|i| i % 89 == 5 + r) {
            db.delete(&key(i)).unwrap();
        }
        db.flush().unwrap();
    }
}

/// Every key, the absent keys between them, and keys outside every
/// table's range (below, above and in gaps).
fn probe_keys(n: u64) -> Vec<Vec<u8>> {
    let mut keys = vec![b"a".to_vec(), b"k".to_vec(), b"z".to_vec()];
    for i in 0..n {
        keys.push(key(i));
        let mut absent = key(i);
        absent.push(b'~');
        keys.push(absent);
    }
    keys
}

fn run(kind: FilterKind, policy: FilterPolicy, cache: u64) {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let db = Db::open_with_fs(dir.path(), options(kind, policy, cache), fs.clone()).unwrap();
    let n = 1500;
    build(&db, 7, n);
    let tree = Tree::read(dir.path());
    let shape: Vec<usize> = tree.levels.iter().map(Vec::len).collect();
    println!("{kind:?} levels: {shape:?}");
    assert!(
        shape.len() >= 4 && shape[0] >= 2,
        "a deep tree with overlapping L0: {shape:?}"
    );
    for k in probe_keys(n) {
        check_get(&db, &fs, &tree, &k, &At::Latest);
    }
    db.close().unwrap();
}

#[test]
fn blocked_filters_no_cache() {
    run(
        FilterKind::Blocked,
        FilterPolicy::Uniform { bits_per_key: 6.0 },
        0,
    );
}

#[test]
fn standard_filters_tiny_cache() {
    run(
        FilterKind::Standard,
        FilterPolicy::Uniform { bits_per_key: 4.0 },
        700,
    );
}

#[test]
fn ribbon_filters_large_cache() {
    run(
        FilterKind::Ribbon,
        FilterPolicy::Uniform { bits_per_key: 5.0 },
        8 << 20,
    );
}

#[test]
fn optimized_policy() {
    run(
        FilterKind::Blocked,
        FilterPolicy::Optimized { bits_per_key: 5.0 },
        0,
    );
}

#[test]
fn no_filters() {
    run(
        FilterKind::Blocked,
        FilterPolicy::Uniform { bits_per_key: 0.0 },
        0,
    );
}
