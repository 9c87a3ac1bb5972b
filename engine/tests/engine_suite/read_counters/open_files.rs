//! `max_open_files` at 1 and 2: a get that misses the block cache may
//! find its table's file closed and reopen it. Every get must still count
//! exactly its trace's steps, each block from a file must be one point
//! read of that table's data region, a file is reopened only for a block
//! read from it (a filter negative or a cache hit opens nothing: filters
//! and indexes stay in memory), and `Stats::table_file_opens` moves by
//! exactly the opens the file system saw. Deep narrow tree, overlapping
//! L0, tombstones over deeper values, gets at the latest sequence and at
//! a snapshot, block cache off and tiny.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};

use common::scratch_dir;
use read_truth::{At, CountingFs, Tree, check_get};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn run(max_open: usize, cache: u64, kind: FilterKind) {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let options = Options {
        max_open_files: Some(max_open),
        filter_kind: kind,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 4.0 },
        block_cache_bytes: cache,
        ..read_truth::narrow_tree_options()
    };
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    let n = 900;
    read_truth::write_rounds(&db, key, n, 4, Some(13), "old");
    let snap = db.snapshot();
    read_truth::write_rounds(&db, key, n, 3, Some(7), "new");
    let tree = Tree::read(dir.path());
    let shape: Vec<usize> = tree.levels.iter().map(Vec::len).collect();
    assert!(
        shape.len() >= 3 && shape.iter().sum::<usize>() > 4 * max_open,
        "more tables than open files: {shape:?}"
    );
    let reopens_before = db.stats().table_file_opens;
    for _ in 0..2 {
        for i in 0..n {
            let absent = [key(i), b"~".to_vec()].concat();
            for k in [key(i), absent] {
                check_get(&db, &fs, &tree, &k, &At::Latest);
                check_get(&db, &fs, &tree, &k, &At::Snapshot(&snap));
            }
        }
    }
    let s = db.stats();
    assert!(
        s.table_file_opens > reopens_before,
        "the gets reopened files: {} then {}",
        reopens_before,
        s.table_file_opens
    );
    assert!(s.open_table_files.unwrap() <= max_open as u64);
    drop(snap);
    db.close().unwrap();
}

#[test]
fn one_open_file_no_cache() {
    run(1, 0, FilterKind::Blocked);
}

#[test]
fn one_open_file_tiny_cache() {
    run(1, 700, FilterKind::Standard);
}

#[test]
fn two_open_files_ribbon() {
    run(2, 0, FilterKind::Ribbon);
}
