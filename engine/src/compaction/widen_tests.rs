//! Which neighbours join a picked table (`widen.rs`), on hand-built trees:
//! a merge takes the neighbours that add no table below, within twice the
//! compaction byte limit; a trivial move takes up to four tables whose
//! whole run meets nothing below.

use super::pick::pick;
use super::tests::table;
use crate::manifest::TableMeta;
use crate::options::Options;

fn numbers(tables: &[TableMeta]) -> Vec<u64> {
    tables.iter().map(|t| t.number).collect()
}

/// Static budgets: L1 100 bytes (every tree below holds more), L2 10,000
/// (never over); the merge limit is 2 x 25 x `target_file_bytes`.
fn options(target_file_bytes: u64) -> Options {
    Options {
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        l1_bytes: 100,
        level_size_ratio: 100,
        num_levels: 5,
        dynamic_level_bytes: false,
        target_file_bytes,
        ..Options::default()
    }
}

fn tree(l1: Vec<TableMeta>, l2: Vec<TableMeta>) -> Vec<Vec<TableMeta>> {
    vec![vec![], l1, l2, vec![], vec![]]
}

fn picked(levels: &[Vec<TableMeta>], target: u64) -> (Vec<u64>, Vec<u64>, bool) {
    let c = pick(levels, &options(target), &vec![Vec::new(); 5]).expect("L1 over budget");
    assert_eq!((c.level, c.output_level), (1, 2));
    (numbers(&c.inputs), numbers(&c.overlapping), c.trivial_move)
}

#[test]
fn a_merge_takes_the_neighbours_that_meet_only_the_same_tables_below() {
    let levels = tree(
        vec![
            table(1, 1, "a", "b", 100),
            table(1, 2, "c", "d", 100),
            table(1, 3, "x", "y", 100),
        ],
        vec![table(2, 4, "a", "e", 1000), table(2, 5, "w", "z", 5000)],
    );
    // a..b is picked (ratio 10, as c..d; x..y 50); c..d lies under the
    // same L2 table and joins; x..y does not.
    assert_eq!(picked(&levels, 1000), (vec![1, 2], vec![4], false));
}

#[test]
fn a_neighbour_reaching_a_further_table_below_stays_unless_wholly_inside() {
    let levels = tree(
        vec![
            table(1, 1, "a", "b", 100),
            table(1, 2, "c", "d", 100),
            table(1, 3, "e", "g", 100),
        ],
        vec![table(2, 4, "a", "e", 1000), table(2, 5, "f", "z", 1000)],
    );
    // e..g meets a..e but also f..z: the run of tables meeting a..e would
    // pull f..z in, so only the tables inside a..e join.
    assert_eq!(picked(&levels, 1000), (vec![1, 2], vec![4], false));
}

#[test]
fn no_neighbour_joins_past_twice_the_compaction_limit() {
    let levels = tree(
        vec![table(1, 1, "a", "b", 100), table(1, 2, "c", "d", 100)],
        vec![table(2, 4, "a", "e", 1000)],
    );
    // Target 24 bytes: the limit is 2 x 25 x 24 = 1,200, and the two
    // tables with the one below are 1,200 (the limit is exclusive).
    assert_eq!(picked(&levels, 24), (vec![1], vec![4], false));
    // Target 25: 1,250 > 1,200.
    assert_eq!(picked(&levels, 25), (vec![1, 2], vec![4], false));
}

#[test]
fn a_pick_ending_where_the_merged_span_ends_stays_in_its_inputs() {
    let levels = tree(
        vec![
            table(1, 1, "b", "d", 100),
            table(1, 2, "e", "f", 100),
            table(1, 3, "g", "h", 100),
            table(1, 4, "i", "k", 400),
        ],
        vec![table(2, 5, "a", "c", 1000), table(2, 6, "d", "j", 1000)],
    );
    // i..k is picked (ratio 2.5; e..f and g..h 10, b..d 20). It meets d..j
    // below: the merge rewrites d..k. The run of tables meeting d..k starts
    // at b..d, which also meets a..c, so only the tables wholly inside d..k
    // join: e..f, g..h and the pick itself, whose largest key is the span's
    // end. Inputs without the pick would leave the level over its budget
    // with the same pick next time.
    assert_eq!(picked(&levels, 1000), (vec![2, 3, 4], vec![6], false));
}

#[test]
fn a_trivial_move_takes_up_to_four_tables_whose_run_meets_nothing_below() {
    let l3 = |n: u64| {
        (0..n)
            .map(|i| {
                let c = (b'a' + 2 * i as u8) as char;
                let d = (b'b' + 2 * i as u8) as char;
                table(1, i + 1, &c.to_string(), &d.to_string(), 100)
            })
            .collect::<Vec<_>>()
    };
    // a..b c..d e..f g..h i..j, nothing below them: the first four go.
    let levels = tree(l3(5), vec![table(2, 9, "x", "z", 5000)]);
    assert_eq!(picked(&levels, 1000), (vec![1, 2, 3, 4], vec![], true));
    // An L2 table in the gap after c..d ends the run there.
    let levels = tree(
        l3(5),
        vec![table(2, 8, "dd", "de", 1), table(2, 9, "x", "z", 5000)],
    );
    assert_eq!(picked(&levels, 1000), (vec![1, 2], vec![], true));
    // The byte limit: 25 x 10 = 250 bytes takes two tables of 100.
    let levels = tree(l3(5), vec![table(2, 9, "x", "z", 5000)]);
    assert_eq!(picked(&levels, 10), (vec![1, 2], vec![], true));
}

