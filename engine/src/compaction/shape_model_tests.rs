//! A model test of the tree shapes trivial moves and dynamic level budgets
//! make: runs of ascending new keys (disjoint L0 tables, so they move down
//! by manifest edits, straight to a deep base level), writes aimed at the
//! exact smallest and largest keys of live tables (and at keys that extend
//! them, so one key is a prefix of the next), heavy range deletes (the tree
//! shrinks and the base level moves), snapshots held across all of it,
//! filter rebuilds and reopens; never a full compaction. After every step
//! the store must agree with a `BTreeMap`, now and at every held snapshot,
//! and the tree must keep the order reads rely on: below L0, a key's
//! versions in a shallower level are newer than in any deeper one.

use std::collections::{BTreeMap, BTreeSet};

use bloomlsm_sstable::TableIter;

use super::targets::level_targets;
use crate::options::FilterPolicy;
use crate::{Db, Options, Snapshot};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// xorshift64: the same case every run.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub(super) fn key(n: u64) -> Vec<u8> {
    format!("k{n:06}").into_bytes()
}

pub(super) fn options(dynamic_level_bytes: bool) -> Options {
    Options {
        // Narrow tables of several small blocks, a deep tree of tiny
        // levels, compactions run inline at each write.
        memtable_bytes: 3 << 10,
        target_file_bytes: 2 << 10,
        block_size: 256,
        l1_bytes: 6 << 10,
        level_size_ratio: 3,
        num_levels: 7,
        l0_compaction_trigger: 2,
        block_cache_bytes: 16 << 10,
        background_work: false,
        dynamic_level_bytes,
        ..Options::default()
    }
}

