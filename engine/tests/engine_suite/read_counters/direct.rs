//! `use_direct_reads` on a disk (not tmpfs): every block a trace says came
//! from a file is one point read logged through the file system, and the
//! counters move by exactly the traces' steps, with the cache off and on.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};

use read_truth::{At, CountingFs, Tree, check_get};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn run(cache: u64) {
    // The system's temporary directory, not the in-memory scratch one.
    let dir = tempfile::tempdir().unwrap();
    if !common::direct_reads_work(dir.path()) {
        println!("skipped: {} refuses O_DIRECT", dir.path().display());
        return;
    }
    let options = Options {
        use_direct_reads: true,
        filter_kind: FilterKind::Ribbon,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 4.0 },
        block_cache_bytes: cache,
        block_size: 300,
        ..read_truth::narrow_tree_options()
    };
    let fs = Arc::new(CountingFs::default());
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    let n = 800;
    read_truth::write_rounds(&db, key, n, 5, Some(13), "");
    let tree = Tree::read(dir.path());
    for _ in 0..2 {
        for i in 0..n {
            check_get(&db, &fs, &tree, &key(i), &At::Latest);
            check_get(
                &db,
                &fs,
                &tree,
                &[key(i), b"~".to_vec()].concat(),
                &At::Latest,
            );
        }
    }
    db.close().unwrap();
}

#[test]
fn direct_reads_no_cache() {
    run(0);
}

#[test]
fn direct_reads_with_cache() {
    run(1 << 20);
}