#[test]
fn a_trivial_run_grows_leftwards_once_it_cannot_grow_rightwards() {
    let levels = tree(
        vec![
            table(1, 1, "a", "b", 100),
            table(1, 2, "c", "d", 100),
            table(1, 3, "e", "f", 100),
            table(1, 4, "g", "h", 100),
        ],
        vec![table(2, 8, "a", "b", 2000), table(2, 9, "x", "z", 2000)],
    );
    // a..b meets L2 (ratio 20); the others meet nothing (ratio 0): c..d is
    // picked, the run takes e..f and g..h, and cannot take a..b.
    assert_eq!(picked(&levels, 1000), (vec![2, 3, 4], vec![], true));
    let mut pointers = vec![Vec::new(); 5];
    pointers[1] = b"f".to_vec();
    // Round robin from g..h: it takes nothing rightwards, then e..f and
    // c..d to its left.
    let c = pick(&levels, &options(1000), &pointers).expect("L1 over budget");
    assert_eq!(numbers(&c.inputs), vec![2, 3, 4]);
    assert!(c.trivial_move);
    assert_eq!(c.next_pointer.as_deref(), Some(&b"h"[..]));
}

#[test]
fn a_widened_merge_in_a_store_keeps_tombstones_and_snapshot_versions() {
    use std::sync::atomic::Ordering;

    use super::tests::in_a_store::{delete, l1_over_budget_options, place, put};
    use crate::Db;

    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), l1_over_budget_options()).unwrap();
    // L3: an old c. L2: one table [b, h] with c's tombstone. L1 (over
    // budget): [b, bb] and [d, e] both under that L2 table, and [x, y]
    // over nothing.
    place(&db, 3, vec![put("c", 1)]);
    place(&db, 2, vec![put("b", 2), delete("c", 3), put("h", 4)]);
    db.inner.last_visible.store(4, Ordering::Release);
    let snapshot = db.snapshot();
    place(&db, 1, vec![put("b", 5), put("bb", 6)]);
    place(&db, 1, vec![put("d", 7), put("e", 8)]);
    place(&db, 1, vec![put("x", 9), put("y", 10)]);
    db.inner.last_visible.store(10, Ordering::Release);

    db.inner.compact_while_needed().unwrap();
    let stats = db.stats();
    // One merge took both tables under [b, h] (without widening: two,
    // rewriting L2's table twice); [x, y] moved down by itself.
    assert_eq!((stats.compactions, stats.trivial_moves), (1, 1));
    assert_eq!(stats.levels[1].tables, 0);
    for (key, want) in [
        ("b", Some("b@5")),
        ("bb", Some("bb@6")),
        ("c", None),
        ("d", Some("d@7")),
        ("e", Some("e@8")),
        ("h", Some("h@4")),
        ("x", Some("x@9")),
        ("y", Some("y@10")),
    ] {
        let want = want.map(|v| v.as_bytes().to_vec());
        assert_eq!(db.get(key.as_bytes()).unwrap(), want, "{key}");
    }
    for (key, want) in [
        ("b", Some("b@2")),
        ("c", None),
        ("d", None),
        ("h", Some("h@4")),
    ] {
        let want = want.map(|v| v.as_bytes().to_vec());
        assert_eq!(
            snapshot.get(key.as_bytes()).unwrap(),
            want,
            "{key} at the snapshot"
        );
    }
}

#[test]
fn a_table_over_too_much_of_the_level_below_the_output_is_rewritten_not_moved() {
    // L1 [c, d] meets nothing in L2, but L3's [a, z] of 5,000 bytes lies
    // under it: with 1,000-byte targets (25,000 bytes) it moves; with
    // 100-byte targets (2,500) it is merged alone, its outputs cut to line
    // up with L3.
    let levels = vec![
        vec![],
        vec![table(1, 1, "c", "d", 100)],
        vec![table(2, 2, "x", "y", 100)],
        vec![table(3, 3, "a", "z", 5000)],
        vec![],
    ];
    let c = pick(&levels, &options(1000), &vec![Vec::new(); 5]).unwrap();
    assert!(c.trivial_move && c.overlapping.is_empty());
    let c = pick(&levels, &options(100), &vec![Vec::new(); 5]).unwrap();
    assert!(!c.trivial_move && c.overlapping.is_empty());
    assert_eq!((numbers(&c.inputs), c.grandparents.len()), (vec![1], 1));
}
