//! The picking rules beyond LevelDB's: dynamic level budgets (the base
//! level), the least-overlap choice of a table, and trivial moves, on
//! hand-built trees; then trivial moves in a real store, where they must
//! keep tombstones, snapshot-visible versions and L0's order.

use super::pick::pick;
use super::targets::{LevelTargets, level_targets};
use crate::manifest::TableMeta;
use crate::options::Options;

fn table(level: usize, number: u64, smallest: &str, largest: &str, file_size: u64) -> TableMeta {
    TableMeta {
        level,
        number,
        file_size,
        entries: 1,
        smallest_seq: number,
        largest_seq: number,
        smallest_key: smallest.as_bytes().to_vec(),
        largest_key: largest.as_bytes().to_vec(),
    }
}

fn numbers(tables: &[TableMeta]) -> Vec<u64> {
    tables.iter().map(|t| t.number).collect()
}

/// Dynamic budgets, L1 (base) budget 100, ratio 10, L0..L4.
fn options() -> Options {
    Options {
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        l1_bytes: 100,
        level_size_ratio: 10,
        num_levels: 5,
        dynamic_level_bytes: true,
        ..Options::default()
    }
}

fn no_pointers() -> Vec<Vec<u8>> {
    vec![Vec::new(); 5]
}

#[test]
fn dynamic_base_level_follows_the_last_levels_size() {
    let o = options();
    let m = u64::MAX;
    // Empty tree: L0 goes straight to the last level.
    assert_eq!(level_targets(&[5, 0, 0, 0, 0], &o).base_level, 4);
    // Last level under l1_bytes: still the base, budget at least l1_bytes.
    assert_eq!(
        level_targets(&[0, 0, 0, 0, 60], &o),
        LevelTargets {
            base_level: 4,
            budgets: vec![m, m, m, m, 100]
        }
    );
    // Past l1_bytes: the base is the shallowest level whose share (the
    // last level's size over 10 per level up) still exceeds l1_bytes / 10:
    // 1000 at L4 gives L3 = 100.
    assert_eq!(
        level_targets(&[0, 0, 0, 0, 1000], &o),
        LevelTargets {
            base_level: 3,
            budgets: vec![m, m, m, 100, 1000]
        }
    );
    // 5000 at L4: L3 would be 500 (> 100), L2 50: L2 is the base, its
    // budget raised to l1_bytes.
    assert_eq!(
        level_targets(&[0, 0, 0, 0, 5000], &o),
        LevelTargets {
            base_level: 2,
            budgets: vec![m, m, 100, 500, 5000]
        }
    );
    // The largest level sets the sizes even when it is not the last, and
    // the base never goes above L1.
    let t = level_targets(&[0, 0, 0, 150, 20_000], &o);
    assert_eq!(t.base_level, 1);
    assert_eq!(t.budgets, vec![m, 100, 200, 2000, 20_000]);
    // Static budgets when asked.
    let fixed = Options {
        dynamic_level_bytes: false,
        ..o
    };
    assert_eq!(
        level_targets(&[0, 0, 0, 0, 5000], &fixed),
        LevelTargets {
            base_level: 1,
            budgets: vec![m, 100, 1000, 10_000, 100_000]
        }
    );
}

#[test]
fn l0_compacts_into_the_base_level_with_what_it_overlaps_there() {
    let levels = vec![
        vec![table(0, 11, "b", "m", 10), table(0, 10, "a", "c", 10)],
        vec![],
        vec![],
        vec![],
        vec![table(4, 1, "a", "d", 30), table(4, 2, "x", "z", 30)],
    ];
    let c = pick(&levels, &options(), &no_pointers()).unwrap();
    assert_eq!((c.level, c.output_level), (0, 4));
    assert_eq!(numbers(&c.inputs), vec![11, 10]);
    assert_eq!(numbers(&c.overlapping), vec![1]);
    assert!(!c.trivial_move, "the L0 tables overlap each other and L4");
    // Nothing below the last level: every key is at its base level.
    assert!(c.deeper.checker().is_base_level_for(b"b"));
}

#[test]
fn the_table_with_the_least_overlap_per_byte_goes_down() {
    // L3 is the base (L4 = 1000) and is over its budget of 100.
    let levels = vec![
        vec![],
        vec![],
        vec![],
        vec![
            table(3, 1, "a", "c", 40),  // overlaps 600 in L4: 15 per byte
            table(3, 2, "d", "f", 40),  // overlaps 100: 2.5 per byte
            table(3, 3, "g", "i", 100), // overlaps 200: 2 per byte
        ],
        vec![
            table(4, 4, "a", "b", 600),
            table(4, 5, "e", "e", 100),
            table(4, 6, "h", "h", 200),
            table(4, 7, "j", "k", 100),
        ],
    ];
    let c = pick(&levels, &options(), &no_pointers()).unwrap();
    assert_eq!((c.level, c.output_level), (3, 4));
    assert_eq!(numbers(&c.inputs), vec![3]);
    assert_eq!(numbers(&c.overlapping), vec![6]);
    assert!(!c.trivial_move);
}

