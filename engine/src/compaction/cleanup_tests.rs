//! Bottommost cleanups: the pure picker on hand-built trees, then in a
//! real store on tables placed by hand (what is dropped, what a snapshot
//! keeps, that a cleanup never loops, and that it waits for every other
//! compaction).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use super::cleanup::pick_bottom_cleanup;
use super::tests::in_a_store::{blocks_read, delete, get, l1_over_budget_options, place, put};
use super::tests::table;
use crate::manifest::TableMeta;
use crate::trace::TraceResult;
use crate::{Db, Options};

/// `garbage` by file number (absent: none).
fn picked(
    levels: &[Vec<TableMeta>],
    oldest_snapshot: Option<u64>,
    garbage: &[(u64, u64)],
) -> Option<(usize, u64)> {
    let garbage: BTreeMap<u64, u64> = garbage.iter().copied().collect();
    let c = pick_bottom_cleanup(levels, oldest_snapshot, |t| {
        garbage.get(&t.number).copied().unwrap_or(0)
    })?;
    assert_eq!(c.inputs.len(), 1);
    assert_eq!(c.output_level, c.level, "rewritten into its own level");
    assert!(c.overlapping.is_empty() && c.grandparents.is_empty());
    assert!(c.deeper.is_empty() && c.bottom_cleanup && !c.trivial_move);
    assert!(c.next_pointer.is_none());
    Some((c.level, c.inputs[0].number))
}

fn tree() -> Vec<Vec<TableMeta>> {
    vec![
        vec![table(0, 20, "a", "z", 10)],
        vec![table(1, 11, "a", "c", 10)],
        vec![table(2, 12, "d", "f", 10), table(2, 13, "p", "q", 10)],
        vec![table(3, 14, "e", "h", 10), table(3, 15, "x", "y", 10)],
    ]
}

#[test]
fn only_a_table_with_nothing_below_its_range_is_a_candidate() {
    let levels = tree();
    // 12 (d..f) sits over 14 (e..h): its tombstones may hide something.
    assert_eq!(picked(&levels, None, &[(12, 5)]), None);
    // 11 (a..c) at L1 has nothing below it at any level.
    assert_eq!(picked(&levels, None, &[(11, 1)]), Some((1, 11)));
    // 13 (p..q) at L2 neither; 14 and 15 are in the last level.
    assert_eq!(picked(&levels, None, &[(13, 1)]), Some((2, 13)));
    assert_eq!(picked(&levels, None, &[(15, 1)]), Some((3, 15)));
    // L0 goes down whole by its own trigger, never cleaned in place.
    assert_eq!(picked(&levels, None, &[(20, 9)]), None);
    // No garbage, no pick: a clean tree is left alone.
    assert_eq!(picked(&levels, None, &[]), None);
}

#[test]
fn a_range_touching_a_deeper_table_at_one_key_is_not_a_candidate() {
    // 12 ends at f, where 14 begins: f's tombstone may hide 14's f.
    let levels = vec![
        vec![],
        vec![],
        vec![table(2, 12, "d", "f", 10)],
        vec![table(3, 14, "f", "h", 10)],
    ];
    assert_eq!(picked(&levels, None, &[(12, 1)]), None);
    // Two levels down counts the same as one.
    let levels = vec![
        vec![],
        vec![table(1, 11, "d", "f", 10)],
        vec![],
        vec![table(3, 14, "a", "d", 10)],
    ];
    assert_eq!(picked(&levels, None, &[(11, 1)]), None);
}

#[test]
fn a_table_a_live_snapshot_may_need_waits_for_its_release() {
    let levels = tree();
    // table() gives each table the sequence range number..=number.
    assert_eq!(picked(&levels, Some(14), &[(15, 1)]), None);
    assert_eq!(picked(&levels, Some(15), &[(15, 1)]), Some((3, 15)));
    assert_eq!(picked(&levels, Some(99), &[(15, 1)]), Some((3, 15)));
}

#[test]
fn the_most_garbage_goes_first_ties_to_the_shallower_level() {
    let levels = tree();
    assert_eq!(
        picked(&levels, None, &[(11, 2), (13, 7), (15, 3)]),
        Some((2, 13))
    );
    assert_eq!(
        picked(&levels, None, &[(11, 3), (13, 3), (15, 3)]),
        Some((1, 11))
    );
    // The largest candidate under a snapshot that blocks it: the next.
    assert_eq!(
        picked(&levels, Some(12), &[(11, 3), (13, 7)]),
        Some((1, 11))
    );
}

