//! Deep loads on stores of extreme shapes: two, three or four levels (the
//! bottom level is L1..L3, where tombstones go and every compaction into
//! it is a bottommost one); ten to fourteen levels at size ratio 2
//! (budgets that double, so data spreads over many narrow levels);
//! degenerate sizes (memtables, tables and L1 of a few bytes, L0 stopped
//! at one or two tables); and a wide L0 (compacted at 8..24 tables) under
//! values larger than a block, a table and a memtable. Tiny blocks, L0
//! triggers of 1..4 otherwise, dynamic level budgets on or off,
//! background work on or off.
//!
//! The load overwrites and deletes a few hundred keys again and again
//! (about 40% deletes, batches that write one key more than once), so
//! every key has versions and tombstones at many depths; snapshots are
//! taken and released in any order; iterators (of the store and of
//! snapshots) are held across later writes and drained a few pairs at a
//! time; `rebuild_filters` switches policies (Uniform, PerLevel,
//! Optimized, no filter) mid-load. The store is closed and reopened with
//! another filter kind, policy, sync mode, WAL recovery mode and
//! background setting, often another tree shape (fewer or more levels,
//! ratio, budgets, sizes), some times with every table rewritten as
//! table format version 1 first (so version 1 and 2 tables mix); or ended
//! as a crash would (its WALs unsealed); or a write fault is armed mid-load
//! (every write and sync fails from a near operation on: a flush,
//! compaction, rebuild, manifest or WAL write dies midway), and the store
//! is opened again on a healthy file system, with every acknowledged
//! write and the failed one whole or not at all. Every answer (gets of
//! present, deleted and never-written keys, scans, snapshot reads,
//! iterator items) is checked against a `BTreeMap`. Never a full
//! `compact()`.
//!
//! `BLOOMLSM_LEVELS_SEEDS=N` runs N seeds per shape instead of the default
//! 3, from `BLOOMLSM_LEVELS_FIRST` (1 by default); `BLOOMLSM_LEVELS_SEED=S`
//! runs one seed (decimal).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{
    Db, FilterKind, FilterPolicy, Options, Snapshot, SyncMode, WalRecovery, WriteBatch,
};
use common::format_v1::make_version_4_store;
use common::held_iter::HeldIter;
use common::{Model, Rng, scratch_dir};

/// Keys the load writes: numbers `0..KEYS`; numbers up to `UNIVERSE` are
/// asked for (the rest never written).
const KEYS: u64 = 300;
const UNIVERSE: u64 = 330;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A key between `key(i)` and `key(i + 1)`, never written.
fn beside(i: u64) -> Vec<u8> {
    format!("k{i:05}!").into_bytes()
}

fn random_policy(rng: &mut Rng) -> FilterPolicy {
    let bits = |rng: &mut Rng| match rng.below(8) {
        0 => 0.0,
        1 => 1.0,
        _ => 2.0 + rng.below(140) as f64 / 10.0,
    };
    match rng.below(4) {
        0 => FilterPolicy::Uniform {
            bits_per_key: bits(rng),
        },
        1 => FilterPolicy::PerLevel((0..1 + rng.below(6)).map(|_| bits(rng)).collect()),
        _ => FilterPolicy::Optimized {
            bits_per_key: bits(rng),
        },
    }
}

fn random_kind(rng: &mut Rng) -> FilterKind {
    *rng.pick(&[
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ])
}

/// A store of `num_levels` levels of tiny tables.
fn options(rng: &mut Rng, num_levels: usize, level_size_ratio: u64) -> Options {
    let l0_compaction_trigger = 1 + rng.below(4) as usize;
    Options {
        filter_policy: random_policy(rng),
        filter_kind: random_kind(rng),
        block_size: 64 + 64 * rng.below(3) as usize,
        memtable_bytes: 300 + rng.below(1500) as usize,
        max_immutable_memtables: 1 + rng.below(2) as usize,
        block_cache_bytes: 16 << 10,
        l0_compaction_trigger,
        l0_slowdown_trigger: l0_compaction_trigger + 2,
        l0_stop_trigger: l0_compaction_trigger + 5,
        l1_bytes: 400 + rng.below(1600),
        dynamic_level_bytes: rng.below(2) == 0,
        level_size_ratio,
        num_levels,
        target_file_bytes: 200 + rng.below(800),
        background_work: rng.below(2) == 0,
        deletion_compaction_ratio: if rng.below(3) == 0 { Some(0.3) } else { None },
        ..Options::default()
    }
}