/// `BLOOMLSM_SHAPE_CASES` more random cases (default none), for a longer
/// hunt than the fixed seeds.
fn extra_cases() -> u64 {
    std::env::var("BLOOMLSM_SHAPE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Run {
    dir: tempfile::TempDir,
    options: Options,
    db: Option<Db>,
    model: Model,
    /// Every key ever written (the keys a check reads).
    universe: BTreeSet<Vec<u8>>,
    snapshots: Vec<(Snapshot, Model)>,
    rng: Rng,
    /// The next key an ascending run writes.
    next_key: u64,
    writes: u64,
}

impl Run {
    fn new(seed: u64, dynamic: bool) -> Self {
        let options = options(dynamic);
        let dir = crate::scratch_dirs::scratch_dir();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        Self {
            dir,
            options,
            db: Some(db),
            model: Model::new(),
            universe: BTreeSet::new(),
            snapshots: Vec::new(),
            rng: Rng(seed | 1),
            next_key: 0,
            writes: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn put(&mut self, k: Vec<u8>) {
        self.writes += 1;
        let pad = self.rng.below(40) as usize;
        let mut v = format!("{}@{}", String::from_utf8_lossy(&k), self.writes).into_bytes();
        v.resize(v.len() + pad, b'.');
        self.db().put(&k, &v).unwrap();
        self.universe.insert(k.clone());
        self.model.insert(k, v);
    }

    fn delete(&mut self, k: Vec<u8>) {
        self.writes += 1;
        self.db().delete(&k).unwrap();
        self.universe.insert(k.clone());
        self.model.remove(&k);
    }

    /// New keys past every key written: disjoint from the whole tree.
    fn ascending_run(&mut self) {
        let len = 20 + self.rng.below(120);
        for _ in 0..len {
            let k = key(self.next_key);
            self.next_key += 1 + self.rng.below(2);
            self.put(k);
        }
    }

    /// Writes at the exact smallest or largest key of a live table, and at
    /// that key extended by one byte, then flushes: the new L0 table meets
    /// the old one by exactly one key at its boundary.
    fn boundary_writes(&mut self) {
        let bounds: Vec<Vec<u8>> = {
            let sv = self.db().inner.current.load();
            sv.version
                .levels
                .iter()
                .flatten()
                .flat_map(|t| [t.meta.smallest_key.clone(), t.meta.largest_key.clone()])
                .collect()
        };
        if bounds.is_empty() {
            return;
        }
        for _ in 0..1 + self.rng.below(3) {
            let b = bounds[self.rng.below(bounds.len() as u64) as usize].clone();
            let extended = [b.as_slice(), &[0]].concat();
            for k in [b, extended] {
                if self.rng.below(3) == 0 {
                    self.delete(k);
                } else {
                    self.put(k);
                }
            }
        }
        self.flush();
    }

    /// Deletes a run of consecutive written keys (and the gaps between).
    fn range_delete(&mut self) {
        let keys: Vec<Vec<u8>> = self.universe.iter().cloned().collect();
        if keys.is_empty() {
            return;
        }
        let start = self.rng.below(keys.len() as u64) as usize;
        let len = 1 + self.rng.below(keys.len() as u64 / 2 + 1) as usize;
        for k in keys.into_iter().skip(start).take(len) {
            self.delete(k);
        }
    }

    fn scattered(&mut self) {
        let keys: Vec<Vec<u8>> = self.universe.iter().cloned().collect();
        if keys.is_empty() {
            return;
        }
        for _ in 0..1 + self.rng.below(30) {
            let k = keys[self.rng.below(keys.len() as u64) as usize].clone();
            if self.rng.below(2) == 0 {
                self.delete(k);
            } else {
                self.put(k);
            }
        }
    }

    fn flush(&mut self) {
        self.db().flush().unwrap();
        self.db().inner.compact_while_needed().unwrap();
    }

    fn reopen(&mut self) {
        self.snapshots.clear();
        self.db.take().unwrap().close().unwrap();
        self.db = Some(Db::open(self.dir.path(), self.options.clone()).unwrap());
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=29 => self.ascending_run(),
            30..=49 => self.boundary_writes(),
            50..=59 => self.range_delete(),
            60..=74 => self.scattered(),
            75..=84 => {
                if self.snapshots.len() < 3 {
                    let s = self.db().snapshot();
                    self.snapshots.push((s, self.model.clone()));
                } else {
                    let i = self.rng.below(3) as usize;
                    self.snapshots.remove(i);
                }
            }
            85..=91 => self.flush(),
            92..=96 => self.reopen(),
            _ => {
                let bits = [0.0, 4.0, 10.0][self.rng.below(3) as usize];
                self.db()
                    .rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
                    .unwrap();
            }
        }
    }

    /// The store answers as the model does, now and at every snapshot.
    fn check_answers(&self, at: usize) {
        let db = self.db();
        for k in &self.universe {
            let mut absent = k.clone();
            absent.extend_from_slice(b"~");
            assert_eq!(
                db.get(k).unwrap(),
                self.model.get(k).cloned(),
                "step {at}: {k:?}"
            );
            assert_eq!(db.get(&absent).unwrap(), None, "step {at}: {absent:?}");
        }
        let scanned: Model = db
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(
            scanned == self.model,
            "step {at}: a scan differs from the model"
        );
        for (n, (s, model)) in self.snapshots.iter().enumerate() {
            for k in &self.universe {
                assert_eq!(
                    s.get(k).unwrap(),
                    model.get(k).cloned(),
                    "step {at}, snapshot {n}: {k:?}"
                );
            }
            let scanned: Model = s
                .scan::<&[u8], _>(..)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(
                scanned == *model,
                "step {at}: a scan at snapshot {n} differs"
            );
        }
    }

    /// The order reads rely on, read from the tables themselves: every
    /// version of a key in a sorted level is newer than every version of
    /// it deeper down, and L0 holds the newest of all. Also: the levels
    /// above the base level are empty and no compaction is left to run.
    fn check_tree(&self, at: usize) {
        let sv = self.db().inner.current.load();
        let levels = &sv.version.levels;
        // key -> smallest sequence seen so far, going from L0 down.
        let mut oldest_above: BTreeMap<Vec<u8>, (u64, usize)> = BTreeMap::new();
        for (level, tables) in levels.iter().enumerate() {
            let mut here: BTreeMap<Vec<u8>, (u64, u64)> = BTreeMap::new();
            for t in tables {
                assert_eq!(
                    t.meta.level, level,
                    "step {at}: table {} meta level",
                    t.meta.number
                );
                let mut range: Option<(Vec<u8>, Vec<u8>)> = None;
                for e in TableIter::new(std::sync::Arc::clone(&t.table), false) {
                    let e = e.unwrap();
                    match &mut range {
                        None => range = Some((e.user_key.clone(), e.user_key.clone())),
                        Some((_, last)) => last.clone_from(&e.user_key),
                    }
                    let r = here.entry(e.user_key).or_insert((e.seq, e.seq));
                    r.0 = r.0.min(e.seq);
                    r.1 = r.1.max(e.seq);
                }
                // A sorted level's search finds a table by the manifest's
                // range and the table is then not asked about its own
                // (`Table::get_in_range`): the two must be the keys held.
                let (smallest, largest) = range.unwrap_or_default();
                let p = t.table.properties();
                assert!(
                    (&t.meta.smallest_key, &t.meta.largest_key) == (&smallest, &largest)
                        && (&p.smallest_key, &p.largest_key) == (&smallest, &largest),
                    "step {at}: table {} at L{level}: manifest range {:?}..={:?}, \
                     properties {:?}..={:?}, entries {smallest:?}..={largest:?}",
                    t.meta.number,
                    t.meta.smallest_key,
                    t.meta.largest_key,
                    p.smallest_key,
                    p.largest_key,
                );
            }
            for (k, (min, max)) in here {
                if let Some(&(above, above_level)) = oldest_above.get(&k) {
                    assert!(
                        max < above,
                        "step {at}: {k:?} at L{level} has seq {max}, not older than \
                         seq {above} at L{above_level}"
                    );
                }
                oldest_above.insert(k, (min, level));
            }
        }
        let bytes: Vec<u64> = levels
            .iter()
            .map(|l| l.iter().map(|t| t.meta.file_size).sum())
            .collect();
        let targets = level_targets(&bytes, &self.options);
        for (level, tables) in levels.iter().enumerate().take(targets.base_level).skip(1) {
            assert!(
                tables.is_empty(),
                "step {at}: L{level} above base L{}",
                targets.base_level
            );
        }
        let pointers = vec![Vec::new(); levels.len()];
        if levels[0].len() < self.options.l0_compaction_trigger {
            assert!(
                super::pick::pick(levels, &self.options, &pointers).is_none(),
                "step {at}: a compaction is still due after compact_while_needed"
            );
        }
    }
}

fn run_case(seed: u64, dynamic: bool, steps: usize) {
    let mut run = Run::new(seed, dynamic);
    for at in 0..steps {
        run.step();
        if at % 8 == 7 {
            run.db().inner.compact_while_needed().unwrap();
            run.check_answers(at);
            run.check_tree(at);
        }
    }
    run.db().inner.compact_while_needed().unwrap();
    run.check_answers(steps);
    run.check_tree(steps);
    let stats = run.db().stats();
    let deepest = stats.levels.iter().rposition(|l| l.tables > 0).unwrap_or(0);
    eprintln!(
        "seed {seed:#x} dynamic {dynamic}: {} writes, {} trivial moves, {} compactions, deepest L{deepest}",
        run.writes, stats.trivial_moves, stats.compactions
    );
}

#[test]
fn trivial_moves_boundary_writes_and_shrinking_trees_agree_with_a_model() {
    for seed in [0x9e37_79b9_7f4a_7c15, 7] {
        run_case(seed, true, 160);
    }
    let mut seeds = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..extra_cases() {
        let seed = seeds.next();
        run_case(seed, !seed.is_multiple_of(4), 400);
    }
}

#[test]
fn the_same_shapes_under_static_level_budgets() {
    run_case(0x5851_f42d_4c95_7f2d, false, 160);
}
