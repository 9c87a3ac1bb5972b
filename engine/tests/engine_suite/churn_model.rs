//! Everything at once on deep trees of narrow tables, against a model.
//!
//! One writer (this thread) puts, deletes and writes batches that name one
//! key several times (put, delete, put), over keys that are prefixes of
//! each other, empty-adjacent (`0x00`) and `0xFF` runs, beside numbered
//! keys; meanwhile it holds up to four snapshots and four iterators
//! (bounded, of the head or of a snapshot, read a few pairs at a time),
//! calls `rebuild_filters` at random policies (so `Optimized` budgets move
//! while writes go on), flushes, reopens under other file bounds and filter
//! kinds, and opens the store read-only. Options sit near their edges: L0
//! triggers of 1 to 3 (slowdown and stop equal to them included), 2 to 8
//! levels, memtables of a few hundred bytes to 4 KiB, one open file,
//! deletion compactions. Background work on or off by seed.
//!
//! Promise checked: every get, bounded scan and iterator of the head and of
//! every live snapshot answers exactly as a `BTreeMap` of the acknowledged
//! writes at that sequence; reopens (read-write and read-only) hold exactly
//! the acknowledged writes.
//!
//! `BLOOMLSM_CHURN_SEEDS` sets the number of seeds (default 6),
//! `BLOOMLSM_CHURN_SEED` runs one, `BLOOMLSM_CHURN_OPS` the operations a
//! case (default 2,500).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::{Db, DbIter, FilterKind, FilterPolicy, Options, Snapshot, WriteBatch};
use common::{Model, Rng, read_manifest, scratch_dir};

type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// Short keys over an alphabet with the smallest and largest bytes (every
/// one of length 1 to 3 is a prefix of longer ones), then numbered keys.
fn universe() -> Vec<Vec<u8>> {
    const ALPHA: [u8; 5] = [0x00, 0x01, b'k', 0xfe, 0xff];
    let mut keys = Vec::new();
    for a in ALPHA {
        keys.push(vec![a]);
        for b in ALPHA {
            keys.push(vec![a, b]);
            for c in [0x00, b'k', 0xff] {
                keys.push(vec![a, b, c]);
            }
        }
    }
    for i in 0..160u32 {
        keys.push(format!("k{i:04}").into_bytes());
    }
    keys.push(vec![0xff; 8]);
    keys.push(vec![0xff; 9]);
    keys.sort();
    keys.dedup();
    keys
}

fn options(rng: &mut Rng) -> Options {
    let l0 = 1 + rng.below(3) as usize;
    let slowdown = l0 + rng.below(2) as usize;
    let stop = slowdown + rng.below(3) as usize;
    let target = 256 + rng.below(1800);
    Options {
        filter_policy: random_policy(rng),
        filter_kind: *rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]),
        block_size: *rng.pick(&[64, 128, 256]),
        memtable_bytes: 300 + rng.below(3800) as usize,
        max_immutable_memtables: 1 + rng.below(3) as usize,
        block_cache_bytes: *rng.pick(&[0, 1, 4096, 1 << 20]),
        l0_compaction_trigger: l0,
        l0_slowdown_trigger: slowdown,
        l0_stop_trigger: stop,
        l1_bytes: target + rng.below(3000),
        dynamic_level_bytes: rng.below(2) == 0,
        level_size_ratio: 2 + rng.below(3),
        num_levels: *rng.pick(&[2, 3, 5, 7, 8]),
        target_file_bytes: target,
        background_work: rng.below(2) == 0,
        max_open_files: *rng.pick(&[None, Some(1), Some(2)]),
        deletion_compaction_ratio: *rng.pick(&[None, Some(0.2), Some(1.0)]),
        ..Options::default()
    }
}

fn random_policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(5) {
        0 => FilterPolicy::Uniform { bits_per_key: 0.0 },
        1 => FilterPolicy::Uniform { bits_per_key: 7.0 },
        2 => FilterPolicy::PerLevel(vec![12.0, 3.0, 0.0, 6.0]),
        _ => FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&[2.0, 5.0, 10.0]),
        },
    }
}

struct Held {
    it: DbIter,
    want: Vec<(Vec<u8>, Vec<u8>)>,
    at: usize,
    what: String,
}

