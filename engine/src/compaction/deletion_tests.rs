//! Deletion-triggered compactions: the pure picker on hand-built trees,
//! then in a real store on tables placed by hand (the tombstones reach
//! the values they hide and both go, what a snapshot sees is kept, and
//! the picks come to an end).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use super::deletion::{Deletions, pick_deletion_compaction};
use super::tests::in_a_store::{blocks_read, delete, get, l1_over_budget_options, place, put};
use super::tests::table;
use crate::manifest::TableMeta;
use crate::{Db, Options};

/// `(tombstones, entries)` by file number (absent: none of 10).
fn picked(
    levels: &[Vec<TableMeta>],
    ratio: f64,
    deletions: &[(u64, u64, u64)],
) -> Option<(usize, u64, Vec<u64>, bool)> {
    let deletions: BTreeMap<u64, Deletions> = deletions
        .iter()
        .map(|&(n, tombstones, entries)| {
            (
                n,
                Deletions {
                    tombstones,
                    entries,
                },
            )
        })
        .collect();
    let c = pick_deletion_compaction(
        levels,
        ratio,
        |t| {
            deletions.get(&t.number).copied().unwrap_or(Deletions {
                tombstones: 0,
                entries: 10,
            })
        },
        1_000,
    )?;
    assert_eq!(c.inputs.len(), 1);
    assert_eq!(c.output_level, c.level + 1, "carried one level down");
    assert!(!c.bottom_cleanup && c.next_pointer.is_none());
    let overlapping = c.overlapping.iter().map(|t| t.number).collect();
    Some((c.level, c.inputs[0].number, overlapping, c.trivial_move))
}

fn tree() -> Vec<Vec<TableMeta>> {
    vec![
        vec![table(0, 20, "a", "z", 10)],
        vec![table(1, 11, "a", "c", 10), table(1, 16, "r", "s", 10)],
        vec![table(2, 12, "b", "f", 10), table(2, 13, "p", "q", 10)],
        vec![table(3, 14, "e", "h", 10), table(3, 15, "x", "y", 10)],
    ]
}

#[test]
fn only_a_dense_table_over_deeper_data_is_a_candidate() {
    let levels = tree();
    // 11 (a..c) meets 12 (b..f) below it: half its entries are deletes.
    assert_eq!(
        picked(&levels, 0.5, &[(11, 5, 10)]),
        Some((1, 11, vec![12], false))
    );
    // Under the ratio: left to the size-driven compactions.
    assert_eq!(picked(&levels, 0.5, &[(11, 4, 10)]), None);
    assert_eq!(
        picked(&levels, 0.4, &[(11, 4, 10)]),
        Some((1, 11, vec![12], false))
    );
    // 13 (p..q) has nothing below: the bottommost cleanup's, not ours.
    assert_eq!(picked(&levels, 0.5, &[(13, 10, 10)]), None);
    // The last level never; L0 goes down by its own trigger.
    assert_eq!(picked(&levels, 0.1, &[(14, 10, 10), (20, 10, 10)]), None);
    // No tombstones, no pick, whatever the ratio.
    assert_eq!(picked(&levels, 1e-9, &[(11, 0, 10)]), None);
    // Every entry a tombstone meets ratio 1.
    assert_eq!(
        picked(&levels, 1.0, &[(12, 10, 10)]),
        Some((2, 12, vec![14], false))
    );
}

#[test]
fn a_table_over_deeper_data_two_levels_down_moves_without_a_merge() {
    let levels = tree();
    // 16 (r..s) meets nothing in L2 and nothing in L3: no candidate.
    assert_eq!(picked(&levels, 0.5, &[(16, 9, 10)]), None);
    // Over x..y two levels down, with nothing of L2 in between: moved.
    let levels = vec![
        vec![],
        vec![table(1, 11, "w", "x", 10)],
        vec![table(2, 12, "a", "c", 10)],
        vec![table(3, 15, "x", "y", 10)],
    ];
    assert_eq!(
        picked(&levels, 0.5, &[(11, 9, 10)]),
        Some((1, 11, vec![], true))
    );
}

#[test]
fn the_most_tombstones_go_first_ties_to_the_shallower_level() {
    let levels = tree();
    assert_eq!(
        picked(&levels, 0.5, &[(11, 6, 10), (12, 9, 10)]).map(|p| p.1),
        Some(12)
    );
    assert_eq!(
        picked(&levels, 0.5, &[(11, 9, 10), (12, 9, 10)]).map(|p| p.1),
        Some(11)
    );
}

/// Four levels, nothing over budget below L1 (no size-driven pick moves
/// L2's tables), deletion-triggered compaction at half the entries.
fn options() -> Options {
    Options {
        deletion_compaction_ratio: Some(0.5),
        l1_bytes: 1 << 20,
        ..l1_over_budget_options()
    }
}

