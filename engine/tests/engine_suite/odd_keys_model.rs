//! Review attack on key order at table, block and level boundaries: keys
//! that are prefixes of each other ("a", "a\0", "a\0\0", "a\xff"), keys of
//! 0x00 and 0xFF bytes, keys at `max_key_bytes` (a table or block of one
//! key), eight-byte-equal keys (the level fences' ties), in a deep store of
//! narrow tables (dynamic or static budgets, deletion-triggered
//! compactions on or off), under heavy deletes, batches that write one key
//! several times, snapshots taken at batch boundaries and released in any
//! order, iterators and range scans whose bounds are those prefix keys
//! (included and excluded) held across later writes, and reopens that
//! switch the budgets. Every answer is checked against a `BTreeMap`.
//! Never a full `compact()`: every compaction is one the store chose.
//!
//! `BLOOMLSM_ODD_KEYS_SEEDS` sets the number of seeds (default 12),
//! `BLOOMLSM_ODD_KEYS_FIRST` the first; `BLOOMLSM_ODD_KEYS_BG` runs the
//! flushes and compactions on the background threads (several frozen
//! memtables then go into one L0 table), `BLOOMLSM_ODD_KEYS_SHAPE`
//! prints each seed's tree.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeSet;
use std::ops::Bound;

use bloomlsm::{Db, Options, Snapshot, WriteBatch};
use common::held_iter::HeldIter;
use common::{Model, Rng, pairs, scratch_dir};

const MAX_KEY: usize = 300;

/// Keys whose order is decided at a zero byte, a 0xFF byte, a prefix, or
/// past eight equal bytes, a few at the key size limit.
fn universe(rng: &mut Rng) -> Vec<Vec<u8>> {
    let alphabet = [0x00u8, 0x01, b'a', 0xFE, 0xFF];
    let mut keys = BTreeSet::new();
    for len in 1..=3usize {
        let combos = alphabet.len().pow(len as u32);
        for mut n in 0..combos {
            let mut k = Vec::with_capacity(len);
            for _ in 0..len {
                k.push(alphabet[n % alphabet.len()]);
                n /= alphabet.len();
            }
            keys.insert(k);
        }
    }
    for tail in [&b""[..], b"\x00", b"\x00\x00", b"\xff", b"\xff\xff", b"a"] {
        // Eight equal bytes, then the difference (fence ties).
        keys.insert([&b"fencefen"[..], tail].concat());
    }
    for len in [8, 9, 64, 200, MAX_KEY - 1, MAX_KEY] {
        keys.insert(vec![0xFF; len]);
        let mut k = vec![0xFF; len];
        k[0] = b'a';
        keys.insert(k);
    }
    // A random subset keeps each seed's tree different.
    keys.into_iter().filter(|_| rng.below(3) != 0).collect()
}

struct Run {
    dir: tempfile::TempDir,
    options: Options,
    db: Option<Db>,
    keys: Vec<Vec<u8>>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    held: Vec<HeldIter>,
    writes: u64,
    seed: u64,
}

