//! Attack on tall stacks of versions: a few hot keys overwritten and
//! deleted under many held snapshots (up to 40, where the other model
//! tests hold four), so each hot key carries dozens of live versions at
//! once. One key's versions then fill several blocks and outgrow a table's
//! target size (tables are cut only between user keys), tombstones sit
//! between versions some snapshot needs, and compactions decide version by
//! version which ones a snapshot still sees. The hot keys are prefixes of
//! each other and of a key at `max_key_bytes`; values run from empty to
//! `max_value_bytes`, several blocks long. Snapshots are released in any
//! order (the oldest last or first: bottommost cleanups), iterators of the
//! head and of snapshots are held and read a few pairs at a time, and the
//! store is reopened under another block size, filter kind and policy,
//! level budgets, more levels and a smaller or larger `max_key_bytes`
//! (keys a store holds from a larger limit can still be read and deleted),
//! with new snapshots taken after each reopen. Deep narrow shapes, inline
//! work, never a full `compact()`.
//!
//! Promise checked: every get, range scan and held iterator of the head
//! and of every live snapshot answers exactly as a `BTreeMap` of the
//! acknowledged writes as of that moment; sequence numbers never go back
//! across reopens.
//!
//! `BLOOMLSM_STACKS_SEEDS` sets the number of seeds (default 6),
//! `BLOOMLSM_STACKS_FIRST` the first, `BLOOMLSM_STACKS_OPS` the operations
//! a seed (default 1,500), `BLOOMLSM_STACKS_BG=1` runs the inline test's seeds with
//! background work, `BLOOMLSM_STACKS_BG_SEEDS` the background test's seeds (default 2).
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use std::ops::Bound;

use crate::common;

use bloomlsm::{
    Db, Error, FilterKind, FilterPolicy, Options, Snapshot, SyncMode, WalRecovery, WriteBatch,
};
use common::held_iter::HeldIter;
use common::{Model, Rng, pairs, scratch_dir};

/// The most snapshots held at once.
const MAX_SNAPSHOTS: usize = 40;
/// The longest key ever written: the store's first `max_key_bytes`.
const LONG_KEY_BYTES: usize = 300;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The hot keys: prefixes of each other, a 0x00 and a 0xFF run, and one
/// key at the first open's `max_key_bytes` sharing their prefix.
fn hot_keys() -> Vec<Vec<u8>> {
    let mut long = b"h".to_vec();
    long.resize(LONG_KEY_BYTES, 0xff);
    vec![
        b"h".to_vec(),
        b"h\x00".to_vec(),
        b"h\x00\x00".to_vec(),
        b"h\x01".to_vec(),
        b"hh".to_vec(),
        b"h\xff".to_vec(),
        b"h\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
        long,
    ]
}

/// Cold keys: a numbered range on both sides of the hot keys.
fn cold_key(i: u64) -> Vec<u8> {
    let side = if i.is_multiple_of(2) { "c" } else { "k" };
    format!("{side}{:05}", i / 2).into_bytes()
}

fn random_policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(4) {
        0 => FilterPolicy::Uniform { bits_per_key: 0.0 },
        1 => FilterPolicy::Uniform {
            bits_per_key: *rng.pick(&[2.5, 10.0]),
        },
        2 => FilterPolicy::PerLevel(
            (0..1 + rng.below(8))
                .map(|_| rng.below(12) as f64)
                .collect(),
        ),
        _ => FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&[3.0, 9.5]),
        },
    }
}

