//! `use_direct_reads` against a `BTreeMap`, on a disk file system: the
//! model tests run in `/dev/shm`, where newer kernels accept `O_DIRECT` but
//! serve it from memory with no alignment rule, so the aligned reads, the
//! bounce buffer and the kernel's short reads at a table's tail are only
//! exercised on a real device. Invariant: every get, scan, snapshot and
//! iterator held across later writes, compactions, filter rebuilds (in
//! place and copied) and reopens answers as the model does.
//!
//! Shapes that stress the aligned reads: 64- and 128-byte blocks, so thousands of
//! blocks straddle 512- and 4096-byte boundaries; values from empty to
//! 9 KiB, so one entry's block spans several aligned units and a table's
//! end falls anywhere in its last unit; one-key tables from
//! 1-byte memtables' flushes; a 1-byte block cache, so every get is a read.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options, Snapshot};
use common::held_iter::HeldIter;
use common::{Model, Rng, disk_dir, pairs};

fn options(rng: &mut Rng) -> Options {
    Options {
        use_direct_reads: true,
        memtable_bytes: *rng.pick(&[1, 2048, 8192]),
        target_file_bytes: *rng.pick(&[1024, 4096, 40_000]),
        l1_bytes: 4096,
        block_size: *rng.pick(&[64, 128, 4096]),
        level_size_ratio: 3,
        num_levels: 6,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        // Every get of a table key reads its block from the file.
        block_cache_bytes: *rng.pick(&[1, 1, 64 << 10]),
        filter_kind: *rng.pick(&[FilterKind::Blocked, FilterKind::Ribbon]),
        filter_policy: FilterPolicy::Optimized { bits_per_key: 8.0 },
        background_work: rng.below(2) == 0,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{:05}", i * 7 % 1000).into_bytes()
}

/// A value of `len` bytes unique to write `w`.
fn value(w: u64, len: usize) -> Vec<u8> {
    let mut v = format!("w{w}-").into_bytes();
    v.extend((0..len).map(|j| (w as usize * 31 + j) as u8));
    v.truncate(len);
    v
}

/// Lengths: mostly small, some larger than a 128-byte block, some larger
/// than a 4096-byte aligned unit (one block straddles several).
fn value_len(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0 => 0,
        1..=5 => 1 + rng.below(60) as usize,
        6..=8 => 100 + rng.below(900) as usize,
        _ => 4000 + rng.below(5200) as usize,
    }
}

const UNIVERSE: u64 = 300;

struct Run {
    rng: Rng,
    dir: tempfile::TempDir,
    options: Options,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    held: Vec<HeldIter>,
    writes: u64,
}

impl Run {
    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn check_get(&self, i: u64, ctx: &str) {
        let k = key(i);
        let got = self
            .db()
            .get(&k)
            .unwrap_or_else(|e| panic!("{ctx}: get {i}: {e}"));
        assert!(
            got == self.model.get(&k).cloned(),
            "{ctx}: get {i}: got {:?} bytes, want {:?}",
            got.map(|v| v.len()),
            self.model.get(&k).map(|v| v.len())
        );
    }

    fn check_all(&self, ctx: &str) {
        let scanned: Model = pairs(self.db().scan::<&[u8], _>(..).unwrap())
            .into_iter()
            .collect();
        assert!(scanned == self.model, "{ctx}: scan");
        for i in 0..UNIVERSE {
            self.check_get(i, ctx);
        }
        for (n, (s, seen)) in self.snapshots.iter().enumerate() {
            let scanned: Model = pairs(s.scan::<&[u8], _>(..).unwrap()).into_iter().collect();
            assert!(scanned == *seen, "{ctx}: snapshot {n} scan");
            for i in (0..UNIVERSE).step_by(3) {
                assert!(
                    s.get(&key(i)).unwrap() == seen.get(&key(i)).cloned(),
                    "{ctx}: snapshot {n} get {i}"
                );
            }
        }
    }