fn range_of(model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a > b
                || (a == b
                    && !(matches!(lo, Bound::Included(_)) && matches!(hi, Bound::Included(_))))
        }
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Run {
    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn value(&mut self, rng: &mut Rng) -> Vec<u8> {
        self.writes += 1;
        let mut v = format!("v{}-", self.writes).into_bytes();
        // Now and then a value past a block.
        let len = if rng.below(8) == 0 { 200 } else { 12 };
        v.resize(len, b'.');
        v
    }

    fn bound(&self, rng: &mut Rng) -> Bound<Vec<u8>> {
        let mut k = rng.pick(&self.keys).clone();
        // Also bounds no key equals: one past a key, or its prefix.
        match rng.below(4) {
            0 => k.push(0),
            1 if k.len() > 1 => {
                k.pop();
            }
            _ => {}
        }
        match rng.below(5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(k),
            _ => Bound::Excluded(k),
        }
    }

    fn step(&mut self, rng: &mut Rng, op: usize) {
        let ctx = format!("seed {} op {op}", self.seed);
        match rng.below(100) {
            0..=39 => {
                let k = rng.pick(&self.keys).clone();
                let v = self.value(rng);
                self.db().put(&k, &v).unwrap();
                self.model.insert(k, v);
            }
            40..=64 => {
                let k = rng.pick(&self.keys).clone();
                self.db().delete(&k).unwrap();
                self.model.remove(&k);
            }
            65..=74 => {
                // One key written several times in one batch, among others.
                let mut batch = WriteBatch::new();
                let hot = rng.pick(&self.keys).clone();
                for _ in 0..1 + rng.below(6) {
                    let k = if rng.below(2) == 0 {
                        hot.clone()
                    } else {
                        rng.pick(&self.keys).clone()
                    };
                    if rng.below(3) == 0 {
                        batch.delete(&k);
                        self.model.remove(&k);
                    } else {
                        let v = self.value(rng);
                        batch.put(&k, &v);
                        self.model.insert(k, v);
                    }
                }
                self.db().write(batch).unwrap();
            }
            75..=79 => {
                let s = self.db().snapshot();
                self.snapshots.push((s, self.model.clone()));
            }
            80..=82 => {
                if !self.snapshots.is_empty() {
                    let i = rng.below(self.snapshots.len() as u64) as usize;
                    self.snapshots.remove(i);
                }
            }
            83..=86 => {
                let (lo, hi) = (self.bound(rng), self.bound(rng));
                let (it, want, what) = match rng.below(2) {
                    0 if !self.snapshots.is_empty() => {
                        let i = rng.below(self.snapshots.len() as u64) as usize;
                        let (s, seen) = &self.snapshots[i];
                        let it = s.scan((lo.clone(), hi.clone())).unwrap();
                        (
                            it,
                            range_of(seen, &lo, &hi),
                            format!("snapshot iter {lo:?}..{hi:?}"),
                        )
                    }
                    _ => {
                        let it = self.db().scan((lo.clone(), hi.clone())).unwrap();
                        (
                            it,
                            range_of(&self.model, &lo, &hi),
                            format!("iter {lo:?}..{hi:?}"),
                        )
                    }
                };
                self.held.push(HeldIter::new(it, want, what));
            }
            87..=93 => {
                let mut i = 0;
                while i < self.held.len() {
                    if self.held[i].read(1 + rng.below(4), &ctx) {
                        self.held.remove(i);
                    } else {
                        i += 1;
                    }
                }
            }
            94..=98 => self.check(rng, &ctx),
            _ => {
                if rng.below(4) == 0 {
                    self.reopen(rng);
                }
            }
        }
    }

    fn check(&self, rng: &mut Rng, ctx: &str) {
        let db = self.db();
        for k in &self.keys {
            assert_eq!(
                db.get(k).unwrap(),
                self.model.get(k).cloned(),
                "{ctx}: get {k:?}"
            );
        }
        let scanned: Model = pairs(db.scan::<&[u8], _>(..).unwrap())
            .into_iter()
            .collect();
        assert!(scanned == self.model, "{ctx}: full scan");
        for _ in 0..4 {
            let (lo, hi) = (self.bound(rng), self.bound(rng));
            let got = pairs(db.scan((lo.clone(), hi.clone())).unwrap());
            assert_eq!(
                got,
                range_of(&self.model, &lo, &hi),
                "{ctx}: scan {lo:?}..{hi:?}"
            );
        }
        for (n, (s, seen)) in self.snapshots.iter().enumerate() {
            for k in &self.keys {
                assert_eq!(
                    s.get(k).unwrap(),
                    seen.get(k).cloned(),
                    "{ctx}: snapshot {n} get {k:?}"
                );
            }
            let (lo, hi) = (self.bound(rng), self.bound(rng));
            let got = pairs(s.scan((lo.clone(), hi.clone())).unwrap());
            assert_eq!(
                got,
                range_of(seen, &lo, &hi),
                "{ctx}: snapshot {n} scan {lo:?}..{hi:?}"
            );
        }
    }

    fn reopen(&mut self, rng: &mut Rng) {
        self.held.clear();
        self.snapshots.clear();
        self.db.take().unwrap().close().unwrap();
        self.options.dynamic_level_bytes = rng.below(2) == 0;
        self.options.deletion_compaction_ratio =
            [None, Some(0.2), Some(0.6)][rng.below(3) as usize];
        self.db = Some(Db::open(self.dir.path(), self.options.clone()).unwrap());
    }
}

fn options(rng: &mut Rng) -> Options {
    let l0 = 1 + rng.below(3) as usize;
    Options {
        memtable_bytes: [512, 1024, 2048][rng.below(3) as usize],
        target_file_bytes: [256, 512, 1024][rng.below(3) as usize],
        l1_bytes: [512, 2048][rng.below(2) as usize],
        block_size: [64, 128][rng.below(2) as usize],
        level_size_ratio: 2 + rng.below(2),
        num_levels: 5 + rng.below(4) as usize,
        l0_compaction_trigger: l0,
        l0_slowdown_trigger: l0 + 1,
        l0_stop_trigger: l0 + 3,
        max_key_bytes: MAX_KEY,
        dynamic_level_bytes: rng.below(2) == 0,
        deletion_compaction_ratio: [None, Some(0.2), Some(0.6)][rng.below(3) as usize],
        background_work: std::env::var_os("BLOOMLSM_ODD_KEYS_BG").is_some(),
        max_immutable_memtables: 1 + rng.below(3) as usize,
        ..Options::default()
    }
}

#[test]
fn prefix_zero_and_ff_keys_at_every_boundary_agree_with_a_model() {
    let seeds: u64 = std::env::var("BLOOMLSM_ODD_KEYS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let first: u64 = std::env::var("BLOOMLSM_ODD_KEYS_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let mut rng = Rng(seed);
        let options = options(&mut rng);
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let keys = universe(&mut rng);
        let mut run = Run {
            dir,
            options,
            db: Some(db),
            keys,
            model: Model::new(),
            snapshots: Vec::new(),
            held: Vec::new(),
            writes: 0,
            seed,
        };
        for op in 0..1500 {
            run.step(&mut rng, op);
        }
        let ctx = format!("seed {seed} end");
        for h in &mut run.held {
            h.read(u64::MAX, &ctx);
        }
        run.check(&mut rng, &ctx);
        if std::env::var_os("BLOOMLSM_ODD_KEYS_SHAPE").is_some() {
            let st = run.db().stats();
            let tables: Vec<u64> = st.levels.iter().map(|l| l.tables).collect();
            eprintln!(
                "seed {seed}: tables per level {tables:?}, compactions {}, moves {}, cleanups {}, deletion {}",
                st.compactions, st.trivial_moves, st.bottom_cleanups, st.deletion_compactions
            );
        }
    }
}
