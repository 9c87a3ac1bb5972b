//! The read counters against ground truth across a store's life: after a
//! reopen (counters from zero, cold cache), after `rebuild_filters` (in
//! place and to no filter), and with a damaged filter block read under
//! the fail-open policy: its table's probes are probes without a filter
//! (a block searched each time), never false positives or negatives.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::{CorruptFilterPolicy, Db, FilterKind, FilterPolicy, Options};

use common::scratch_dir;
use read_truth::{At, CountingFs, Tree, check_get};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn options() -> Options {
    Options {
        filter_kind: FilterKind::Standard,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 6.0 },
        block_cache_bytes: 4 << 10,
        ..read_truth::narrow_tree_options()
    }
}

const N: u64 = 1200;

fn build(dir: &Path, fs: &Arc<CountingFs>) -> Db {
    let db = Db::open_with_fs(dir, options(), fs.clone()).unwrap();
    read_truth::write_rounds(&db, key, N, 6, Some(17), "");
    db
}

fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..N).map(key).collect();
    keys.extend((0..N).map(|i| [key(i), b"~".to_vec()].concat()));
    keys.push(b"a".to_vec());
    keys.push(b"z".to_vec());
    keys
}

/// Every key, twice (the second pass meets the blocks the first cached).
fn check_all(db: &Db, fs: &CountingFs, dir: &Path) {
    let tree = Tree::read(dir);
    for _ in 0..2 {
        for k in keys() {
            check_get(db, fs, &tree, &k, &At::Latest);
        }
    }
}

#[test]
fn after_reopen() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    build(dir.path(), &fs).close().unwrap();
    let db = Db::open_with_fs(dir.path(), options(), fs.clone()).unwrap();
    let s = db.stats();
    assert_eq!(
        (s.gets, s.total.table_probes, s.total.data_blocks_read),
        (0, 0, 0)
    );
    check_all(&db, &fs, dir.path());
    db.close().unwrap();
}

#[test]
fn after_rebuild_filters() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let db = build(dir.path(), &fs);
    check_all(&db, &fs, dir.path());
    for policy in [
        FilterPolicy::Uniform { bits_per_key: 3.0 },
        FilterPolicy::Optimized { bits_per_key: 4.0 },
        FilterPolicy::Uniform { bits_per_key: 0.0 },
        FilterPolicy::PerLevel(vec![0.0, 8.0, 2.0]),
    ] {
        db.rebuild_filters(policy).unwrap();
        check_all(&db, &fs, dir.path());
    }
    db.close().unwrap();
}

/// Flips a byte in the middle of the filter block of the deepest level's
/// first table; returns its number.
fn damage_a_filter(dir: &Path) -> u64 {
    let tree = Tree::read(dir);
    let t = &tree.levels.last().unwrap()[0];
    let filter = t.table.footer().filter;
    assert!(!filter.is_null());
    let path = dir.join(format!("{:06}.sst", t.number));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let at = filter.offset + filter.size / 2;
    let mut b = [0u8];
    file.read_exact_at(&mut b, at).unwrap();
    file.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
    t.number
}

#[test]
fn damaged_filter_fail_open() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    build(dir.path(), &fs).close().unwrap();
    let damaged = damage_a_filter(dir.path());
    let options = Options {
        on_corrupt_filter: CorruptFilterPolicy::Ignore,
        ..options()
    };
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 1);
    let tree = Tree::read(dir.path());
    assert!(tree.table(damaged).table.filter().is_none());
    check_all(&db, &fs, dir.path());
    let s = db.stats();
    assert!(
        s.total.probes_without_filter > 0,
        "the damaged table was probed"
    );
    db.close().unwrap();
}

/// Tables of format version 1 (an older build's: each index entry the
/// block's last internal key), opened by this build.
#[test]
fn format_version_1_tables() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    build(dir.path(), &fs).close().unwrap();
    common::format_v1::make_version_4_store(dir.path(), 256);
    let db = Db::open_with_fs(dir.path(), options(), fs.clone()).unwrap();
    let tree = Tree::read(dir.path());
    assert!(
        tree.levels
            .iter()
            .flatten()
            .all(|t| t.table.footer().version == 1)
    );
    check_all(&db, &fs, dir.path());
    db.close().unwrap();
}

/// A damaged filter under `CorruptFilterPolicy::Rebuild`: probes without
/// a filter until the background rebuild, then the rebuilt filter's
/// verdicts; the count of tables without a usable filter follows.
#[test]
fn damaged_filter_rebuilt_in_the_background() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    build(dir.path(), &fs).close().unwrap();
    damage_a_filter(dir.path());
    let options = Options {
        on_corrupt_filter: CorruptFilterPolicy::Rebuild,
        background_work: true,
        ..options()
    };
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    let tree = Tree::read(dir.path());
    assert!(
        tree.levels
            .iter()
            .flatten()
            .all(|t| t.table.filter().is_some())
    );
    check_all(&db, &fs, dir.path());
    assert_eq!(db.stats().total.probes_without_filter, 0);
    db.close().unwrap();
}

/// The optimized policy with background work: filters rebalanced as the
/// tree grows, then every get checked once the work is done.
#[test]
fn optimized_policy_after_rebalancing() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let options = Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 5.0 },
        background_work: true,
        ..options()
    };
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    read_truth::write_rounds(&db, key, N, 6, None, "");
    db.wait_for_background_work().unwrap();
    check_all(&db, &fs, dir.path());
    db.close().unwrap();
}

/// A read-only open (what the study commands use), on the counting file
/// system: the same numbers as a read-write open.
#[test]
fn read_only_open() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    build(dir.path(), &fs).close().unwrap();
    let options = Options {
        num_levels: bloomlsm::MAX_LEVELS,
        ..options()
    };
    let db = Db::open_read_only_with_fs(dir.path(), options, fs.clone()).unwrap();
    check_all(&db, &fs, dir.path());
    db.close().unwrap();
}
