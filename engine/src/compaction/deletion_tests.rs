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
    let c = pick_deletion_compaction(levels, &Options::default(), ratio, |t| {
        deletions.get(&t.number).copied().unwrap_or(Deletions {
            tombstones: 0,
            entries: 10,
        })
    })?;
    assert_ne!(c.level, 0, "an L0 pick (see the L0 test)");
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
    // The last level never.
    assert_eq!(picked(&levels, 0.1, &[(14, 10, 10), (15, 10, 10)]), None);
    // No tombstones, no pick, whatever the ratio.
    assert_eq!(picked(&levels, 1e-9, &[(11, 0, 10)]), None);
    // Every entry a tombstone meets ratio 1.
    assert_eq!(
        picked(&levels, 1.0, &[(12, 10, 10)]),
        Some((2, 12, vec![14], false))
    );
}

/// An L0 table dense with tombstones over deeper data takes all of L0
/// into the base level (what the L0 trigger would do at its count): L0
/// tables overlap, so one cannot go down alone past older ones.
#[test]
fn a_dense_l0_table_takes_l0_whole_into_the_base_level() {
    let levels = vec![
        vec![table(0, 21, "m", "n", 10), table(0, 20, "a", "c", 10)],
        vec![],
        vec![table(2, 12, "b", "f", 10)],
        vec![table(3, 14, "a", "z", 5_000)],
    ];
    let options = Options {
        l1_bytes: 1_000,
        level_size_ratio: 10,
        num_levels: 4,
        ..Options::default()
    };
    let pick = |deletions: &[(u64, u64)]| {
        let deletions: BTreeMap<u64, u64> = deletions.iter().copied().collect();
        pick_deletion_compaction(&levels, &options, 0.5, |t| Deletions {
            tombstones: deletions.get(&t.number).copied().unwrap_or(0),
            entries: 10,
        })
    };
    // 20 (a..c) is half tombstones over 12 and 14: L0 whole, into L2, the
    // base level of this tree, with the L2 table it meets.
    let c = pick(&[(20, 5)]).unwrap();
    assert_eq!((c.level, c.output_level), (0, 2));
    let inputs: Vec<u64> = c.inputs.iter().map(|t| t.number).collect();
    assert_eq!(inputs, vec![21, 20], "every L0 table, newest first");
    assert_eq!(
        c.overlapping.iter().map(|t| t.number).collect::<Vec<_>>(),
        vec![12]
    );
    // Under the ratio: left to the trigger.
    assert!(pick(&[(20, 4)]).is_none());
    // A deeper table with more tombstones goes first.
    let c = pick(&[(20, 5), (12, 9)]).unwrap();
    assert_eq!((c.level, c.output_level), (2, 3));
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

/// Places the keys "k00".."k09" at L3, "kNN" with the value "kNN@(NN+1)"
/// at sequence NN + 1.
fn values_at_l3(db: &Db) {
    let keys: Vec<String> = (0..10).map(|i| format!("k{i:02}")).collect();
    place(
        db,
        3,
        keys.iter()
            .enumerate()
            .map(|(i, k)| put(k, i as u64 + 1))
            .collect(),
    );
}

/// `values_at_l3`, and a table at L1 deleting k01, k03 and k05 and
/// rewriting k04 (3 of its 4 entries tombstones): returns the store.
fn deletes_over_values(dir: &std::path::Path, options: Options) -> Db {
    let db = Db::open(dir, options).unwrap();
    values_at_l3(&db);
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
    let dir = crate::scratch_dirs::scratch_dir();
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
        let dir = crate::scratch_dirs::scratch_dir();
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
    let dir = crate::scratch_dirs::scratch_dir();
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
        let dir = crate::scratch_dirs::scratch_dir();
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

/// Ratio 1, a table of nothing but tombstones meeting deeper data only at
/// its last key, a snapshot holding that key's value, and a trivial move
/// refused on the way (the table over a deeper table past
/// `max_compaction_bytes`): the tombstones that hide nothing go when the
/// table is rewritten alone, the one at the edge reaches its value, and
/// the picks end with the snapshot's answer kept.
#[test]
fn a_table_of_tombstones_meeting_deeper_data_at_its_edge() {
    let dir = crate::scratch_dirs::scratch_dir();
    let options = Options {
        deletion_compaction_ratio: Some(1.0),
        num_levels: 5,
        target_file_bytes: 64,
        ..options()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let deep: Vec<_> = (50..400).map(|i| put(&format!("k{i:03}"), 1)).collect();
    db.inner.last_visible.store(1, Ordering::Release);
    place(&db, 4, deep);
    let snapshot = db.snapshot();
    let tombstones: Vec<_> = (0..=50).map(|i| delete(&format!("k{i:03}"), 2)).collect();
    db.inner.last_visible.store(2, Ordering::Release);
    place(&db, 1, tombstones);
    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    // L1 -> L2 moved (nothing below L2's range); L2 -> L3 rewritten alone
    // (L4's table too large to move over), keeping only k050's tombstone;
    // L3 -> L4 merged beside the value the snapshot sees.
    assert_eq!(
        (s.deletion_compactions, s.trivial_moves, s.compactions),
        (3, 1, 2)
    );
    assert_eq!((s.levels[4].tombstones, s.levels[4].entries), (1, 351));
    assert_eq!(get(&db, "k050"), None);
    assert_eq!(get(&db, "k010"), None);
    assert_eq!(get(&db, "k051").as_deref(), Some("k051@1"));
    assert_eq!(
        snapshot.get(b"k050").unwrap().as_deref(),
        Some(&b"k050@1"[..])
    );
    db.inner.compact_while_needed().unwrap();
    assert_eq!(db.stats().deletion_compactions, 3, "the picks ended");
    drop(snapshot);
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert_eq!((s.levels[4].tombstones, s.levels[4].entries), (0, 349));
    assert_eq!(get(&db, "k050"), None);
}

/// Attack: random trees placed by hand (each level older than the one
/// above, L0 newest, snapshots taken between the levels' placements),
/// under every ratio from "any tombstone" to "only tombstones", with 2 to
/// 7 levels, static or dynamic budgets, and tables so large against
/// `target_file_bytes` that most trivial moves are refused. The picks
/// must end (a watchdog, not a hang), leave the levels below L0 sorted and
/// disjoint with no candidate left, and every get, at the head and at
/// every snapshot, must match the model, before and after a reopen.
mod random_trees {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::super::deletion::{Deletions, pick_deletion_compaction};
    use super::super::pick::pick;
    use super::super::targets::level_targets;
    use super::super::tests::in_a_store::{delete, place, put};
    use crate::{Db, Options};

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }
    }

    const KEYS: u64 = 120;

    fn key(i: u64) -> String {
        format!("k{i:03}")
    }

    /// Every version written: key -> (seq, value or None for a delete).
    type Model = BTreeMap<String, Vec<(u64, Option<String>)>>;

    fn expected(model: &Model, key: &str, at: u64) -> Option<String> {
        model
            .get(key)?
            .iter()
            .filter(|(s, _)| *s <= at)
            .max_by_key(|(s, _)| *s)
            .and_then(|(_, v)| v.clone())
    }

    /// Runs the picks on another thread; fails if they do not end.
    fn compact_within(db: &Db, what: &str) {
        let inner = std::sync::Arc::clone(&db.inner);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let r = inner.compact_while_needed();
            let _ = tx.send(r.is_ok());
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(ok) => assert!(ok, "{what}: compaction failed"),
            Err(_) => panic!(
                "{what}: the picks never end ({} deletion picks so far)",
                db.stats().deletion_compactions
            ),
        }
    }

    fn check_tree(db: &Db, ratio: f64, what: &str) {
        let sv = db.inner.current.load_full();
        let levels = &sv.version.levels;
        for (l, tables) in levels.iter().enumerate().skip(1) {
            for w in tables.windows(2) {
                assert!(
                    w[0].meta.largest_key < w[1].meta.smallest_key,
                    "{what}: L{l} not sorted and disjoint"
                );
            }
        }
        let left = pick_deletion_compaction(levels, &db.inner.options, ratio, |t| {
            let p = t.table.properties();
            Deletions {
                tombstones: p.tombstones,
                entries: p.entries,
            }
        });
        assert!(left.is_none(), "{what}: a candidate left after the picks");
    }

    fn check_reads(
        db: &Db,
        model: &Model,
        snapshots: &[(crate::Snapshot, u64)],
        top: u64,
        what: &str,
    ) {
        for i in 0..KEYS {
            let k = key(i);
            let got = db
                .get(k.as_bytes())
                .unwrap()
                .map(|v| String::from_utf8(v).unwrap());
            assert_eq!(got, expected(model, &k, top), "{what}: get {k}");
            for (s, at) in snapshots {
                let got = s
                    .get(k.as_bytes())
                    .unwrap()
                    .map(|v| String::from_utf8(v).unwrap());
                assert_eq!(
                    got,
                    expected(model, &k, *at),
                    "{what}: get {k} at snapshot {at}"
                );
            }
        }
    }

    /// Deletion-triggered picks out of L0, over all cases.
    static L0_PICKS: AtomicU64 = AtomicU64::new(0);

    /// The picks of `compact_while_needed` taken one at a time (the size
    /// pick first, then the deletion pick, then the cleanup), each pick out
    /// of L0 checked before it runs: it takes every L0 table (none left
    /// above the older versions it carries down) into the base level, 1
    /// with static budgets, the targets' base level with dynamic ones, and
    /// never below the first level holding data (newer versions would sit
    /// under older ones). Fails if the picks do not end. Returns the
    /// deletion picks out of L0.
    fn step_picks(db: &Db, what: &str) -> u64 {
        let inner = &db.inner;
        let options = &inner.options;
        let mut l0_picks = 0;
        for _ in 0..10_000 {
            let _compaction = inner.compaction_lock.lock();
            let installs = inner.installs.load(Ordering::Acquire);
            let sv = inner.current.load_full();
            let levels = &sv.version.levels;
            let sized = {
                let mut pointers = inner.compact_pointer.lock();
                let picked = pick(levels, options, &pointers);
                if let Some(c) = &picked
                    && let Some(p) = &c.next_pointer
                {
                    pointers[c.level] = p.clone();
                }
                picked
            };
            let by_size = sized.is_some();
            let Some(c) = sized
                .or_else(|| inner.pick_deletion_compaction(installs, levels))
                .or_else(|| inner.pick_bottom_cleanup(installs, levels))
            else {
                return l0_picks;
            };
            if c.level == 0 {
                let numbers = |ts: &[std::sync::Arc<crate::version::TableHandle>]| -> Vec<u64> {
                    ts.iter().map(|t| t.meta.number).collect()
                };
                assert_eq!(numbers(&c.inputs), numbers(&levels[0]), "{what}: all of L0");
                let bytes: Vec<u64> = levels
                    .iter()
                    .map(|l| l.iter().map(|t| t.meta.file_size).sum())
                    .collect();
                let base = if options.dynamic_level_bytes {
                    level_targets(&bytes, options).base_level
                } else {
                    1
                };
                assert_eq!(c.output_level, base, "{what}: L0 into the base level");
                let first_data = (1..levels.len()).find(|&l| !levels[l].is_empty());
                assert!(
                    first_data.is_none_or(|l| c.output_level <= l),
                    "{what}: L0 below older data"
                );
                l0_picks += u64::from(!by_size);
            }
            inner.merge(&c).unwrap();
        }
        panic!("{what}: the picks never end");
    }

    /// Returns the deletion-triggered picks made.
    fn one_case(seed: u64) -> u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let ratio = [1e-9, 0.15, 0.5, 1.0][rng.below(4) as usize];
        let num_levels = [2, 3, 4, 7][rng.below(4) as usize];
        let options = Options {
            background_work: false,
            num_levels,
            dynamic_level_bytes: rng.chance(50),
            l1_bytes: [64, 1 << 20, 1 << 20][rng.below(3) as usize],
            level_size_ratio: [2, 10, 1000][rng.below(3) as usize],
            target_file_bytes: [64, 1 << 20][rng.below(2) as usize],
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 8,
            l0_stop_trigger: 12,
            deletion_compaction_ratio: Some(ratio),
            ..Options::default()
        };
        let what = format!("seed {seed}: ratio {ratio}, {num_levels} levels, {options:?}");
        let dir = crate::scratch_dirs::scratch_dir();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let mut model = Model::new();
        let mut seq = 0;
        let mut snapshots = Vec::new();
        // Levels 1 to `empty_to` stay empty (under dynamic budgets the
        // base level is then deep, and L0 must go there, not to L1).
        let empty_to = if rng.chance(40) {
            rng.below(num_levels as u64 - 1) as usize
        } else {
            0
        };
        // Deepest level first: each level newer than the ones below.
        for level in (0..num_levels).rev() {
            if (1..=empty_to).contains(&level) {
                continue;
            }
            // L0 gets up to 5 tables, often several overlapping ones.
            let tables = if level == 0 {
                rng.below(6)
            } else {
                rng.below(4)
            };
            let mut cuts: Vec<u64> = (0..tables * 2).map(|_| rng.below(KEYS)).collect();
            cuts.sort_unstable();
            if level > 0 {
                cuts.dedup();
            }
            let mut delete_percent = [0, 30, 70, 100][rng.below(4) as usize];
            for pair in cuts.chunks(2) {
                if level == 0 {
                    // Each L0 table its own density (dense ones over older
                    // sparse ones and the reverse), a snapshot between them.
                    delete_percent = [0, 30, 70, 100][rng.below(4) as usize];
                    if rng.chance(40) {
                        snapshots.push((db.snapshot(), seq));
                    }
                }
                let (from, to) = (pair[0], *pair.last().unwrap());
                // L0 tables may overlap each other; below L0 they are the
                // disjoint runs between the cuts.
                let (from, to) = if level == 0 {
                    (rng.below(KEYS), rng.below(KEYS))
                } else {
                    (from, to)
                };
                let (from, to) = (from.min(to), from.max(to));
                let mut entries = Vec::new();
                for i in from..=to {
                    if i != from && i != to && !rng.chance(60) {
                        continue;
                    }
                    seq += 1;
                    let k = key(i);
                    let v = if rng.chance(delete_percent) {
                        entries.push(delete(&k, seq));
                        None
                    } else {
                        entries.push(put(&k, seq));
                        Some(format!("{k}@{seq}"))
                    };
                    model.entry(k).or_default().push((seq, v));
                }
                // Before the install, which records it in the manifest.
                db.inner.last_visible.store(seq, Ordering::Release);
                place(&db, level, entries);
            }
            if rng.chance(40) {
                snapshots.push((db.snapshot(), seq));
            }
        }
        check_reads(&db, &model, &snapshots, seq, &format!("{what}: placed"));
        let l0_picks = step_picks(&db, &what);
        check_tree(&db, ratio, &what);
        check_reads(&db, &model, &snapshots, seq, &format!("{what}: stepped"));
        compact_within(&db, &what);
        check_tree(&db, ratio, &what);
        check_reads(&db, &model, &snapshots, seq, &format!("{what}: compacted"));
        // Release the snapshots one by one: cleanups, then nothing due.
        while !snapshots.is_empty() {
            let n = rng.below(snapshots.len() as u64) as usize;
            snapshots.remove(n);
            compact_within(&db, &what);
            check_tree(&db, ratio, &what);
            check_reads(&db, &model, &snapshots, seq, &format!("{what}: released"));
        }
        let picks = db.stats().deletion_compactions;
        L0_PICKS.fetch_add(l0_picks, Ordering::Relaxed);
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        compact_within(&db, &what);
        check_tree(&db, ratio, &what);
        check_reads(&db, &model, &[], seq, &format!("{what}: reopened"));
        picks + db.stats().deletion_compactions
    }

    #[test]
    fn random_trees_end_their_picks_and_answer_right() {
        let cases: u64 = std::env::var("DELETION_TREES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(40);
        let picks: u64 = (1..=cases).map(one_case).sum();
        let l0_picks = L0_PICKS.load(Ordering::Relaxed);
        assert!(
            cases < 20 || l0_picks * 10 >= cases,
            "only {l0_picks} deletion picks out of L0 in {cases} cases"
        );
        assert!(
            picks >= cases,
            "{picks} deletion-triggered picks in {cases} cases"
        );
    }
}

