//! The record of bottommost cleanups that dropped nothing
//! (`DbInner::cleanup_futile`) against the tree changing around it: a pick
//! from a view older than the record's install, a filter rebuild that
//! copies the table under a new number, a trivial move of it. A rewrite
//! that drops nothing is forced through the merge (the picker never offers
//! one on a store's own tables: their properties count their garbage
//! exactly), as `cleanup_tests.rs` does.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::cleanup::pick_bottom_cleanup;
use super::pick::{Compaction, DeeperRanges};
use super::tests::in_a_store::{l1_over_budget_options, place, put};
use crate::Db;
use crate::rebuild::RebuildJob;
use crate::version::TableHandle;

/// The records, by table number.
fn records(db: &Db) -> Vec<(u64, Option<u64>)> {
    db.inner.cleanup_futile.records()
}

fn level(db: &Db, level: usize) -> Vec<Arc<TableHandle>> {
    db.inner.current.load().version.levels[level].clone()
}

/// A store whose only table, at `at`, holds m@3 and m@2, under a snapshot
/// at 2 (which needs m@2), and the snapshot.
fn store_under_a_snapshot(at: usize) -> (tempfile::TempDir, Db, crate::Snapshot) {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), l1_over_budget_options()).unwrap();
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    place(&db, at, vec![put("m", 3), put("m", 2)]);
    db.inner.last_visible.store(3, Ordering::Release);
    (dir, db, snapshot)
}

/// Cleans up the only table of the tree as if picked: the snapshot keeps
/// both versions, so it drops nothing. Returns the output's number.
fn force_futile_cleanup(db: &Db) -> u64 {
    let _compaction = db.inner.compaction_lock.lock();
    let sv = db.inner.current.load_full();
    let c = pick_bottom_cleanup(&sv.version.levels, None, |_| 1).unwrap();
    db.inner.merge(&c).unwrap();
    let outputs = level(db, c.level);
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].meta.entries, 2, "both versions kept");
    outputs[0].meta.number
}

#[test]
fn a_pick_from_a_view_older_than_the_record_keeps_the_record() {
    let (_dir, db, snapshot) = store_under_a_snapshot(3);
    // What a snapshot's release (`oldest_snapshot_released`, no
    // compaction lock) loaded just before a cleanup installed.
    let installs = db.inner.installs.load(Ordering::Acquire);
    let older = db.inner.current.load_full();
    let output = force_futile_cleanup(&db);
    assert_eq!(records(&db), vec![(output, Some(2))]);
    // Then it asks the picker, with the view that does not hold the
    // output yet.
    let _ = db
        .inner
        .pick_bottom_cleanup(installs, &older.version.levels);
    assert_eq!(
        records(&db),
        vec![(output, Some(2))],
        "a view older than the install pruned the record of the table it installed"
    );
    drop(snapshot);
}

#[test]
fn a_filter_rebuild_copying_the_table_carries_the_record_to_the_copy() {
    let (_dir, db, _snapshot) = store_under_a_snapshot(3);
    let output = force_futile_cleanup(&db);
    let table = level(&db, 3)[0].clone();
    let copy = {
        let _compaction = db.inner.compaction_lock.lock();
        db.inner
            .rebuild_tables_locked(&[RebuildJob {
                table,
                bits_per_key: 3.0,
                kind: db.inner.options.filter_kind,
            }])
            .unwrap()
    };
    let copy = copy[0].meta.number;
    // A table this small leaves most of its bytes dead after an append,
    // so it is copied (`TableFiles::rebuild`).
    assert_ne!(copy, output, "rebuilt in place: not the case under test");
    assert_eq!(level(&db, 3)[0].meta.number, copy);
    assert_eq!(
        records(&db),
        vec![(copy, Some(2))],
        "the record stayed with the number that left the tree"
    );
    // Nothing picks the copy again while the snapshot stays.
    let installs = db.inner.installs.load(Ordering::Acquire);
    let sv = db.inner.current.load_full();
    assert!(
        db.inner
            .pick_bottom_cleanup(installs, &sv.version.levels)
            .is_none()
    );
}

#[test]
fn a_trivial_move_keeps_the_record_and_a_replacement_drops_it() {
    let (_dir, db, snapshot) = store_under_a_snapshot(2);
    let output = force_futile_cleanup(&db);
    let moved = Compaction {
        level: 2,
        inputs: level(&db, 2),
        output_level: 3,
        overlapping: Vec::new(),
        deeper: DeeperRanges::none(),
        grandparents: Vec::new(),
        next_pointer: None,
        trivial_move: true,
        bottom_cleanup: false,
    };
    {
        let _compaction = db.inner.compaction_lock.lock();
        db.inner.merge(&moved).unwrap();
    }
    assert_eq!(level(&db, 3)[0].meta.number, output, "moved, same file");
    assert_eq!(records(&db), vec![(output, Some(2))], "same contents");
    // Released: the cleanup drops m@2, and its output replaces the table.
    drop(snapshot);
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().bottom_cleanups, 2);
    assert_eq!(level(&db, 3)[0].meta.entries, 1);
    assert_eq!(records(&db), vec![], "a record outlived its table");
}