/// A deep store of narrow tables; `min_levels` is the fewest a reopen may
/// ask for (never fewer than the tree has used).
fn random_options(
    rng: &mut Rng,
    min_levels: usize,
    max_key_bytes: usize,
    background_work: bool,
) -> Options {
    let l0_compaction_trigger = 1 + rng.below(4) as usize;
    let l0_slowdown_trigger = l0_compaction_trigger + rng.below(3) as usize;
    Options {
        filter_policy: random_policy(rng),
        filter_kind: *rng.pick(&[
            FilterKind::Standard,
            FilterKind::Blocked,
            FilterKind::Ribbon,
        ]),
        block_size: *rng.pick(&[64, 96, 128, 256, 512]),
        memtable_bytes: *rng.pick(&[512, 1024, 2048, 4096, 8192]),
        max_immutable_memtables: 1 + rng.below(3) as usize,
        block_cache_bytes: *rng.pick(&[0, 1, 4096, 1 << 20]),
        l0_compaction_trigger,
        l0_slowdown_trigger,
        l0_stop_trigger: l0_slowdown_trigger + rng.below(4) as usize,
        l1_bytes: *rng.pick(&[512, 1024, 2048, 4096]),
        dynamic_level_bytes: rng.below(2) == 0,
        level_size_ratio: 2 + rng.below(3),
        num_levels: (6 + rng.below(3) as usize).max(min_levels),
        target_file_bytes: *rng.pick(&[512, 1024, 2048, 4096]),
        max_key_bytes,
        max_value_bytes: 2048,
        background_work,
        sync: *rng.pick(&[SyncMode::Never, SyncMode::Always]),
        wal_recovery: *rng.pick(&[WalRecovery::TolerateTornTail, WalRecovery::PointInTime]),
        max_open_files: *rng.pick(&[None, Some(1), Some(3)]),
        deletion_compaction_ratio: *rng.pick(&[None, Some(0.2), Some(0.6)]),
        ..Options::default()
    }
}