/// The keys "k00".."k09" with values at L3, and a table at L1 deleting
/// `deleted` of them over `live` new keys: returns the store.
fn deletes_over_values(dir: &std::path::Path, options: Options) -> Db {
    let db = Db::open(dir, options).unwrap();
    let keys: Vec<String> = (0..10).map(|i| format!("k{i:02}")).collect();
    place(
        &db,
        3,
        keys.iter()
            .enumerate()
            .map(|(i, k)| put(k, i as u64 + 1))
            .collect(),
    );
    place(
        &db,
        1,
        vec![
            delete("k01", 11),
            delete("k03", 12),
            put("k04", 13),
            delete("k05", 14),
        ],
    );
    db.inner.last_visible.store(14, Ordering::Release);
    db
}

#[test]
fn deletes_are_carried_down_to_their_values_and_both_go() {
    let dir = tempfile::tempdir().unwrap();
    let db = deletes_over_values(dir.path(), options());
    assert_eq!(blocks_read(&db, "k03"), 1, "the tombstone is read");
    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    // L1 -> L2 (nothing there: moved), L2 -> L3 (merged, both dropped).
    assert_eq!(s.deletion_compactions, 2);
    assert_eq!((s.trivial_moves, s.compactions), (1, 1));
    assert_eq!((s.levels[1].tables, s.levels[2].tables), (0, 0));
    assert_eq!((s.levels[3].entries, s.levels[3].tombstones), (7, 0));
    for (k, v) in [("k00", Some("k00@1")), ("k01", None), ("k03", None)] {
        assert_eq!(get(&db, k).as_deref(), v, "{k}");
    }
    assert_eq!(get(&db, "k04").as_deref(), Some("k04@13"));
    assert_eq!(get(&db, "k05"), None);
    assert_eq!(blocks_read(&db, "k03"), 0, "nothing left to read for k03");
    // Done: the next passes pick nothing.
    db.inner.compact_while_needed().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().deletion_compactions, 2);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(get(&db, "k01"), None);
    assert_eq!(get(&db, "k04").as_deref(), Some("k04@13"));
}

#[test]
fn off_by_default_and_under_the_ratio() {
    for ratio in [None, Some(0.9)] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            deletion_compaction_ratio: ratio,
            ..options()
        };
        let db = deletes_over_values(dir.path(), options);
        db.inner.compact_while_needed().unwrap();
        db.wait_for_background_work().unwrap();
        let s = db.stats();
        assert_eq!((s.deletion_compactions, s.compactions), (0, 0), "{ratio:?}");
        assert_eq!(s.levels[1].tombstones, 3);
        assert_eq!(get(&db, "k03"), None);
        assert_eq!(get(&db, "k02").as_deref(), Some("k02@3"));
    }
    assert_eq!(Options::default().deletion_compaction_ratio, None);
}

#[test]
fn a_snapshot_keeps_the_values_it_sees_and_the_picks_still_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    place(&db, 3, vec![put("k01", 1), put("k02", 2)]);
    db.inner.last_visible.store(2, Ordering::Release);
    let snapshot = db.snapshot();
    place(&db, 1, vec![delete("k01", 3), delete("k02", 4)]);
    db.inner.last_visible.store(4, Ordering::Release);
    for _ in 0..3 {
        db.inner.compact_while_needed().unwrap();
    }
    let s = db.stats();
    // Down to L3 beside the values the snapshot sees; then the table has
    // nothing below and is no candidate (the cleanup waits for the
    // snapshot).
    assert_eq!(s.deletion_compactions, 2);
    assert_eq!((s.levels[3].entries, s.levels[3].tombstones), (4, 2));
    assert_eq!(get(&db, "k01"), None);
    assert_eq!(
        snapshot.get(b"k01").unwrap().as_deref(),
        Some(&b"k01@1"[..])
    );
    assert_eq!(
        snapshot.get(b"k02").unwrap().as_deref(),
        Some(&b"k02@2"[..])
    );
    drop(snapshot);
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert_eq!((s.levels[3].entries, s.levels[3].tombstones), (0, 0));
    assert_eq!(s.bottom_cleanups, 1);
}

#[test]
fn a_ratio_outside_zero_to_one_is_refused() {
    for ratio in [0.0, -0.5, 1.01, f64::NAN] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            deletion_compaction_ratio: Some(ratio),
            ..options()
        };
        assert!(
            matches!(
                Db::open(dir.path(), options),
                Err(crate::Error::InvalidOptions(_))
            ),
            "{ratio}"
        );
    }
}