struct Case {
    seed: u64,
    rng: Rng,
    keys: Vec<Vec<u8>>,
    /// `None` for a writer of `multi_writer_run`, which never reopens.
    dir: Option<tempfile::TempDir>,
    /// Every key of this case starts with it (empty: the whole key space).
    prefix: Vec<u8>,
    options: Options,
    db: Option<Arc<Db>>,
    model: Model,
    snapshots: Vec<(Snapshot, Model, u64)>,
    held: Vec<Held>,
    writes: u64,
    step: u64,
}

fn in_range(k: &[u8], r: &Range) -> bool {
    let lo = match &r.0 {
        Bound::Included(s) => k >= s.as_slice(),
        Bound::Excluded(s) => k > s.as_slice(),
        Bound::Unbounded => true,
    };
    let hi = match &r.1 {
        Bound::Included(e) => k <= e.as_slice(),
        Bound::Excluded(e) => k < e.as_slice(),
        Bound::Unbounded => true,
    };
    lo && hi
}

fn expected(model: &Model, r: &Range) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| in_range(k, r))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn show(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

impl Case {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let options = options(&mut rng);
        let dir = scratch_dir();
        let db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
        Self {
            seed,
            rng,
            keys: universe(),
            dir: Some(dir),
            prefix: Vec::new(),
            options,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
            held: Vec::new(),
            writes: 0,
            step: 0,
        }
    }

    /// A writer of its own keys (those starting with `prefix`) on a store
    /// other writers write at the same time.
    fn writer(seed: u64, prefix: u8, db: Arc<Db>) -> Self {
        let options = db.options();
        Self {
            seed,
            rng: Rng(seed),
            keys: universe()
                .into_iter()
                .map(|k| [&[prefix][..], &k].concat())
                .collect(),
            dir: None,
            prefix: vec![prefix],
            options,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
            held: Vec::new(),
            writes: 0,
            step: 0,
        }
    }

    /// The bounds of this case's keys.
    fn own_range(&self) -> Range {
        match self.prefix.as_slice() {
            [] => (Bound::Unbounded, Bound::Unbounded),
            [p] => (Bound::Included(vec![*p]), Bound::Excluded(vec![*p + 1])),
            _ => unreachable!(),
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn ctx(&self) -> String {
        format!("seed {} step {}", self.seed, self.step)
    }

    /// Keys: a third from a hot dozen, the rest from the whole universe.
    fn key(&mut self) -> Vec<u8> {
        let n = self.keys.len() as u64;
        let i = if self.rng.below(3) == 0 {
            (self.rng.below(12) * 17) % n
        } else {
            self.rng.below(n)
        };
        self.keys[i as usize].clone()
    }

    fn value(&mut self) -> Vec<u8> {
        self.writes += 1;
        let mut v = format!("w{}", self.writes).into_bytes();
        let len = match self.rng.below(4) {
            0 => 0,
            1 => self.rng.below(16),
            _ => self.rng.below(150),
        } as usize;
        if len > v.len() {
            v.resize(len, b'.');
        } else if len == 0 {
            v.clear();
        }
        v
    }

    /// A bound key: a universe key, one just after it, or an edge.
    fn bound_key(&mut self) -> Vec<u8> {
        match self.rng.below(8) {
            0 => self.prefix.clone(),
            1 => [
                self.prefix.clone(),
                vec![0xff; 1 + self.rng.below(10) as usize],
            ]
            .concat(),
            2 => {
                let mut k = self.key();
                k.push(0);
                k
            }
            _ => self.key(),
        }
    }

    fn bound(&mut self) -> Bound<Vec<u8>> {
        match self.rng.below(5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(self.bound_key()),
            _ => Bound::Excluded(self.bound_key()),
        }
    }

    fn range(&mut self) -> Range {
        let (mut a, mut b) = (self.bound(), self.bound());
        // Unbounded ends stay within this case's keys.
        let (lo, hi) = self.own_range();
        if a == Bound::Unbounded {
            a = lo;
        }
        if b == Bound::Unbounded {
            b = hi;
        }
        // Mostly ordered; sometimes reversed or empty, as callers do.
        if self.rng.below(6) == 0 {
            return (a, b);
        }
        let key_of = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
            Bound::Unbounded => None,
        };
        match (key_of(&a), key_of(&b)) {
            (Some(x), Some(y)) if x > y => (b, a),
            _ => (a, b),
        }
    }

    fn put(&mut self) {
        let k = self.key();
        let v = self.value();
        self.db().put(&k, &v).unwrap();
        self.model.insert(k, v);
    }

    fn delete(&mut self) {
        let k = self.key();
        self.db().delete(&k).unwrap();
        self.model.remove(&k);
    }

    /// A batch that names one key several times (put, delete, put...) among
    /// others.
    fn batch(&mut self) {
        let mut batch = WriteBatch::new();
        let mut after = self.model.clone();
        let same = self.key();
        for _ in 0..1 + self.rng.below(8) {
            let k = if self.rng.below(2) == 0 {
                same.clone()
            } else {
                self.key()
            };
            if self.rng.below(3) == 0 {
                batch.delete(&k);
                after.remove(&k);
            } else {
                let v = self.value();
                batch.put(&k, &v);
                after.insert(k, v);
            }
        }
        self.db().write(batch).unwrap();
        self.model = after;
    }

    fn check_get(&mut self) {
        let k = self.key();
        let ctx = self.ctx();
        assert_eq!(
            self.db().get(&k).unwrap(),
            self.model.get(&k).cloned(),
            "{ctx}: get {}",
            show(&k)
        );
        for (n, (s, m, seq)) in self.snapshots.iter().enumerate() {
            assert_eq!(
                s.get(&k).unwrap(),
                m.get(&k).cloned(),
                "{ctx}: snapshot {n} (seq {seq}) get {}",
                show(&k)
            );
        }
    }

    fn check_scan(&mut self) {
        let r = self.range();
        let ctx = self.ctx();
        let snap = self.rng.below(self.snapshots.len() as u64 + 1) as usize;
        let (got, want, what) = if snap == self.snapshots.len() {
            let got: Vec<_> = self
                .db()
                .scan(r.clone())
                .unwrap()
                .map(Result::unwrap)
                .collect();
            (got, expected(&self.model, &r), "head".to_string())
        } else {
            let (s, m, seq) = &self.snapshots[snap];
            let got: Vec<_> = s.scan(r.clone()).unwrap().map(Result::unwrap).collect();
            (got, expected(m, &r), format!("snapshot {snap} (seq {seq})"))
        };
        if got != want {
            let gk: Vec<_> = got.iter().map(|(k, _)| show(k)).collect();
            let wk: Vec<_> = want.iter().map(|(k, _)| show(k)).collect();
            panic!(
                "{ctx}: {what} scan {:?}: got {} pairs {gk:?}, want {} {wk:?}",
                (r.0.as_ref().map(|k| show(k)), r.1.as_ref().map(|k| show(k))),
                got.len(),
                want.len()
            );
        }
    }

    fn open_iter(&mut self) {
        if self.held.len() >= 4 {
            self.held.remove(0);
        }
        let r = self.range();
        let snap = self.rng.below(self.snapshots.len() as u64 + 1) as usize;
        let held = if snap == self.snapshots.len() {
            Held {
                it: self.db().scan(r.clone()).unwrap(),
                want: expected(&self.model, &r),
                at: 0,
                what: format!("head iterator from step {}", self.step),
            }
        } else {
            let (s, m, _) = &self.snapshots[snap];
            Held {
                it: s.scan(r.clone()).unwrap(),
                want: expected(m, &r),
                at: 0,
                what: format!("snapshot {snap} iterator from step {}", self.step),
            }
        };
        self.held.push(held);
    }

    fn advance_iters(&mut self) {
        let ctx = self.ctx();
        let n = 1 + self.rng.below(4);
        self.held.retain_mut(|h| {
            for _ in 0..n {
                match h.it.next() {
                    Some(r) => {
                        let got = r.unwrap();
                        let want = h.want.get(h.at);
                        assert!(
                            want == Some(&got),
                            "{ctx}: {} item {}: got {}, want {:?}",
                            h.what,
                            h.at,
                            show(&got.0),
                            want.map(|(k, _)| show(k))
                        );
                        h.at += 1;
                    }
                    None => {
                        assert_eq!(h.at, h.want.len(), "{ctx}: {} ended early", h.what);
                        return false;
                    }
                }
            }
            true
        });
    }

    fn check_all(&mut self, what: &str) {
        let ctx = format!("{} ({what})", self.ctx());
        let db = self.db();
        let own = self.own_range();
        let got: Model = db.scan(own.clone()).unwrap().map(Result::unwrap).collect();
        assert!(got == self.model, "{ctx}: full scan differs");
        for k in &self.keys {
            assert_eq!(
                db.get(k).unwrap(),
                self.model.get(k).cloned(),
                "{ctx}: get {}",
                show(k)
            );
        }
        for (n, (s, m, seq)) in self.snapshots.iter().enumerate() {
            let got: Model = s.scan(own.clone()).unwrap().map(Result::unwrap).collect();
            assert!(
                got == *m,
                "{ctx}: snapshot {n} (seq {seq}) full scan differs"
            );
            for k in &self.keys {
                assert_eq!(
                    s.get(k).unwrap(),
                    m.get(k).cloned(),
                    "{ctx}: snapshot {n} (seq {seq}) get {}",
                    show(k)
                );
            }
        }
    }

    fn close(&mut self) {
        self.held.clear();
        self.snapshots.clear();
        let db = Arc::try_unwrap(self.db.take().unwrap()).ok().unwrap();
        db.close().unwrap();
    }

    /// Closes and opens again, half the time with another tree shape,
    /// L0 triggers, sizes and background setting (never fewer levels than
    /// the tree uses), sometimes read-only first.
    fn reopen(&mut self) {
        self.close();
        // Read after the close: background work may move tables deeper
        // until then.
        let deepest = read_manifest(self.dir.as_ref().unwrap().path())
            .tables
            .iter()
            .map(|t| t.level as usize)
            .max()
            .unwrap_or(0);
        if self.rng.below(2) == 0 {
            let mut fresh = options(&mut self.rng);
            fresh.num_levels = fresh.num_levels.max(deepest + 1);
            fresh.filter_policy = self.options.filter_policy.clone();
            self.options = fresh;
        }
        self.options.max_open_files = *self.rng.pick(&[None, Some(1), Some(3)]);
        self.options.filter_kind = *self.rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]);
        if self.rng.below(2) == 0 {
            let db = Db::open_read_only(self.dir.as_ref().unwrap().path(), self.options.clone())
                .unwrap();
            self.db = Some(Arc::new(db));
            self.check_all("read-only open");
            self.close();
        }
        self.db = Some(Arc::new(
            Db::open(self.dir.as_ref().unwrap().path(), self.options.clone()).unwrap(),
        ));
        self.check_all("reopen");
    }

    /// One operation; true when it asks for a reopen (done by the caller,
    /// once the helper thread has let go of the store).
    fn step(&mut self) -> bool {
        self.step += 1;
        match self.rng.below(100) {
            0..35 => self.put(),
            35..50 => self.delete(),
            50..58 => self.batch(),
            58..62 => {
                if self.snapshots.len() >= 4 {
                    let i = self.rng.below(4) as usize;
                    self.snapshots.remove(i);
                }
                let s = self.db().snapshot();
                let seq = s.sequence();
                self.snapshots.push((s, self.model.clone(), seq));
            }
            62..64 if !self.snapshots.is_empty() => {
                let i = self.rng.below(self.snapshots.len() as u64) as usize;
                self.snapshots.remove(i);
            }
            64..68 => self.open_iter(),
            68..78 => self.check_get(),
            78..84 => self.check_scan(),
            84..86 => self.db().flush().unwrap(),
            86 => {
                let p = random_policy(&mut self.rng);
                self.db().rebuild_filters(p).unwrap();
            }
            87 if self.rng.below(4) == 0 && self.dir.is_some() => return true,
            88 if self.options.background_work => self.db().wait_for_background_work().unwrap(),
            _ => {}
        }
        self.advance_iters();
        if self.step.is_multiple_of(250) {
            self.check_all("periodic");
        }
        false
    }
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap())
}