/// A value for write `step`: empty, short, or several blocks long, up to
/// `max_value_bytes` exactly.
fn value(rng: &mut Rng, step: u64) -> Vec<u8> {
    let len = match rng.below(8) {
        0 => 0,
        1 => 2048,
        2 | 3 => 100 + rng.below(700) as usize,
        _ => rng.below(40) as usize,
    };
    let mut v = format!("{step}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (step % 26) as u8);
    v.truncate(len);
    v
}

/// Bounds of a range scan drawn from the hot keys, their neighbours and
/// the cold range (inverted and empty ranges included).
fn random_bounds(rng: &mut Rng, hot: &[Vec<u8>]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let key = |rng: &mut Rng| match rng.below(4) {
        0 => cold_key(rng.below(400)),
        1 => {
            let mut k = rng.pick(hot).clone();
            k.push(0);
            k
        }
        _ => rng.pick(hot).clone(),
    };
    let bound = |rng: &mut Rng| match rng.below(5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(key(rng)),
        _ => Bound::Excluded(key(rng)),
    };
    (bound(rng), bound(rng))
}

/// The model's pairs within `bounds`, in order (none for an inverted range).
fn model_range(
    model: &Model,
    bounds: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let inside = |k: &Vec<u8>| {
        let above = match &bounds.0 {
            Bound::Included(s) => k >= s,
            Bound::Excluded(s) => k > s,
            Bound::Unbounded => true,
        };
        let below = match &bounds.1 {
            Bound::Included(e) => k <= e,
            Bound::Excluded(e) => k < e,
            Bound::Unbounded => true,
        };
        above && below
    };
    model
        .iter()
        .filter(|(k, _)| inside(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn show(k: &[u8]) -> String {
    let s = String::from_utf8_lossy(&k[..k.len().min(12)]).into_owned();
    format!("{s:?}(len {})", k.len())
}

/// One seed's store, model, snapshots and held iterators.
struct Run {
    rng: Rng,
    seed: u64,
    dir: tempfile::TempDir,
    options: Options,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    iters: Vec<HeldIter>,
    hot: Vec<Vec<u8>>,
    step: u64,
    /// The last sequence the store reported before its last close.
    last_sequence: u64,
    /// Most snapshots held at once.
    most_snapshots: usize,
    /// Most entries the tables held per live key at a full check: how tall
    /// the stacks of versions and tombstones grew.
    tallest: f64,
}

impl Run {
    fn new(seed: u64, background_work: bool) -> Self {
        let mut rng = Rng(seed);
        let options = random_options(&mut rng, 0, LONG_KEY_BYTES, background_work);
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        Self {
            rng,
            seed,
            dir,
            options,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
            iters: Vec::new(),
            hot: hot_keys(),
            step: 0,
            last_sequence: 0,
            most_snapshots: 0,
            tallest: 0.0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn ctx(&self) -> String {
        format!("seed {} step {}", self.seed, self.step)
    }

    /// A key to write: mostly hot.
    fn write_key(&mut self) -> Vec<u8> {
        if self.rng.below(4) == 0 {
            cold_key(self.rng.below(400))
        } else {
            self.rng.pick(&self.hot).clone()
        }
    }

    fn put_allowed(&self, key: &[u8]) -> bool {
        key.len() <= self.options.max_key_bytes
    }

    fn put(&mut self) {
        let key = self.write_key();
        let value = value(&mut self.rng, self.step);
        let got = self.db().put(&key, &value);
        if self.put_allowed(&key) {
            got.unwrap_or_else(|e| panic!("{}: put {}: {e}", self.ctx(), show(&key)));
            self.model.insert(key, value);
        } else {
            assert!(
                matches!(got, Err(Error::InvalidKey { .. })),
                "{}: put of a key over max_key_bytes: {got:?}",
                self.ctx()
            );
        }
    }

    fn delete(&mut self) {
        let key = self.write_key();
        self.db()
            .delete(&key)
            .unwrap_or_else(|e| panic!("{}: delete {}: {e}", self.ctx(), show(&key)));
        self.model.remove(&key);
    }

    /// A batch naming one hot key several times, puts and deletes mixed,
    /// beside a few other keys.
    fn batch(&mut self) {
        let mut batch = WriteBatch::new();
        let mut after = self.model.clone();
        let key = self.rng.pick(&self.hot).clone();
        for _ in 0..2 + self.rng.below(6) {
            let k = if self.rng.below(3) == 0 {
                self.write_key()
            } else {
                key.clone()
            };
            if self.rng.below(2) == 0 && self.put_allowed(&k) {
                let v = value(&mut self.rng, self.step);
                batch.put(&k, &v);
                after.insert(k, v);
            } else {
                batch.delete(&k);
                after.remove(&k);
            }
        }
        self.db()
            .write(batch)
            .unwrap_or_else(|e| panic!("{}: batch: {e}", self.ctx()));
        self.model = after;
    }

    /// An empty batch: writes nothing, takes no sequence number.
    fn empty_batch(&mut self) {
        let before = self.db().last_sequence();
        self.db().write(WriteBatch::new()).unwrap();
        assert_eq!(
            self.db().last_sequence(),
            before,
            "{}: an empty batch took a sequence number",
            self.ctx()
        );
    }

    fn take_snapshot(&mut self) {
        if self.snapshots.len() >= MAX_SNAPSHOTS {
            self.release_snapshot();
        }
        let snapshot = self.db().snapshot();
        assert!(
            snapshot.sequence() >= self.last_sequence,
            "{}: snapshot at {} below the sequence {} before the reopen",
            self.ctx(),
            snapshot.sequence(),
            self.last_sequence
        );
        self.snapshots.push((snapshot, self.model.clone()));
        self.most_snapshots = self.most_snapshots.max(self.snapshots.len());
    }

    /// Releases a snapshot: the oldest, the newest or any.
    fn release_snapshot(&mut self) {
        if self.snapshots.is_empty() {
            return;
        }
        let i = match self.rng.below(3) {
            0 => 0,
            1 => self.snapshots.len() - 1,
            _ => self.rng.below(self.snapshots.len() as u64) as usize,
        };
        self.snapshots.remove(i);
    }

    /// Gets every hot key and a few cold ones at the head and at one held
    /// snapshot.
    fn check_gets(&mut self) {
        let ctx = self.ctx();
        let mut keys = self.hot.clone();
        for _ in 0..4 {
            keys.push(cold_key(self.rng.below(400)));
        }
        for k in &keys {
            let got = self.db().get(k).unwrap();
            assert_eq!(
                got.as_ref(),
                self.model.get(k),
                "{ctx}: get {} at the head",
                show(k)
            );
        }
        if self.snapshots.is_empty() {
            return;
        }
        let i = self.rng.below(self.snapshots.len() as u64) as usize;
        let (snapshot, model) = &self.snapshots[i];
        for k in &keys {
            let got = snapshot.get(k).unwrap();
            assert_eq!(
                got.as_ref(),
                model.get(k),
                "{ctx}: get {} at snapshot {} (seq {}) of {}",
                show(k),
                i,
                snapshot.sequence(),
                self.snapshots.len()
            );
        }
    }

    /// A range scan of the head or of a snapshot.
    fn check_range(&mut self) {
        let ctx = self.ctx();
        let bounds = random_bounds(&mut self.rng, &self.hot);
        let pick = self.rng.below(self.snapshots.len() as u64 + 1) as usize;
        let (got, want, what) = match self.snapshots.get(pick) {
            Some((snapshot, model)) => (
                pairs(snapshot.scan(bounds.clone()).unwrap()),
                model_range(model, &bounds),
                format!("snapshot {pick} (seq {})", snapshot.sequence()),
            ),
            None => (
                pairs(self.db().scan(bounds.clone()).unwrap()),
                model_range(&self.model, &bounds),
                "the head".to_string(),
            ),
        };
        if got != want {
            let at = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
            let item = |p: &[(Vec<u8>, Vec<u8>)]| {
                p.get(at)
                    .map(|(k, v)| format!("{}={} bytes", show(k), v.len()))
            };
            panic!(
                "{ctx}: scan {bounds:?} of {what}: first difference at item {at}: got {:?}, want \
                 {:?} ({} pairs got, {} wanted)",
                item(&got),
                item(&want),
                got.len(),
                want.len()
            );
        }
    }

    /// Full scans of the head and of every snapshot.
    fn check_all(&mut self) {
        let ctx = self.ctx();
        let got: Model = pairs(self.db().scan::<&[u8], _>(..).unwrap())
            .into_iter()
            .collect();
        assert!(got == self.model, "{ctx}: full scan of the head differs");
        let entries = self.db().stats().total.entries as f64;
        self.tallest = self.tallest.max(entries / self.model.len().max(1) as f64);
        for (i, (snapshot, model)) in self.snapshots.iter().enumerate() {
            let got: Model = pairs(snapshot.scan::<&[u8], _>(..).unwrap())
                .into_iter()
                .collect();
            if got != *model {
                let differ: Vec<String> = model
                    .keys()
                    .chain(got.keys())
                    .filter(|k| got.get(*k) != model.get(*k))
                    .map(|k| show(k))
                    .collect();
                panic!(
                    "{ctx}: full scan of snapshot {i} (seq {}) differs at {differ:?}",
                    snapshot.sequence()
                );
            }
        }
    }

    /// Opens an iterator of the head or of a snapshot, to be read later.
    fn open_iter(&mut self) {
        if self.iters.len() >= 4 {
            self.iters.remove(0);
        }
        let bounds = random_bounds(&mut self.rng, &self.hot);
        let pick = self.rng.below(self.snapshots.len() as u64 + 1) as usize;
        let held = match self.snapshots.get(pick) {
            Some((snapshot, model)) => HeldIter::new(
                snapshot.scan(bounds.clone()).unwrap(),
                model_range(model, &bounds),
                format!("iterator of snapshot {} {bounds:?}", snapshot.sequence()),
            ),
            None => HeldIter::new(
                self.db().scan(bounds.clone()).unwrap(),
                model_range(&self.model, &bounds),
                format!("iterator of the head at step {} {bounds:?}", self.step),
            ),
        };
        self.iters.push(held);
    }

    fn read_iters(&mut self) {
        let ctx = self.ctx();
        let n = 1 + self.rng.below(3);
        self.iters.retain_mut(|it| !it.read(n, &ctx));
    }

    /// The deepest level holding a table, by the tree's shape in the stats.
    fn levels_in_use(&self) -> usize {
        let stats = self.db().stats();
        stats
            .levels
            .iter()
            .rposition(|l| l.tables > 0)
            .map_or(0, |i| i + 1)
    }

    /// Closes and reopens under other options; snapshots and iterators die
    /// with the old store.
    fn reopen(&mut self) {
        self.iters.clear();
        self.snapshots.clear();
        if self.options.background_work {
            // The tree's depth is read here and must not grow before the
            // close: let the background threads finish what is due.
            self.db().wait_for_background_work().unwrap();
        }
        let min_levels = self.levels_in_use();
        let db = self.db.take().unwrap();
        self.last_sequence = db.last_sequence();
        db.close().unwrap();
        let max_key_bytes = *self.rng.pick(&[LONG_KEY_BYTES, 9, 6, LONG_KEY_BYTES + 100]);
        self.options = random_options(
            &mut self.rng,
            min_levels,
            max_key_bytes,
            self.options.background_work,
        );
        if self.rng.below(4) == 0 {
            // As few levels as the tree has used: its deepest level is now
            // the bottom, where tombstones and shadowed versions may go.
            self.options.num_levels = min_levels.max(2);
        }
        let db = Db::open(self.dir.path(), self.options.clone())
            .unwrap_or_else(|e| panic!("{}: reopen: {e}", self.ctx()));
        assert_eq!(
            db.last_sequence(),
            self.last_sequence,
            "{}: the reopen moved the last sequence",
            self.ctx()
        );
        self.db = Some(db);
        self.check_all();
    }

    fn step_once(&mut self) {
        self.step += 1;
        match self.rng.below(100) {
            0..=29 => self.put(),
            30..=44 => self.delete(),
            45..=54 => self.batch(),
            55..=69 => self.take_snapshot(),
            70..=74 => self.release_snapshot(),
            75..=80 => self.check_range(),
            81..=84 => self.open_iter(),
            85..=89 => self.read_iters(),
            90..=93 => self.db().flush().unwrap(),
            94..=95 => {
                let policy = random_policy(&mut self.rng);
                self.db().rebuild_filters(policy).unwrap();
            }
            96 if self.rng.below(4) == 0 => self.reopen(),
            97 if self.rng.below(2) == 0 => self.empty_batch(),
            _ => self.check_gets(),
        }
        if self.step.is_multiple_of(7) {
            self.check_gets();
        }
        if self.step.is_multiple_of(97) {
            self.check_all();
        }
    }
}

/// Runs `seeds` seeds from `first`, `ops` operations each.
fn run_seeds(first: u64, seeds: u64, ops: u64, background_work: bool) {
    for seed in first..first + seeds {
        let mut run = Run::new(seed, background_work);
        for _ in 0..ops {
            run.step_once();
        }
        run.check_all();
        let levels = run.levels_in_use();
        let db = run.db.take().unwrap();
        db.close().unwrap();
        println!(
            "version_stacks seed {seed} (background {background_work}): {ops} ops, levels in use \
             {levels}, most snapshots held {}, most table entries per live key {:.1}",
            run.most_snapshots, run.tallest
        );
    }
}

/// Inline work: a seed runs the same way every time.
#[test]
fn version_stacks_match_the_model() {
    let seeds = env_u64("BLOOMLSM_STACKS_SEEDS", 6);
    let first = env_u64("BLOOMLSM_STACKS_FIRST", 1);
    let ops = env_u64("BLOOMLSM_STACKS_OPS", 1500);
    run_seeds(
        first,
        seeds,
        ops,
        std::env::var_os("BLOOMLSM_STACKS_BG").is_some(),
    );
}

/// Flushes and compactions on the background threads, several frozen
/// memtables at once: which compactions run varies from run to run, the
/// answers must not.
#[test]
fn version_stacks_match_the_model_with_background_work() {
    let seeds = env_u64("BLOOMLSM_STACKS_BG_SEEDS", 2);
    let first = env_u64("BLOOMLSM_STACKS_FIRST", 1) + 50_000;
    let ops = env_u64("BLOOMLSM_STACKS_OPS", 1500);
    run_seeds(first, seeds, ops, true);
}