#[test]
fn equal_overlap_goes_round_robin() {
    let levels = vec![
        vec![],
        vec![],
        vec![],
        vec![
            table(3, 1, "a", "b", 100),
            table(3, 2, "c", "d", 100),
            table(3, 3, "e", "f", 100),
        ],
        // One L4 table under each: equal ratios, and no neighbour can join
        // a pick without adding an L4 table (`widen.rs`).
        vec![
            table(4, 4, "a", "b", 1000),
            table(4, 5, "c", "d", 1000),
            table(4, 6, "e", "f", 1000),
        ],
    ];
    let mut pointers = no_pointers();
    let mut order = Vec::new();
    for _ in 0..4 {
        let c = pick(&levels, &options(), &pointers).unwrap();
        order.push(c.inputs[0].number);
        pointers[c.level] = c.next_pointer.clone().unwrap();
    }
    assert_eq!(order, vec![1, 2, 3, 1]);
}

#[test]
fn a_table_with_no_overlap_below_moves_without_a_merge() {
    let levels = vec![
        vec![],
        vec![],
        vec![],
        vec![table(3, 1, "a", "b", 100), table(3, 2, "m", "n", 100)],
        vec![table(4, 3, "a", "c", 500), table(4, 4, "x", "z", 500)],
    ];
    let c = pick(&levels, &options(), &no_pointers()).unwrap();
    // m..n overlaps nothing in L4: ratio 0, the best, and a trivial move.
    assert_eq!(numbers(&c.inputs), vec![2]);
    assert!(c.overlapping.is_empty());
    assert!(c.trivial_move);
}

#[test]
fn l0_moves_whole_only_when_its_tables_are_disjoint_and_meet_nothing_below() {
    let disjoint = vec![table(0, 11, "m", "p", 10), table(0, 10, "a", "c", 10)];
    let overlapping = vec![table(0, 11, "b", "p", 10), table(0, 10, "a", "c", 10)];
    let below_elsewhere = vec![table(4, 1, "x", "z", 30)];
    let below_inside = vec![table(4, 1, "d", "e", 30)];
    let none = Vec::new();
    let tree = |l0: &Vec<TableMeta>, l4: &Vec<TableMeta>| {
        vec![l0.clone(), vec![], vec![], vec![], l4.clone()]
    };
    let moved = |l0, l4| {
        pick(&tree(l0, l4), &options(), &no_pointers())
            .unwrap()
            .trivial_move
    };
    assert!(moved(&disjoint, &none));
    assert!(moved(&disjoint, &below_elsewhere));
    assert!(!moved(&overlapping, &none), "L0 tables share keys");
    assert!(
        !moved(&disjoint, &below_inside),
        "d..e lies inside the L0 range a..p: it is merged"
    );
}

/// Trivial moves in a real store, on tables placed by hand.
mod in_a_store {
    use std::sync::atomic::Ordering;

    use bloomlsm_sstable::{Entry, EntryKind};

    use crate::{Db, Options};

    type Op<'a> = (&'a str, u64, EntryKind);

    fn place(db: &Db, level: usize, entries: &[Op<'_>]) -> u64 {
        let entries = entries
            .iter()
            .map(|&(key, seq, kind)| {
                let value = if kind == EntryKind::Put {
                    format!("{key}@{seq}").into_bytes()
                } else {
                    Vec::new()
                };
                Ok(Entry {
                    user_key: key.as_bytes().to_vec(),
                    seq,
                    kind,
                    value,
                })
            })
            .collect();
        super::super::tests::in_a_store::place(db, level, entries)
    }

    #[test]
    fn a_moved_table_keeps_its_tombstones_snapshot_versions_and_file() {
        use EntryKind::*;
        let dir = crate::scratch_dirs::scratch_dir();
        let options = Options {
            background_work: false,
            num_levels: 4,
            l0_compaction_trigger: 2,
            l1_bytes: 1 << 30,
            dynamic_level_bytes: false,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        // L2 holds an old d. L0: an older table with two versions of m and
        // a newer one with d's tombstone. L1 is empty, so both L0 tables
        // (disjoint) move to L1 by a manifest edit: the tombstone must
        // still hide L2's d, and m@2 must stay for the snapshot at 2.
        place(&db, 2, &[("d", 1, Put)]);
        let older = place(&db, 0, &[("m", 3, Put), ("m", 2, Put)]);
        db.inner.last_visible.store(2, Ordering::Release);
        let snapshot = db.snapshot();
        let newer = place(&db, 0, &[("d", 5, Delete)]);
        db.inner.last_visible.store(5, Ordering::Release);
        db.inner.compact_while_needed().unwrap();
        let stats = db.stats();
        assert_eq!((stats.trivial_moves, stats.compactions), (1, 0));
        {
            let sv = db.inner.current.load();
            let levels = &sv.version.levels;
            assert!(levels[0].is_empty());
            let at_1: Vec<u64> = levels[1].iter().map(|t| t.meta.number).collect();
            // Sorted by key: d's table, then m's; the same files.
            assert_eq!(at_1, vec![newer, older]);
            assert!(levels[1].iter().all(|t| t.meta.level == 1));
        }
        assert_eq!(db.get(b"d").unwrap(), None, "L2's d came back");
        assert_eq!(db.get(b"m").unwrap(), Some(b"m@3".to_vec()));
        assert_eq!(snapshot.get(b"m").unwrap(), Some(b"m@2".to_vec()));
        assert_eq!(snapshot.get(b"d").unwrap(), Some(b"d@1".to_vec()));
        drop(snapshot);
        db.close().unwrap();
        // The old handles did not delete the moved files, and the manifest
        // names them at L1.
        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert_eq!(db.get(b"m").unwrap(), Some(b"m@3".to_vec()));
        assert_eq!(db.get(b"d").unwrap(), None);
        assert_eq!(db.stats().levels[1].tables, 2);
    }
}