/// Beside the writer: filter rebuilds at random policies, flushes and
/// settles, and snapshots read twice (a scan, then a get of each pair and
/// a second scan: a snapshot's answers never change).
fn helper(db: Arc<Db>, stop: &AtomicBool, seed: u64) {
    let mut rng = Rng(seed ^ 0x5eed);
    while !stop.load(Ordering::Acquire) {
        match rng.below(4) {
            0 => db.rebuild_filters(random_policy(&mut rng)).unwrap(),
            1 => db.flush().unwrap(),
            2 if db.options().background_work => db.wait_for_background_work().unwrap(),
            _ => {
                let s = db.snapshot();
                let first: Vec<_> = s
                    .scan::<&[u8], _>(..)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                for (k, v) in &first {
                    assert_eq!(
                        s.get(k).unwrap().as_ref(),
                        Some(v),
                        "seed {seed}: helper snapshot at {} get {}",
                        s.sequence(),
                        show(k)
                    );
                }
                let again: Vec<_> = s
                    .scan::<&[u8], _>(..)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                assert!(first == again, "seed {seed}: helper snapshot scan changed");
            }
        }
    }
}

/// Stops the helper also when the thread holding it panics (else the
/// thread scope would wait for the helper forever).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn run(seed: u64, ops: u64, with_helper: bool) {
    let mut case = Case::new(seed);
    let mut done = 0;
    while done < ops {
        let stop = AtomicBool::new(false);
        let reopen = std::thread::scope(|s| {
            let h = with_helper.then(|| {
                let db = Arc::clone(case.db.as_ref().unwrap());
                let stop = &stop;
                s.spawn(move || helper(db, stop, seed + done))
            });
            let _stop = StopOnDrop(&stop);
            let mut reopen = false;
            while done < ops && !reopen {
                done += 1;
                reopen = case.step();
            }
            stop.store(true, Ordering::Release);
            if let Some(h) = h {
                h.join().unwrap();
            }
            reopen
        });
        if reopen {
            case.reopen();
        }
    }
    case.check_all("end");
    let levels: Vec<u64> = case.db().stats().levels.iter().map(|l| l.tables).collect();
    case.reopen();
    case.close();
    println!("seed {seed}: {ops} ops, tables per level {levels:?}");
}