fn level_numbers(db: &Db, level: usize) -> Vec<u64> {
    let sv = db.inner.current.load();
    sv.version.levels[level]
        .iter()
        .map(|t| t.meta.number)
        .collect()
}

/// Four levels, L1 over budget with any table; everything below quiet.
fn options() -> Options {
    l1_over_budget_options()
}

#[test]
fn a_bottom_table_sheds_its_tombstones_and_shadowed_versions_once() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    // L3: a live a, a deleted b, two versions of c, a live d.
    let t = place(
        &db,
        3,
        vec![
            put("a", 5),
            delete("b", 4),
            put("c", 3),
            put("c", 2),
            put("d", 1),
        ],
    );
    db.inner.last_visible.store(5, Ordering::Release);
    let (_, trace) = db.get_traced(b"b").unwrap();
    assert!(trace.steps.iter().any(|s| s.result == TraceResult::Deleted));
    assert_eq!(blocks_read(&db, "b"), 1, "the tombstone is read");
    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    assert_eq!((s.compactions, s.bottom_cleanups), (1, 1));
    assert_eq!(s.levels[3].writes_into, 1);
    assert_eq!((s.levels[3].entries, s.levels[3].tombstones), (3, 0));
    assert_ne!(level_numbers(&db, 3), vec![t], "the table was rewritten");
    assert_eq!(get(&db, "b"), None);
    assert_eq!(get(&db, "c").as_deref(), Some("c@3"));
    assert_eq!(get(&db, "d").as_deref(), Some("d@1"));
    // b is in the new table's range but not in its filter: no block read.
    assert_eq!(blocks_read(&db, "b"), 0);
    // Nothing left to clean: the next passes do nothing.
    db.inner.compact_while_needed().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().bottom_cleanups, 1);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().bottom_cleanups, 0, "counters start at open");
    assert_eq!(get(&db, "c").as_deref(), Some("c@3"));
    assert_eq!(get(&db, "b"), None);
}

#[test]
fn tombstones_over_a_deeper_value_stay_and_are_never_retried() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    // L3 holds b's old value; L2's table over it deletes b (and f, which
    // nothing below holds, but the table's range meets L3's table).
    place(&db, 3, vec![put("b", 1)]);
    let over = place(&db, 2, vec![delete("b", 3), delete("f", 2)]);
    db.inner.last_visible.store(3, Ordering::Release);
    for _ in 0..3 {
        db.inner.compact_while_needed().unwrap();
        db.wait_for_background_work().unwrap();
    }
    let s = db.stats();
    assert_eq!((s.compactions, s.bottom_cleanups), (0, 0));
    assert_eq!(level_numbers(&db, 2), vec![over]);
    assert_eq!(get(&db, "b"), None, "the deleted b came back");
}

#[test]
fn a_snapshot_keeps_its_versions_until_released_then_the_table_is_cleaned() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    // An old b at L3, then (in a newer L3 table further right) the state
    // a snapshot at 2 sees: x@2; the delete of x at 5 and the new y@6 come
    // after it, in the same table.
    place(&db, 3, vec![put("b", 1)]);
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    let t = place(&db, 3, vec![delete("x", 5), put("x", 2), put("y", 6)]);
    db.inner.last_visible.store(6, Ordering::Release);
    db.wait_for_background_work().unwrap();
    assert_eq!(
        db.stats().bottom_cleanups,
        0,
        "the snapshot still needs x@2"
    );
    let installs = db.inner.installs.load(Ordering::Acquire);
    assert_eq!(
        *db.inner.no_cleanup_under.lock(),
        Some((installs, Some(2))),
        "the held-back search is not repeated per write"
    );
    assert_eq!(level_numbers(&db, 3).last(), Some(&t));
    assert_eq!(
        snapshot
            .get(b"x")
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap()),
        Some("x@2".into())
    );
    assert_eq!(get(&db, "x"), None);
    // A younger snapshot does not hold the cleanup back once the old one
    // goes; it sees only the newest versions, which stay.
    let young = db.snapshot();
    drop(snapshot);
    // Inline: the release does no I/O; the next round of work cleans.
    assert_eq!(db.stats().bottom_cleanups, 0);
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert_eq!(s.bottom_cleanups, 1);
    assert_eq!((s.levels[3].entries, s.levels[3].tombstones), (2, 0));
    assert_eq!(get(&db, "x"), None);
    assert_eq!(young.get(b"x").unwrap(), None);
    assert_eq!(young.get(b"y").unwrap(), Some(b"y@6".to_vec()));
    assert_eq!(get(&db, "b").as_deref(), Some("b@1"));
    assert_eq!(blocks_read(&db, "x"), 0, "x left the filter");
}