/// A fruitless search is remembered at the install count it read, and the
/// next install (here a table placed at L1 over the values at L3, made a
/// candidate by nothing else) moves the count past it: the candidate is
/// picked by the next pass, not hidden by the mark. A filter rebuild in
/// between (another install, candidates unchanged) is searched again too.
#[test]
fn a_remembered_fruitless_search_hides_no_candidate_an_install_brings() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    values_at_l3(&db);
    db.inner.last_visible.store(10, Ordering::Release);
    db.inner.compact_while_needed().unwrap();
    let installs = db.inner.installs.load(Ordering::Acquire);
    assert_eq!(
        db.inner.no_deletion_pick_at.load(Ordering::Acquire),
        installs,
        "the fruitless search is remembered"
    );
    db.rebuild_filters(crate::FilterPolicy::Uniform { bits_per_key: 4.0 })
        .unwrap();
    db.inner.compact_while_needed().unwrap();
    assert!(db.inner.installs.load(Ordering::Acquire) > installs);
    assert_eq!(
        db.inner.no_deletion_pick_at.load(Ordering::Acquire),
        db.inner.installs.load(Ordering::Acquire),
        "searched again after the rebuild's install"
    );
    place(
        &db,
        1,
        vec![delete("k01", 11), delete("k03", 12), put("k04", 13)],
    );
    db.inner.last_visible.store(13, Ordering::Release);
    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    assert!(s.deletion_compactions >= 1, "the candidate was hidden");
    assert_eq!(s.levels[1].tables, 0);
    assert_eq!(get(&db, "k03"), None);
    assert_eq!(get(&db, "k04").as_deref(), Some("k04@13"));
    assert_eq!(get(&db, "k02").as_deref(), Some("k02@3"));
}