    fn step(&mut self, n: u64) {
        let ctx = format!("op {n}");
        match self.rng.below(100) {
            0..=49 => {
                let i = self.rng.below(UNIVERSE);
                self.writes += 1;
                let v = value(self.writes, value_len(&mut self.rng));
                self.db().put(&key(i), &v).unwrap();
                self.model.insert(key(i), v);
            }
            50..=69 => {
                let i = self.rng.below(UNIVERSE);
                self.db().delete(&key(i)).unwrap();
                self.model.remove(&key(i));
            }
            70..=84 => {
                let i = self.rng.below(UNIVERSE);
                self.check_get(i, &ctx);
            }
            85..=87 => {
                // A range scan, and an iterator over it held for later.
                let (a, b) = (self.rng.below(UNIVERSE), self.rng.below(UNIVERSE));
                let (lo, hi) = (
                    key(a.min(b)).min(key(a.max(b))),
                    key(a.max(b)).max(key(a.min(b))),
                );
                let want: Vec<_> = self
                    .model
                    .range(lo.clone()..hi.clone())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let it = self.db().scan(lo..hi).unwrap();
                self.held.push(HeldIter::new(it, want, ctx.clone()));
            }
            88..=89 => {
                // Read some of every held iterator; drop finished ones.
                let c = ctx.clone();
                let k = 1 + self.rng.below(20);
                self.held.retain_mut(|h| !h.read(k, &c));
            }
            90..=91 => {
                let s = self.db().snapshot();
                self.snapshots.push((s, self.model.clone()));
                if self.snapshots.len() > 3 {
                    self.snapshots.remove(0);
                }
            }
            92..=93 => self.db().flush().unwrap(),
            94..=95 => {
                // New budgets move every level's filter: rebuilt in place
                // or copied while held iterators and snapshots read.
                let bits = *self.rng.pick(&[0.0, 3.0, 6.0, 12.0]);
                let policy = match self.rng.below(3) {
                    0 => FilterPolicy::Uniform { bits_per_key: bits },
                    1 => FilterPolicy::PerLevel(vec![bits, 2.0 * bits, 1.0]),
                    _ => FilterPolicy::Optimized { bits_per_key: bits },
                };
                self.db().rebuild_filters(policy).unwrap();
            }
            96 => {
                // Reopen: held iterators and snapshots go first.
                for h in &mut self.held {
                    while !h.read(64, &ctx) {}
                }
                self.held.clear();
                self.snapshots.clear();
                self.db.take().unwrap().close().unwrap();
                self.db = Some(Db::open(self.dir.path(), self.options.clone()).unwrap());
                self.check_all(&format!("{ctx} after reopen"));
            }
            _ => self.check_all(&ctx),
        }
    }
}

fn run_case(seed: u64, ops: u64) {
    let Some(dir) = disk_dir() else { return };
    let started = std::time::Instant::now();
    let mut rng = Rng(seed);
    let options = options(&mut rng);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut run = Run {
        rng,
        dir,
        options,
        db: Some(db),
        model: Model::new(),
        snapshots: Vec::new(),
        held: Vec::new(),
        writes: 0,
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for n in 0..ops {
            run.step(n);
        }
        let ctx = "end".to_string();
        for h in &mut run.held {
            while !h.read(64, &ctx) {}
        }
        run.db().wait_for_background_work().unwrap();
        run.check_all("end");
        let stats = run.db().stats();
        assert!(stats.total.data_blocks_read > 0);
        let depth = stats.levels.iter().rposition(|l| l.tables > 0);
        println!(
            "seed {seed:#x}: {:.1?}, deepest level {depth:?}, {} compactions, \
             {} filters built, {} unused bytes (in-place rebuilds), {} blocks read",
            started.elapsed(),
            stats.compactions,
            stats.filters_built,
            stats.total.unused_bytes,
            stats.total.data_blocks_read,
        );
    }));
    if let Err(e) = result {
        eprintln!("failing seed {seed:#x}, options {:?}", run.options);
        std::panic::resume_unwind(e);
    }
}

/// The cases of one test: `BLOOMLSM_DIRECT_SEED` (hex) replays one.
fn run_cases(first: u64) {
    match std::env::var("BLOOMLSM_DIRECT_SEED") {
        Ok(s) => run_case(
            u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap(),
            1500,
        ),
        Err(_) => {
            for seed in [first, first + 1] {
                run_case(seed, 1500);
            }
        }
    }
}

#[test]
fn direct_reads_answer_as_the_model_does_a() {
    run_cases(0xd1_5eed_0000);
}

#[test]
fn direct_reads_answer_as_the_model_does_b() {
    run_cases(0xd1_5eed_0002);
}

#[test]
fn direct_reads_answer_as_the_model_does_c() {
    run_cases(0xd1_5eed_0004);
}