#[test]
fn with_background_threads_releasing_the_snapshot_is_enough() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(
        dir.path(),
        Options {
            background_work: true,
            ..options()
        },
    )
    .unwrap();
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    place(&db, 3, vec![delete("x", 5), put("x", 2)]);
    db.inner.last_visible.store(5, Ordering::Release);
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().bottom_cleanups, 0);
    drop(snapshot);
    // No write, no wait: the compaction thread was woken by the release.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().bottom_cleanups == 0 {
        assert!(std::time::Instant::now() < deadline, "never cleaned up");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(db.stats().levels[3].entries, 0, "x is gone entirely");
    assert_eq!(get(&db, "x"), None);
}

#[test]
fn a_cleanup_waits_while_a_level_needs_a_compaction() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    // L3: a tombstone to clean. L1 (over budget): a table over nothing.
    place(&db, 3, vec![delete("q", 2), put("r", 1)]);
    place(&db, 1, vec![put("a", 3)]);
    db.inner.last_visible.store(3, Ordering::Release);
    // Each install's tree: L1's tables, and L3's tables' distinct keys.
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let record = std::sync::Arc::clone(&seen);
    db.inner
        .install_hook
        .set(Some(std::sync::Arc::new(move |_, keys: &[Vec<u64>]| {
            record.lock().push((keys[1].len(), keys[3].clone()));
        })));
    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    assert_eq!((s.trivial_moves, s.bottom_cleanups), (1, 1));
    assert_eq!(s.levels[3].tombstones, 0);
    assert_eq!(
        *seen.lock(),
        vec![(0, vec![2]), (0, vec![1])],
        "L1's move first, then the cleanup of L3"
    );
}

#[test]
fn a_futile_rewrite_is_not_repeated_while_the_snapshots_stay() {
    // The picker never offers a table a live snapshot pins; force one
    // through the merge as if it had, and check the guard behind it.
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    place(&db, 3, vec![put("m", 3), put("m", 2)]);
    db.inner.last_visible.store(3, Ordering::Release);
    let forced = {
        let _compaction = db.inner.compaction_lock.lock();
        let sv = db.inner.current.load_full();
        let c = pick_bottom_cleanup(&sv.version.levels, None, |_| 1).unwrap();
        db.inner.merge(&c).unwrap();
        level_numbers(&db, 3)
    };
    assert_eq!(db.stats().bottom_cleanups, 1);
    assert_eq!(db.stats().levels[3].entries, 2, "both versions kept");
    assert_eq!(
        db.inner.cleanup_futile.records(),
        vec![(forced[0], Some(2))],
        "the output is remembered with the snapshot it was written under"
    );
    db.inner.compact_while_needed().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().bottom_cleanups, 1);
    assert_eq!(level_numbers(&db, 3), forced);
    assert_eq!(snapshot.get(b"m").unwrap(), Some(b"m@2".to_vec()));
    // Released: the version is garbage now, and the table is cleaned.
    drop(snapshot);
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert_eq!((s.bottom_cleanups, s.levels[3].entries), (2, 1));
    assert_eq!(get(&db, "m").as_deref(), Some("m@3"));
}

#[test]
fn a_remembered_held_back_search_does_not_hide_a_new_candidate() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    place(&db, 3, vec![delete("x", 5), put("x", 2)]);
    db.inner.last_visible.store(5, Ordering::Release);
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().bottom_cleanups, 0, "held back by the snapshot");
    assert!(db.inner.no_cleanup_under.lock().is_some());
    // Same snapshot, new tree: a table the snapshot does not hold back.
    place(&db, 3, vec![delete("m", 1)]);
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert_eq!(s.bottom_cleanups, 1, "the new table was not searched");
    assert_eq!(
        s.levels[3].tombstones, 1,
        "x's tombstone stays for the snapshot"
    );
    assert_eq!(get(&db, "m"), None);
    assert_eq!(snapshot.get(b"x").unwrap(), Some(b"x@2".to_vec()));
}