/// Through flushes and the inline work after them (dynamic budgets, four
/// levels): four flushes of values reach the L0 trigger and go to L3 (the
/// base level of an empty tree), and the search that follows finds nothing
/// (remembered). Then three flushes, each left in L0 by the trigger:
/// deletes of keys held nowhere below (a dense table over no deeper data,
/// no candidate), values rewriting those keys, and deletes of keys at L3
/// (a candidate). Its flush's install moves past the remembered search,
/// and all three tables go into L3, the base level, L1 and L2 left empty:
/// the rewrites above their older deletes, the snapshots taken between the
/// flushes answered as before, and nothing more picked.
#[test]
fn a_flushed_dense_table_takes_l0_whole_into_a_deep_base_level() {
    let dir = crate::scratch_dirs::scratch_dir();
    let options = Options {
        background_work: false,
        num_levels: 4,
        dynamic_level_bytes: true,
        l1_bytes: 1 << 20,
        l0_compaction_trigger: 4,
        deletion_compaction_ratio: Some(0.5),
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    // A flush, then the inline work a write runs after it.
    let flush = |db: &Db| {
        db.flush().unwrap();
        db.inner.do_background_work().unwrap();
    };
    for round in 0..4 {
        for i in 0..20 {
            db.put(
                format!("k{i:02}").as_bytes(),
                format!("v{round}").as_bytes(),
            )
            .unwrap();
        }
        flush(&db);
    }
    let tables = |db: &Db| -> Vec<usize> {
        db.inner
            .current
            .load_full()
            .version
            .levels
            .iter()
            .map(Vec::len)
            .collect()
    };
    assert_eq!(
        tables(&db),
        vec![0, 0, 0, 1],
        "the L0 trigger's pick, into L3"
    );
    let installs = db.inner.installs.load(Ordering::Acquire);
    assert_eq!(
        db.inner.no_deletion_pick_at.load(Ordering::Acquire),
        installs
    );
    let before = db.snapshot();
    for i in 50..54 {
        db.delete(format!("k{i:02}").as_bytes()).unwrap();
    }
    flush(&db);
    let deleted = db.snapshot();
    db.put(b"k50", b"back").unwrap();
    db.put(b"k51", b"back").unwrap();
    flush(&db);
    assert_eq!(tables(&db), vec![2, 0, 0, 1], "no candidate yet");
    let rewritten = db.snapshot();
    for i in [1, 3, 5] {
        db.delete(format!("k{i:02}").as_bytes()).unwrap();
    }
    db.put(b"k02", b"new").unwrap();
    flush(&db);
    assert_eq!(db.stats().deletion_compactions, 1);
    let t = tables(&db);
    assert_eq!((t[0], t[1], t[2]), (0, 0, 0), "all of L0 into L3: {t:?}");
    let get = |s: Option<&crate::Snapshot>, k: &str| {
        match s {
            Some(s) => s.get(k.as_bytes()),
            None => db.get(k.as_bytes()),
        }
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
    };
    for (k, head, at_rewritten, at_deleted, at_before) in [
        ("k01", None, Some("v3"), Some("v3"), Some("v3")),
        ("k02", Some("new"), Some("v3"), Some("v3"), Some("v3")),
        ("k04", Some("v3"), Some("v3"), Some("v3"), Some("v3")),
        ("k50", Some("back"), Some("back"), None, None),
        ("k52", None, None, None, None),
    ] {
        assert_eq!(get(None, k).as_deref(), head, "{k}");
        assert_eq!(get(Some(&rewritten), k).as_deref(), at_rewritten, "{k}");
        assert_eq!(get(Some(&deleted), k).as_deref(), at_deleted, "{k}");
        assert_eq!(get(Some(&before), k).as_deref(), at_before, "{k}");
    }
    db.inner.compact_while_needed().unwrap();
    assert_eq!(db.stats().deletion_compactions, 1, "the picks ended");
    drop((before, deleted, rewritten));
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"k50").unwrap().as_deref(), Some(&b"back"[..]));
    assert_eq!(db.get(b"k01").unwrap(), None);
    assert_eq!(db.get(b"k53").unwrap(), None);
}