#[test]
fn churn_against_a_model() {
    let ops = env("BLOOMLSM_CHURN_OPS").unwrap_or(2_500);
    let helper = env("BLOOMLSM_CHURN_HELPER").is_none_or(|h| h != 0);
    if let Some(seed) = env("BLOOMLSM_CHURN_SEED") {
        run(seed, ops, helper);
        return;
    }
    let seeds = env("BLOOMLSM_CHURN_SEEDS").unwrap_or(6);
    let base = env("BLOOMLSM_CHURN_BASE").unwrap_or(0xC0DE_0000);
    for seed in 0..seeds {
        run(base + seed, ops, helper);
    }
}

/// Three writers at once, each putting, deleting and batching its own
/// keys (a one-byte prefix each) with its own snapshots and iterators, on
/// one store, while the helper rebuilds filters and flushes: each writer's
/// reads of its own keys answer exactly as its model (its writes are
/// ordered, and no other writer touches them), however the writers' batches,
/// memtable switches, flushes and compactions interleave. Then the store is
/// closed and every writer's keys are checked after a reopen.
fn multi_writer_run(seed: u64, ops: u64) {
    let mut rng = Rng(seed);
    let options = options(&mut rng);
    let dir = scratch_dir();
    let mut db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
    let mut models: Vec<Model> = vec![Model::new(); 3];
    for round in 0..3u64 {
        let stop = AtomicBool::new(false);
        models = std::thread::scope(|s| {
            let helper_db = Arc::clone(&db);
            let stop = &stop;
            let h = s.spawn(move || helper(helper_db, stop, seed + round));
            let _stop = StopOnDrop(stop);
            let writers: Vec<_> = models
                .iter()
                .enumerate()
                .map(|(t, model)| {
                    let db = Arc::clone(&db);
                    let model = model.clone();
                    s.spawn(move || {
                        let mut case =
                            Case::writer(seed * 31 + round * 7 + t as u64, 0x10 + t as u8, db);
                        case.model = model;
                        case.writes = round * 1_000_000;
                        for _ in 0..ops {
                            case.step();
                        }
                        case.check_all("writer end");
                        case.held.clear();
                        case.snapshots.clear();
                        case.model
                    })
                })
                .collect();
            let models: Vec<Model> = writers.into_iter().map(|w| w.join().unwrap()).collect();
            stop.store(true, Ordering::Release);
            h.join().unwrap();
            models
        });
        Arc::try_unwrap(db).ok().unwrap().close().unwrap();
        db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
        let all: Model = db
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want: Model = models
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(
            all == want,
            "seed {seed} round {round}: store after reopen differs"
        );
    }
    println!("seed {seed}: 3 writers x 3 rounds x {ops} ops");
}

#[test]
fn concurrent_writers_of_their_own_keys_against_models() {
    let ops = env("BLOOMLSM_CHURN_OPS").unwrap_or(2_500) / 3;
    if let Some(seed) = env("BLOOMLSM_CHURN_SEED") {
        multi_writer_run(seed, ops);
        return;
    }
    let seeds = env("BLOOMLSM_CHURN_SEEDS").unwrap_or(4);
    let base = env("BLOOMLSM_CHURN_BASE").unwrap_or(0xBEEF_0000);
    for seed in 0..seeds {
        multi_writer_run(base + seed, ops);
    }
}
