//! Snapshot gets against ground truth: older versions kept in tables for
//! snapshots, keys whose only versions are newer than the snapshot (the
//! filter was right to say maybe: a true positive, not a false one), a
//! key's versions spanning several blocks, tombstones seen by one
//! snapshot and not another.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, FilterKind, FilterPolicy, FilterVerdict, Options, TraceSource};

use common::scratch_dir;
use read_truth::{At, CountingFs, Tree, check_get};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn options() -> Options {
    Options {
        filter_kind: FilterKind::Blocked,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 8.0 },
        block_cache_bytes: 0,
        block_size: 128,
        ..read_truth::narrow_tree_options()
    }
}

#[test]
fn snapshots_of_every_age_match_the_tables() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let db = Db::open_with_fs(dir.path(), options(), fs.clone()).unwrap();
    let n = 400;
    let mut snaps = Vec::new();
    for round in 0..6u64 {
        for i in (0..n).filter(|i| i % (round + 1) == 0 || *i >= n - 40 * round) {
            db.put(&key(i), format!("{i}-{round}").as_bytes()).unwrap();
        }
        for i in (0..n).filter(|i| i % 13 == round) {
            db.delete(&key(i)).unwrap();
        }
        // A hot key: many versions, spanning blocks, each seen by a
        // snapshot.
        for v in 0..30u64 {
            db.put(b"k00200", format!("hot-{round}-{v}").as_bytes())
                .unwrap();
            if v % 7 == 0 {
                snaps.push(db.snapshot());
            }
        }
        snaps.push(db.snapshot());
        db.flush().unwrap();
    }
    let tree = Tree::read(dir.path());
    let shape: Vec<usize> = tree.levels.iter().map(Vec::len).collect();
    println!("levels: {shape:?}, snapshots {}", snaps.len());
    assert!(shape.len() >= 3, "{shape:?}");
    let mut keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    keys.extend((0..n).map(|i| [key(i), b"~".to_vec()].concat()));
    let mut true_positive_missing = 0;
    for at in std::iter::once(At::Latest).chain(snaps.iter().map(At::Snapshot)) {
        for k in &keys {
            let trace = check_get(&db, &fs, &tree, k, &at);
            true_positive_missing += trace
                .steps
                .iter()
                .filter(|s| {
                    matches!(s.source, TraceSource::Table { .. })
                        && s.filter == Some(FilterVerdict::TruePositive)
                        && s.result == bloomlsm::TraceResult::Missing
                })
                .count();
        }
    }
    assert!(
        true_positive_missing > 0,
        "no key only newer than a snapshot"
    );
    drop(snaps);
    db.close().unwrap();
}
