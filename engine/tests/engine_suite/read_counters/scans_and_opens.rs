//! What the read counters leave out, as docs/DESIGN.md ("Stats") says:
//! scans and iterators (plain, bounded, at a snapshot) count nothing (no
//! get, no probe, no block read or cache hit at any level), though the
//! blocks they read go into the block cache, so a get of a key they read
//! is then served by the cache; and every counter starts from zero at each
//! open (read-write and read-only), whatever the store's past.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, Options, Stats};

use common::scratch_dir;
use read_truth::{At, CountingFs, Tree, check_get};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// The counters gets move (and the filter retries), all levels together.
fn read_counts(s: &Stats) -> [u64; 10] {
    let t = &s.total;
    [
        s.gets,
        s.memtable_hits,
        t.table_probes,
        t.filter_negatives,
        t.filter_true_positives,
        t.filter_false_positives,
        t.probes_without_filter,
        t.data_blocks_read,
        t.block_cache_hits,
        t.filter_read_retries,
    ]
}

fn options() -> Options {
    Options {
        block_cache_bytes: 1 << 20,
        ..read_truth::narrow_tree_options()
    }
}

#[test]
fn scans_count_nothing_but_warm_the_cache() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let db = Db::open_with_fs(dir.path(), options(), fs.clone()).unwrap();
    read_truth::write_rounds(&db, key, 1000, 5, Some(9), "");
    let snap = db.snapshot();
    read_truth::write_rounds(&db, key, 1000, 2, Some(4), "new");
    let tree = Tree::read(dir.path());
    assert!(tree.levels.len() >= 3);
    let before = db.stats();
    assert_eq!(before.block_cache_used_bytes, 0, "nothing read yet");
    let mut listed = 0;
    for item in db.scan(key(100)..key(400)).unwrap() {
        item.unwrap();
        listed += 1;
    }
    for item in snap.scan::<&[u8], _>(..).unwrap() {
        item.unwrap();
        listed += 1;
    }
    let mut it = db.scan(key(900)..).unwrap();
    it.next().unwrap().unwrap();
    drop(it);
    assert!(listed > 500, "{listed}");
    let after = db.stats();
    assert_eq!(read_counts(&after), read_counts(&before), "scans counted");
    for (a, b) in after.levels.iter().zip(&before.levels) {
        assert_eq!(a, b, "a level's figures moved with scans alone");
    }
    assert!(after.block_cache_used_bytes > 0, "scans fill the cache");
    // A get of a key the first scan read is served by the cache: no read
    // logged, a cache hit counted (check_get checks both against its trace).
    let trace = check_get(&db, &fs, &tree, &key(200), &At::Latest);
    assert_eq!(trace.blocks_read_from_files(), 0, "{trace:?}");
    assert_eq!(db.stats().total.block_cache_hits, 1);
    drop(snap);
    db.close().unwrap();
}

#[test]
fn every_open_starts_the_counters_from_zero() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    read_truth::write_rounds(&db, key, 800, 4, Some(7), "");
    db.put(b"in the wal", b"1").unwrap();
    for i in 0..800 {
        db.get(&key(i)).unwrap();
        db.get(&[key(i), b"~".to_vec()].concat()).unwrap();
    }
    let s = db.stats();
    assert!(s.gets == 1600 && s.total.table_probes > 0 && s.total.data_blocks_read > 0);
    db.close().unwrap();
    for read_only in [false, true] {
        let db = if read_only {
            Db::open_read_only(dir.path(), options()).unwrap()
        } else {
            Db::open(dir.path(), options()).unwrap()
        };
        let s = db.stats();
        assert_eq!(read_counts(&s), [0; 10], "read_only {read_only}");
        assert_eq!(s.block_cache_used_bytes, 0);
        for l in &s.levels {
            assert_eq!(l.observed_fpr, 0.0);
        }
        assert_eq!(s.data_blocks_read_per_get, 0.0);
        db.close().unwrap();
    }
}
