//! Multi-table trivial moves and refused trivial moves in a real store, on
//! tables placed by hand: every version moves or is merged as it must,
//! tombstones stay while a deeper level holds the key (and only then), and
//! what a snapshot sees survives, across a reopen.

use std::sync::atomic::Ordering;

use super::tests::in_a_store::{delete, get, l1_over_budget_options, place, put};
use crate::{Db, Options};

#[test]
fn a_run_of_four_moves_in_one_edit_with_its_tombstones_and_snapshot_versions() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), l1_over_budget_options()).unwrap();
    // L3: old b, d, f, h, j. L1 (over budget): five one-key tables over
    // nothing in L2, three of them tombstones over L3's values.
    place(
        &db,
        3,
        vec![
            put("b", 1),
            put("d", 2),
            put("f", 3),
            put("h", 4),
            put("j", 5),
        ],
    );
    db.inner.last_visible.store(5, Ordering::Release);
    let snapshot = db.snapshot();
    let l1 = [
        place(&db, 1, vec![delete("b", 6)]),
        place(&db, 1, vec![put("d", 7)]),
        place(&db, 1, vec![delete("f", 8)]),
        place(&db, 1, vec![put("h", 9)]),
        place(&db, 1, vec![delete("j", 10)]),
    ];
    place(&db, 2, vec![put("x", 11)]);
    db.inner.last_visible.store(11, Ordering::Release);

    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    // The first four in one edit, then the fifth.
    assert_eq!((s.trivial_moves, s.compactions), (2, 0));
    {
        let sv = db.inner.current.load();
        let at_2: Vec<u64> = sv.version.levels[2].iter().map(|t| t.meta.number).collect();
        assert_eq!(at_2[..5], l1, "the same files, in key order, at L2");
        assert!(sv.version.levels[1].is_empty());
    }
    let want_now = [
        ("b", None),
        ("d", Some("d@7")),
        ("f", None),
        ("h", Some("h@9")),
        ("j", None),
    ];
    let want_then = [
        ("b", Some("b@1")),
        ("d", Some("d@2")),
        ("f", Some("f@3")),
        ("h", Some("h@4")),
        ("j", Some("j@5")),
    ];
    for (k, want) in want_now {
        assert_eq!(get(&db, k).as_deref(), want, "{k}");
    }
    for (k, want) in want_then {
        let got = snapshot.get(k.as_bytes()).unwrap();
        assert_eq!(
            got.as_deref(),
            want.map(str::as_bytes),
            "{k} at the snapshot"
        );
    }
    drop(snapshot);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for (k, want) in want_now {
        assert_eq!(get(&db, k).as_deref(), want, "{k} after reopen");
    }
}

/// The refusal happens exactly when the level below the output holds much
/// of the table's range, so that level is likely to hold older versions of
/// its keys: the merge that replaces the move has an empty overlapping set
/// and must still keep the tombstones over them.
#[test]
fn a_refused_move_keeps_tombstones_over_the_level_below_its_output() {
    let dir = crate::scratch_dirs::scratch_dir();
    // One-byte targets: a 25-byte compaction limit, under any table.
    let options = || Options {
        target_file_bytes: 1,
        ..l1_over_budget_options()
    };
    let db = Db::open(dir.path(), options()).unwrap();
    // L3 [a, c] with an old c; L2 empty; L1 [b, e]: b, c's tombstone, d,
    // and e's tombstone (nothing below holds e).
    place(&db, 3, vec![put("a", 1), put("c", 2)]);
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    place(
        &db,
        1,
        vec![put("b", 3), delete("c", 4), put("d", 5), delete("e", 6)],
    );
    db.inner.last_visible.store(6, Ordering::Release);

    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    assert_eq!(
        (s.trivial_moves, s.compactions),
        (0, 1),
        "merged, not moved"
    );
    assert_eq!(s.levels[1].tables, 0);
    // b, c's tombstone and d: e's tombstone hid nothing and went.
    assert_eq!(s.levels[2].entries, 3);
    assert_eq!(get(&db, "c"), None, "L3's c came back");
    assert_eq!(get(&db, "e"), None);
    assert_eq!(get(&db, "b").as_deref(), Some("b@3"));
    assert_eq!(get(&db, "d").as_deref(), Some("d@5"));
    assert_eq!(snapshot.get(b"c").unwrap(), Some(b"c@2".to_vec()));
    drop(snapshot);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(get(&db, "c"), None, "L3's c came back after reopen");
}