struct Run {
    seed: u64,
    rng: Rng,
    dir: tempfile::TempDir,
    options: Options,
    fs: FaultFs,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model, u64)>,
    iters: Vec<HeldIter>,
    writes: u64,
    step: u64,
    reopens: u64,
    /// A fault is armed: the file system fails every write and sync from
    /// some operation on.
    armed: bool,
    faults: u64,
    big_values: bool,
    v1_conversions: u64,
}

impl Run {
    fn new(seed: u64, options: Options) -> Self {
        let dir = scratch_dir();
        let fs = FaultFs::new();
        let db = Db::open_with_fs(dir.path(), options.clone(), Arc::new(fs.clone())).unwrap();
        Self {
            seed,
            rng: Rng(seed ^ 0x5eed),
            dir,
            options,
            fs,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
            iters: Vec::new(),
            writes: 0,
            step: 0,
            reopens: 0,
            armed: false,
            faults: 0,
            big_values: false,
            v1_conversions: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn at(&self) -> String {
        let tables: Vec<u64> = self.db().stats().levels.iter().map(|l| l.tables).collect();
        format!(
            "seed {} step {} (reopens {}, faults {}, v1 conversions {}), tables per level {tables:?}, options {:?}",
            self.seed,
            self.step,
            self.reopens,
            self.faults,
            self.v1_conversions,
            self.db().options()
        )
    }

    fn value(&mut self, i: u64) -> Vec<u8> {
        self.writes += 1;
        let mut v = format!("v{}-{i}-", self.writes).into_bytes();
        // Now and then (with `big_values`) a value larger than a block,
        // a table and a memtable.
        let pad = if self.big_values && self.rng.below(20) == 0 {
            500 + self.rng.below(3000)
        } else {
            self.rng.below(60)
        };
        v.resize(v.len() + pad as usize, b'.');
        v
    }

    /// A key the load writes: a hot tenth most of the time.
    fn pick_key(&mut self) -> u64 {
        if self.rng.below(3) == 0 {
            self.rng.below(KEYS)
        } else {
            self.rng.below(KEYS / 10) * 10 + self.seed % 10
        }
    }

    fn check_get(&self, k: &[u8]) {
        let got = self.db().get(k).unwrap();
        let want = self.model.get(k);
        if got.as_ref() != want {
            let trace = self.db().get_traced(k).map(|(_, t)| t.steps);
            panic!(
                "get {:?}: got {:?}, want {:?}\n{}\ntrace {trace:?}",
                String::from_utf8_lossy(k),
                got.map(|v| String::from_utf8_lossy(&v).into_owned()),
                want.map(|v| String::from_utf8_lossy(v).into_owned()),
                self.at()
            );
        }
    }

    /// The next write: `(key, Some(value))` puts, `(key, None)` deletes,
    /// one batch when more than one (often writing one key twice: the
    /// last write of a key in the batch wins).
    fn next_write(&mut self) -> Vec<(u64, Option<Vec<u8>>)> {
        let n = match self.rng.below(10) {
            0..=7 => 1,
            _ => 2 + self.rng.below(11),
        };
        let mut writes: Vec<(u64, Option<Vec<u8>>)> = Vec::new();
        for _ in 0..n {
            let i = if writes.is_empty() || self.rng.below(3) != 0 {
                self.pick_key()
            } else {
                self.rng.pick(&writes).0
            };
            let v = (self.rng.below(5) >= 2).then(|| self.value(i));
            writes.push((i, v));
        }
        writes
    }

    fn apply(model: &mut Model, writes: &[(u64, Option<Vec<u8>>)]) {
        for (i, v) in writes {
            match v {
                Some(v) => model.insert(key(*i), v.clone()),
                None => model.remove(&key(*i)),
            };
        }
    }

    fn write(&mut self) {
        let writes = self.next_write();
        let result = if let [(i, v)] = writes.as_slice() {
            match v {
                Some(v) => self.db().put(&key(*i), v),
                None => self.db().delete(&key(*i)),
            }
        } else {
            let mut batch = WriteBatch::new();
            for (i, v) in &writes {
                match v {
                    Some(v) => batch.put(&key(*i), v),
                    None => batch.delete(&key(*i)),
                };
            }
            self.db().write(batch)
        };
        match result {
            Ok(()) => {
                Self::apply(&mut self.model, &writes);
                for (i, _) in &writes {
                    self.check_get(&key(*i));
                }
            }
            Err(e) => self.after_fault(e, "write", &writes),
        }
    }

    /// A failure is only expected once a fault is armed: then the store
    /// is ended and opened on a healthy file system, every acknowledged
    /// write in it and the failed one whole or not at all.
    fn after_fault(&mut self, e: bloomlsm::Error, what: &str, writes: &[(u64, Option<Vec<u8>>)]) {
        assert!(
            self.armed,
            "{what} failed with no fault armed: {e}\n{}",
            self.at()
        );
        self.armed = false;
        self.faults += 1;
        self.snapshots.clear();
        self.iters.clear();
        drop(self.db.take());
        self.fs = FaultFs::new();
        self.db = Some(
            Db::open_with_fs(
                self.dir.path(),
                self.options.clone(),
                Arc::new(self.fs.clone()),
            )
            .unwrap_or_else(|e| panic!("open after a fault: {e}\nseed {}", self.seed)),
        );
        let mut after = self.model.clone();
        Self::apply(&mut after, writes);
        let got: Vec<Option<Vec<u8>>> = writes
            .iter()
            .map(|(i, _)| self.db().get(&key(*i)).unwrap())
            .collect();
        let as_in = |m: &Model| {
            writes
                .iter()
                .zip(&got)
                .all(|((i, _), g)| m.get(&key(*i)) == g.as_ref())
        };
        if as_in(&after) {
            self.model = after;
        } else {
            assert!(
                as_in(&self.model),
                "after a fault in {what} ({e}), the failed write is neither whole nor absent\n{}",
                self.at()
            );
        }
        self.check_all("after a fault");
    }

    fn open_iter(&mut self) {
        let lo = self.rng.below(UNIVERSE);
        let hi = lo + self.rng.below(UNIVERSE);
        let (it, want, what) = if !self.snapshots.is_empty() && self.rng.below(2) == 0 {
            let n = self.rng.below(self.snapshots.len() as u64) as usize;
            let (s, m, at) = &self.snapshots[n];
            let want = m
                .range(key(lo)..key(hi))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (
                s.scan(key(lo)..key(hi)).unwrap(),
                want,
                format!("iterator of the snapshot of step {at} over {lo}..{hi}"),
            )
        } else {
            let want = self
                .model
                .range(key(lo)..key(hi))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (
                self.db().scan(key(lo)..key(hi)).unwrap(),
                want,
                format!("iterator opened at step {} over {lo}..{hi}", self.step),
            )
        };
        self.iters.push(HeldIter::new(it, want, what));
    }

    /// Drains a few pairs of each held iterator; drops the finished ones.
    fn advance_iters(&mut self) {
        let at = self.at();
        // Each held iterator one pair more than the one before it.
        let mut n = 1 + self.rng.below(6);
        self.iters.retain_mut(|h| {
            let finished = h.read(n, &at);
            n += 1;
            !finished
        });
    }

    /// Gets of every key (written, never written, beside), a full scan,
    /// and the same of every held snapshot.
    fn check_all(&self, what: &str) {
        for i in 0..UNIVERSE {
            self.check_get(&key(i));
            if i % 7 == 0 {
                self.check_get(&beside(i));
            }
        }
        let scanned: Model = self
            .db()
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert!(scanned == self.model, "{what}: scan\n{}", self.at());
        for (s, m, taken) in &self.snapshots {
            for i in 0..UNIVERSE {
                assert_eq!(
                    s.get(&key(i)).unwrap().as_ref(),
                    m.get(&key(i)),
                    "{what}: snapshot of step {taken}: get {i}\n{}",
                    self.at()
                );
            }
            let scanned: Model = s
                .scan::<&[u8], _>(..)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert!(
                scanned == *m,
                "{what}: snapshot of step {taken}: scan\n{}",
                self.at()
            );
        }
    }

    fn spot_check(&mut self) {
        for _ in 0..8 {
            let i = self.rng.below(UNIVERSE);
            self.check_get(&key(i));
        }
        if let Some(n) = (!self.snapshots.is_empty())
            .then(|| self.rng.below(self.snapshots.len() as u64) as usize)
        {
            let i = self.pick_key();
            let (s, m, taken) = &self.snapshots[n];
            assert_eq!(
                s.get(&key(i)).unwrap().as_ref(),
                m.get(&key(i)),
                "snapshot of step {taken}: get {i}\n{}",
                self.at()
            );
        }
    }

    fn reopen(&mut self) {
        self.snapshots.clear();
        self.iters.clear();
        let db = self.db.take().unwrap();
        let crash = self.rng.below(3) == 0;
        if crash {
            // Settled first, so the fault meets the close's first fsync
            // (as `common::close_unsealed`), though a background thread
            // may still take it: then the close may succeed.
            db.wait_for_background_work().unwrap();
            let ops = self.fs.ops();
            self.fs.fail_only_op(ops);
            if db.close().is_ok() {
                eprintln!(
                    "NOTE seed {} step {}: the close succeeded with op {ops} failing; faults injected: {}, ops now {}",
                    self.seed,
                    self.step,
                    self.fs.faults_injected(),
                    self.fs.ops()
                );
            }
        } else {
            db.close().unwrap();
            if self.rng.below(4) == 0 {
                make_version_4_store(self.dir.path(), self.options.block_size);
                self.v1_conversions += 1;
            }
        }
        let mut next = self.options.clone();
        next.filter_kind = random_kind(&mut self.rng);
        next.filter_policy = random_policy(&mut self.rng);
        next.background_work = self.rng.below(2) == 0;
        next.sync = *self.rng.pick(&[SyncMode::Never, SyncMode::Always]);
        next.wal_recovery = *self
            .rng
            .pick(&[WalRecovery::TolerateTornTail, WalRecovery::PointInTime]);
        if self.rng.below(3) == 0 {
            // Another tree shape: fewer or more levels (refused when a
            // table sits at a level the store no longer has), ratio,
            // budgets and sizes.
            let n = next.num_levels as i64 + self.rng.below(7) as i64 - 3;
            next.num_levels = n.clamp(2, 16) as usize;
            next.level_size_ratio = 2 + self.rng.below(3);
            next.dynamic_level_bytes = self.rng.below(2) == 0;
            if next.memtable_bytes > 64 {
                next.l1_bytes = 400 + self.rng.below(1600);
                next.target_file_bytes = 200 + self.rng.below(800);
                next.memtable_bytes = 300 + self.rng.below(1500) as usize;
            }
        }
        self.fs = FaultFs::new();
        let opened = Db::open_with_fs(self.dir.path(), next.clone(), Arc::new(self.fs.clone()));
        let db = match opened {
            Ok(db) => {
                self.options = next;
                db
            }
            Err(bloomlsm::Error::InvalidOptions(why))
                if next.num_levels < self.options.num_levels =>
            {
                assert!(why.contains("num_levels"), "{why}");
                next.num_levels = self.options.num_levels;
                self.options = next;
                Db::open_with_fs(
                    self.dir.path(),
                    self.options.clone(),
                    Arc::new(self.fs.clone()),
                )
                .unwrap()
            }
            Err(e) => panic!("reopen with {next:?}: {e}\nseed {}", self.seed),
        };
        self.db = Some(db);
        self.reopens += 1;
        self.check_all(if crash {
            "after a crash-like end"
        } else {
            "after a reopen"
        });
    }

    fn run(mut self, steps: u64) {
        for step in 0..steps {
            self.step = step;
            match self.rng.below(100) {
                0..=79 => self.write(),
                80..=84 => self.spot_check(),
                85..=87 => {
                    let s = self.db().snapshot();
                    self.snapshots.push((s, self.model.clone(), step));
                }
                88..=89 => {
                    if !self.snapshots.is_empty() {
                        let n = self.rng.below(self.snapshots.len() as u64) as usize;
                        self.snapshots.remove(n);
                    }
                }
                90..=92 => self.open_iter(),
                93..=95 => self.advance_iters(),
                96 => {
                    if let Err(e) = self.db().flush() {
                        self.after_fault(e, "flush", &[]);
                    }
                }
                97 => {
                    let policy = random_policy(&mut self.rng);
                    if let Err(e) = self.db().rebuild_filters(policy) {
                        self.after_fault(e, "rebuild_filters", &[]);
                    }
                }
                98 => match self.rng.below(8) {
                    0 | 1 if !self.armed => self.reopen(),
                    2 if !self.armed => {
                        // Writes and syncs fail from a near operation on:
                        // a flush, compaction, rebuild, manifest or WAL
                        // write dies midway.
                        self.fs.fail_from_op(self.fs.ops() + self.rng.below(300));
                        self.armed = true;
                    }
                    _ => {}
                },
                _ => {
                    if self.options.background_work
                        && let Err(e) = self.db().wait_for_background_work()
                    {
                        self.after_fault(e, "background work", &[]);
                    }
                    self.check_all("checkpoint");
                }
            }
            if self.snapshots.len() > 6 {
                self.snapshots.remove(0);
            }
            if self.iters.len() > 6 {
                self.iters.remove(0);
            }
        }
        while !self.iters.is_empty() {
            self.advance_iters();
        }
        if self.armed {
            self.fs.heal();
            match self.db().wait_for_background_work() {
                Err(e) => self.after_fault(e, "background work", &[]),
                Ok(()) => self.armed = false,
            }
        }
        self.check_all("end");
        eprintln!("  end: {}", self.at());
        self.reopen();
        self.db.take().unwrap().close().unwrap();
    }
}

fn seeds(default: u64) -> std::ops::Range<u64> {
    if let Ok(s) = std::env::var("BLOOMLSM_LEVELS_SEED") {
        let seed: u64 = s.parse().unwrap();
        return seed..seed + 1;
    }
    let first = std::env::var("BLOOMLSM_LEVELS_FIRST").map_or(1, |s| s.parse().unwrap());
    first..first + std::env::var("BLOOMLSM_LEVELS_SEEDS").map_or(default, |s| s.parse().unwrap())
}

fn run_shape(
    levels: &[usize],
    ratios: &[u64],
    steps: u64,
    default_seeds: u64,
    big_values: bool,
    shape: fn(&mut Rng, Options) -> Options,
) {
    for seed in seeds(default_seeds) {
        let mut rng = Rng(seed);
        let num_levels = *rng.pick(levels);
        let ratio = *rng.pick(ratios);
        let options = options(&mut rng, num_levels, ratio);
        let options = shape(&mut rng, options);
        eprintln!("seed {seed}: {num_levels} levels, ratio {ratio}");
        let mut run = Run::new(seed, options);
        run.big_values = big_values;
        run.run(steps);
    }
}

#[test]
fn few_levels_bottom_at_l1_to_l3() {
    run_shape(&[2, 3, 4], &[2, 3, 4], 4000, 3, false, |_, o| o);
}

#[test]
fn many_levels_at_ratio_two() {
    run_shape(&[10, 12, 14], &[2], 4000, 3, false, |_, o| o);
}

/// Sizes at their floor: memtables, tables and L1 budgets of a few bytes
/// (every write its own memtable, every entry its own table), L0
/// compacted, slowed and stopped at one table, one immutable memtable.
#[test]
fn degenerate_sizes() {
    run_shape(&[2, 3, 5, 8], &[2, 3], 1500, 3, false, |rng, o| Options {
        memtable_bytes: 1 + rng.below(64) as usize,
        target_file_bytes: 1 + rng.below(64),
        l1_bytes: 1 + rng.below(64),
        l0_compaction_trigger: 1,
        l0_slowdown_trigger: 1,
        l0_stop_trigger: 1 + rng.below(2) as usize,
        max_immutable_memtables: 1,
        ..o
    });
}

/// L0 let grow wide (compacted at 8..24 tables, stopped at 40) under
/// values now and then larger than a block, a table and a memtable, with
/// up to four immutable memtables: gets probe many overlapping L0 tables,
/// and rebuilds copy or append to many L0 tables at once.
#[test]
fn wide_l0_and_big_values() {
    run_shape(&[3, 5, 7], &[2, 4], 2500, 3, true, |rng, o| {
        let trigger = 8 + rng.below(17) as usize;
        Options {
            l0_compaction_trigger: trigger,
            l0_slowdown_trigger: trigger + 8,
            l0_stop_trigger: 40,
            max_immutable_memtables: 1 + rng.below(4) as usize,
            ..o
        }
    });
}
