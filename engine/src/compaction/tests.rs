//! Compaction picking on hand-built trees (as LevelDB's version_set_test
//! checks overlap and base-level logic), and what a merge keeps.

use bloomlsm_sstable::{Entry, EntryKind};

use super::pick::{DeeperRanges, pick, pick_all};
use super::retain::Retain;
use crate::cursor::tests::VecCursor;
use crate::error::Result;
use crate::manifest::TableMeta;
use crate::options::Options;

pub(super) fn table(
    level: usize,
    number: u64,
    smallest: &str,
    largest: &str,
    file_size: u64,
) -> TableMeta {
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

fn options() -> Options {
    Options {
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        l1_bytes: 100,
        level_size_ratio: 10,
        num_levels: 5,
        // These cases are about static budgets (`pick_tests.rs` has the
        // dynamic ones).
        dynamic_level_bytes: false,
        ..Options::default()
    }
}

fn numbers(tables: &[TableMeta]) -> Vec<u64> {
    tables.iter().map(|t| t.number).collect()
}

fn no_pointers() -> Vec<Vec<u8>> {
    vec![Vec::new(); 5]
}

#[test]
fn nothing_to_do_under_every_budget() {
    let levels = vec![
        vec![table(0, 9, "a", "z", 10)],
        vec![table(1, 1, "a", "c", 50)],
        vec![table(2, 2, "a", "z", 900)],
        vec![],
        vec![table(4, 3, "a", "z", 1 << 30)],
    ];
    assert!(pick(&levels, &options(), &no_pointers()).is_none());
}

#[test]
fn l0_takes_every_table_and_every_overlapping_l1_table() {
    let levels = vec![
        vec![table(0, 11, "m", "p", 10), table(0, 10, "b", "d", 10)],
        vec![
            table(1, 1, "a", "c", 10),
            table(1, 2, "e", "f", 10),
            table(1, 3, "o", "q", 10),
            table(1, 4, "r", "s", 10),
        ],
        vec![table(2, 5, "a", "z", 10)],
        vec![],
        vec![],
    ];
    let c = pick(&levels, &options(), &no_pointers()).unwrap();
    assert_eq!((c.level, c.output_level), (0, 1));
    assert_eq!(numbers(&c.inputs), vec![11, 10]);
    // The union range b..p meets a-c, e-f (inside the union, between the
    // two L0 tables) and o-q; not r-s.
    assert_eq!(numbers(&c.overlapping), vec![1, 2, 3]);
    let mut base = c.deeper.checker();
    assert!(!base.is_base_level_for(b"a"));
    assert!(!base.is_base_level_for(b"q"));
}

#[test]
fn deeper_ranges_cover_the_overlapping_tables_not_only_the_picked_one() {
    // The fault that brought deleted keys back: L1's pick is m..n, but the
    // L2 table it overlaps spans a..z, so the merge rewrites tombstones for
    // b..c too, and L3 still holds an older b.
    let levels = vec![
        vec![],
        vec![table(1, 1, "m", "n", 1000)],
        vec![table(2, 2, "a", "z", 10)],
        vec![table(3, 3, "b", "c", 10), table(3, 4, "x", "y", 10)],
        vec![table(4, 5, "t", "u", 10)],
    ];
    let c = pick(&levels, &options(), &no_pointers()).unwrap();
    assert_eq!((c.level, c.output_level), (1, 2));
    assert_eq!(numbers(&c.inputs), vec![1]);
    assert_eq!(numbers(&c.overlapping), vec![2]);
    let mut base = c.deeper.checker();
    for (key, base_level) in [
        ("a", true),
        ("b", false),
        ("bb", false),
        ("c", false),
        ("d", true),
        ("m", true),
        ("t", false),
        ("tt", false),
        ("u", false),
        ("v", true),
        ("x", false),
        ("y", false),
        ("z", true),
    ] {
        assert_eq!(base.is_base_level_for(key.as_bytes()), base_level, "{key}");
    }
}

#[test]
fn the_most_over_budget_level_goes_first_and_the_last_level_never() {
    let levels = vec![
        vec![],
        vec![table(1, 1, "a", "b", 150)],     // 1.5x of 100
        vec![table(2, 2, "a", "b", 3000)],    // 3x of 1000
        vec![table(3, 3, "a", "b", 10)],      // 0.001x
        vec![table(4, 4, "a", "b", 1 << 40)], // last level: never picked
    ];
    let c = pick(&levels, &options(), &no_pointers()).unwrap();
    assert_eq!((c.level, c.output_level), (2, 3));
    assert_eq!(numbers(&c.overlapping), vec![3]);
    let mut base = c.deeper.checker();
    assert!(!base.is_base_level_for(b"a"));
}

#[test]
fn round_robin_pointer_moves_through_the_level() {
    let levels = vec![
        vec![],
        vec![
            table(1, 1, "a", "b", 100),
            table(1, 2, "c", "d", 100),
            table(1, 3, "e", "f", 100),
        ],
        // Tables of L2 in the gaps: each L1 table moves down alone (a
        // trivial move takes no neighbour whose range would meet L2).
        vec![table(2, 4, "bb", "bc", 1), table(2, 5, "dd", "de", 1)],
        vec![],
        vec![],
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
fn full_compaction_takes_every_table_into_the_deepest_level() {
    let levels = vec![
        vec![table(0, 9, "a", "c", 1)],
        vec![table(1, 1, "a", "b", 1)],
        vec![],
        vec![table(3, 2, "x", "z", 1)],
        vec![],
    ];
    let c = pick_all(&levels).unwrap();
    assert_eq!(c.output_level, 3);
    assert_eq!(numbers(&c.inputs), vec![9, 1]);
    assert_eq!(numbers(&c.overlapping), vec![2]);
    assert!(c.deeper.checker().is_base_level_for(b"a"));
    assert!(pick_all::<TableMeta>(&[vec![], vec![]]).is_none());
}

fn e(key: &str, seq: u64, kind: EntryKind) -> Result<Entry> {
    Ok(Entry {
        user_key: key.as_bytes().to_vec(),
        seq,
        kind,
        value: vec![seq as u8],
    })
}

fn run(
    entries: Vec<Result<Entry>>,
    snapshots: Vec<u64>,
    deeper: &DeeperRanges,
) -> Vec<(String, u64)> {
    let mut input = VecCursor::new(entries.into_iter().map(|r| r.unwrap()).collect());
    let mut out: Vec<Entry> = Vec::new();
    Retain::new(snapshots, deeper.checker())
        .run(&mut input, &mut out)
        .unwrap();
    out.into_iter()
        .map(|e| (String::from_utf8(e.user_key).unwrap(), e.seq))
        .collect()
}

#[test]
fn keeps_newest_and_snapshot_versions() {
    use EntryKind::*;
    let input = || {
        vec![
            e("a", 9, Put),
            e("a", 5, Put),
            e("a", 2, Put),
            e("b", 4, Delete),
            e("b", 1, Put),
        ]
    };
    let below = DeeperRanges::new(vec![vec![(b"a".to_vec(), b"z".to_vec())]]);
    let nothing_below = DeeperRanges::none();
    assert_eq!(
        run(input(), vec![], &below),
        vec![("a".into(), 9), ("b".into(), 4)]
    );
    assert_eq!(run(input(), vec![], &nothing_below), vec![("a".into(), 9)]);
    assert_eq!(
        run(input(), vec![6], &below),
        vec![("a".into(), 9), ("a".into(), 5), ("b".into(), 4)]
    );
    assert_eq!(
        run(input(), vec![3], &nothing_below),
        vec![
            ("a".into(), 9),
            ("a".into(), 2),
            ("b".into(), 4),
            ("b".into(), 1)
        ]
    );
}

#[test]
fn a_tombstone_is_kept_exactly_where_a_deeper_level_may_hold_its_key() {
    use EntryKind::*;
    let input = vec![
        e("a", 9, Delete),
        e("c", 8, Delete),
        e("e", 7, Delete),
        e("g", 6, Delete),
    ];
    // Deeper tables cover b..c (one level) and f..g (another).
    let deeper = DeeperRanges::new(vec![
        vec![(b"b".to_vec(), b"c".to_vec())],
        vec![(b"f".to_vec(), b"g".to_vec())],
    ]);
    assert_eq!(
        run(input, vec![], &deeper),
        vec![("c".into(), 8), ("g".into(), 6)]
    );
}

/// Builds tables by hand at chosen levels of a real store, then lets the
/// store pick and run its own compaction.
pub(super) mod in_a_store {
    use std::sync::atomic::Ordering;

    use bloomlsm_sstable::{Entry, EntryKind};

    use crate::{Db, Options};

    pub(in crate::compaction) fn put(key: &str, seq: u64) -> crate::Result<Entry> {
        Ok(Entry {
            user_key: key.as_bytes().to_vec(),
            seq,
            kind: EntryKind::Put,
            value: format!("{key}@{seq}").into_bytes(),
        })
    }

    /// The value a get of `key` returns, as text.
    pub(in crate::compaction) fn get(db: &Db, key: &str) -> Option<String> {
        db.get(key.as_bytes())
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap())
    }

    /// Blocks a get of `key` read (from file or cache).
    pub(in crate::compaction) fn blocks_read(db: &Db, key: &str) -> usize {
        let (_, trace) = db.get_traced(key.as_bytes()).unwrap();
        trace.steps.iter().filter(|s| s.block.is_some()).count()
    }

    pub(in crate::compaction) fn delete(key: &str, seq: u64) -> crate::Result<Entry> {
        Ok(Entry {
            user_key: key.as_bytes().to_vec(),
            seq,
            kind: EntryKind::Delete,
            value: Vec::new(),
        })
    }

    /// Writes `entries` as one table at `level` and installs it; returns
    /// its file number.
    pub(in crate::compaction) fn place(
        db: &Db,
        level: usize,
        entries: Vec<crate::Result<Entry>>,
    ) -> u64 {
        let inner = &db.inner;
        let tables = inner
            .tables
            .write(
                level,
                crate::table_files::OutputCuts::one_table(),
                &crate::filter_budget::Plan::unbounded(10.0),
                &inner.counters,
                &mut |out| {
                    for e in &entries {
                        let e = e.as_ref().unwrap();
                        out.add(&e.user_key, e.seq, e.kind, &e.value)?;
                    }
                    Ok(())
                },
            )
            .unwrap();
        crate::budget_test_shapes::make_visible(inner, &tables);
        inner
            .install(crate::install::VersionEdit {
                added: &tables,
                ..Default::default()
            })
            .unwrap();
        tables[0].meta.number
    }

    /// Four levels, static budgets, no background work: L1 is over budget
    /// with any table, L2 and L3 never.
    pub(in crate::compaction) fn l1_over_budget_options() -> Options {
        Options {
            background_work: false,
            num_levels: 4,
            l1_bytes: 64,
            level_size_ratio: 1000,
            dynamic_level_bytes: false,
            ..Options::default()
        }
    }

    #[test]
    fn a_tombstone_over_an_older_value_in_a_deeper_level_survives_compaction() {
        let dir = crate::scratch_dirs::scratch_dir();
        let options = l1_over_budget_options();
        let db = Db::open(dir.path(), options).unwrap();
        // L3 holds b's old value; L2 one wide table with b's tombstone; L1
        // a narrow table over budget, overlapping the wide one but not b.
        place(&db, 3, vec![put("b", 1)]);
        place(&db, 2, vec![put("a", 2), delete("b", 3), put("z", 4)]);
        place(&db, 1, vec![put("m", 5), put("n", 6)]);
        db.inner.last_visible.store(6, Ordering::Release);
        assert_eq!(db.get(b"b").unwrap(), None);
        db.inner.compact_while_needed().unwrap();
        assert_eq!(db.stats().compactions, 1);
        assert_eq!(db.stats().levels[1].tables, 0, "L1 was compacted into L2");
        assert_eq!(db.get(b"b").unwrap(), None, "the deleted b came back");
        assert_eq!(db.get(b"a").unwrap(), Some(b"a@2".to_vec()));
        assert_eq!(db.get(b"m").unwrap(), Some(b"m@5".to_vec()));
    }
}
