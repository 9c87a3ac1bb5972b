//! A frozen memtable's WAL is deleted once its flush is installed, and its
//! descriptor is closed then too, not at the next memtable rotation: a
//! store that goes quiet after a burst of writes (an embedder's store
//! between busy hours) must not hold unlinked WALs open, which keeps their
//! blocks on disk and their descriptors taken for as long as it stays
//! quiet. Checked after explicit flushes, after background flushes a
//! burst set off, and with work done inline, in a deep narrow tree.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options};
use common::descriptors::{deleted_in, descriptors_in};

/// Unlinked WALs this process holds open. (Tables are left out: with
/// background threads a cycle may hold a view, and with it a compacted
/// table, for a moment after the wait returns.)
fn deleted_wals(dir: &std::path::Path) -> Vec<String> {
    deleted_in(dir)
        .into_iter()
        .filter(|n| n.contains(".wal"))
        .collect()
}
use common::narrow_tree::narrow_tree_options;
use common::{Rng, scratch_dir};

fn options(background_work: bool) -> Options {
    Options {
        max_immutable_memtables: 3,
        background_work,
        max_open_files: Some(2),
        ..narrow_tree_options()
    }
}

/// A burst of puts, overwrites and deletes over 300 keys.
fn burst(db: &Db, rng: &mut Rng, round: u64) {
    for _ in 0..80 {
        let k = format!("k{:05}", rng.below(300)).into_bytes();
        if rng.below(3) == 0 {
            db.delete(&k).unwrap();
        } else {
            let v = format!("v{round}-{}", "x".repeat(rng.below(40) as usize));
            db.put(&k, v.as_bytes()).unwrap();
        }
    }
}

#[test]
fn a_flushed_wal_is_closed_when_it_is_deleted() {
    for background_work in [false, true] {
        let dir = scratch_dir();
        let mut rng = Rng(22);
        let db = Db::open(dir.path(), options(background_work)).unwrap();
        for round in 0..12 {
            burst(&db, &mut rng, round);
            let what = format!("background_work {background_work}, round {round}");
            // Quiet: every frozen memtable flushed, nothing left to do.
            db.wait_for_background_work().unwrap();
            assert_eq!(deleted_wals(dir.path()), Vec::<String>::new(), "{what}");
            db.flush().unwrap();
            assert_eq!(
                deleted_wals(dir.path()),
                Vec::<String>::new(),
                "{what}: flush"
            );
            let wals = descriptors_in(dir.path())
                .into_iter()
                .filter(|n| n.ends_with(".wal"))
                .count();
            assert_eq!(wals, 1, "{what}: only the active WAL is open");
        }
        db.close().unwrap();
        assert_eq!(descriptors_in(dir.path()), Vec::<String>::new());
    }
}
