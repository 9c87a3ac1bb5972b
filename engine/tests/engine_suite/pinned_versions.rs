//! Many versions of a few keys, each pinned by its own snapshot: a handful
//! of hot keys are put, deleted and put again in round after round, every
//! round flushed and followed by a snapshot (often two at the same
//! sequence), so each hot key carries dozens of live versions and
//! tombstones, spread over 64-byte blocks, many tables and every level, as
//! filler keys interleaved with the hot ones push the tables down through
//! compactions the store chooses. Snapshots are released in random order
//! (the oldest, the newest, one in the middle, one of a pair at the same
//! sequence), `rebuild_filters` switches policy now and then, and at every
//! round the head and every held snapshot are checked against their
//! models: gets of each hot key, its neighbours and absent keys beside it,
//! and a scan of the hot range. Then the snapshots go, the store settles
//! (never a full `compact()`) and is reopened, and everything is checked
//! again.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options, Snapshot};
use common::{Model, Rng, scratch_dir};

const HOT: u64 = 6;
/// Filler keys between two hot keys.
const SPREAD: u64 = 40;

fn hot(i: u64) -> Vec<u8> {
    format!("k{:06}", i * SPREAD + SPREAD / 2).into_bytes()
}

fn filler(j: u64) -> Vec<u8> {
    format!("k{j:06}").into_bytes()
}

/// Just after `hot(i)`: never written.
fn beside(i: u64) -> Vec<u8> {
    let mut k = hot(i);
    k.push(0);
    k
}

fn options(rng: &mut Rng, background_work: bool) -> Options {
    let options = Options {
        filter_policy: match rng.below(3) {
            0 => FilterPolicy::Uniform { bits_per_key: 6.0 },
            1 => FilterPolicy::Optimized { bits_per_key: 5.0 },
            _ => FilterPolicy::PerLevel(vec![9.0, 4.0, 1.0, 0.0]),
        },
        filter_kind: *rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]),
        block_size: 64,
        memtable_bytes: 600,
        target_file_bytes: 300,
        l1_bytes: 600,
        level_size_ratio: 2 + rng.below(2),
        num_levels: 6,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        dynamic_level_bytes: rng.below(2) == 0,
        background_work,
        ..Options::default()
    };
    // Half the seeds (no draw of their own, so every seed's workload stays
    // as it was) keep two table files open: reads under pinned versions
    // reopen the files the set closed.
    Options {
        max_open_files: (options.level_size_ratio == 3).then_some(2),
        ..options
    }
}

struct Pinned {
    rng: Rng,
    dir: tempfile::TempDir,
    options: Options,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model, u64)>,
    writes: u64,
    round: u64,
}

impl Pinned {
    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn put(&mut self, k: Vec<u8>) {
        self.writes += 1;
        let v = format!("v{}", self.writes).into_bytes();
        self.db().put(&k, &v).unwrap();
        self.model.insert(k, v);
    }

    fn delete(&mut self, k: Vec<u8>) {
        self.db().delete(&k).unwrap();
        self.model.remove(&k);
    }

    fn check_view(
        &self,
        what: &str,
        get: impl Fn(&[u8]) -> Option<Vec<u8>>,
        scan: impl Fn() -> Model,
        model: &Model,
    ) {
        for i in 0..HOT {
            for k in [hot(i), beside(i), filler(i * SPREAD + SPREAD / 2 - 1)] {
                assert_eq!(
                    get(&k),
                    model.get(&k).cloned(),
                    "round {} {what}: get {:?}; tables per level {:?}",
                    self.round,
                    String::from_utf8_lossy(&k),
                    self.db()
                        .stats()
                        .levels
                        .iter()
                        .map(|l| l.tables)
                        .collect::<Vec<_>>()
                );
            }
        }
        assert!(
            scan() == *model,
            "round {} {what}: scan differs",
            self.round
        );
    }

    /// The head and every held snapshot (`all`), or the head and three
    /// snapshots picked at random.
    fn check(&mut self, what: &str, all: bool) {
        let picked: Vec<usize> = if all || self.snapshots.len() <= 3 {
            (0..self.snapshots.len()).collect()
        } else {
            (0..3)
                .map(|_| self.rng.below(self.snapshots.len() as u64) as usize)
                .collect()
        };
        let db = self.db();
        self.check_view(
            &format!("{what}, head"),
            |k| db.get(k).unwrap(),
            || common::contents(db),
            &self.model,
        );
        for (s, m, round) in picked.iter().map(|&n| &self.snapshots[n]) {
            self.check_view(
                &format!("{what}, snapshot of round {round} (seq {})", s.sequence()),
                |k| s.get(k).unwrap(),
                || {
                    s.scan::<&[u8], _>(..)
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect()
                },
                m,
            );
        }
    }

    fn round(&mut self) {
        // The hot keys: a put or a delete each, sometimes twice.
        for i in 0..HOT {
            for _ in 0..1 + self.rng.below(2) {
                if self.rng.below(3) == 0 {
                    self.delete(hot(i));
                } else {
                    self.put(hot(i));
                }
            }
        }
        // Fillers around them, to make tables over the hot keys and push
        // them down.
        for _ in 0..20 {
            let j = self.rng.below(HOT * SPREAD);
            if self.rng.below(4) == 0 {
                self.delete(filler(j));
            } else {
                self.put(filler(j));
            }
        }
        if self.rng.below(2) == 0 {
            self.db().flush().unwrap();
        }
        let s = self.db().snapshot();
        self.snapshots.push((s, self.model.clone(), self.round));
        if self.rng.below(3) == 0 {
            // A second snapshot at the same sequence.
            let s = self.db().snapshot();
            self.snapshots.push((s, self.model.clone(), self.round));
        }
        if self.snapshots.len() > 30 || self.rng.below(3) == 0 {
            let n = self.snapshots.len() as u64;
            let at = match self.rng.below(3) {
                0 => 0,
                1 => n - 1,
                _ => self.rng.below(n),
            };
            self.snapshots.remove(at as usize);
        }
        if self.rng.below(25) == 0 {
            let policy = match self.rng.below(3) {
                0 => FilterPolicy::Uniform {
                    bits_per_key: self.rng.below(12) as f64,
                },
                1 => FilterPolicy::Optimized {
                    bits_per_key: 1.0 + self.rng.below(10) as f64,
                },
                _ => FilterPolicy::PerLevel(vec![0.0, 12.0, 2.0]),
            };
            self.db().rebuild_filters(policy).unwrap();
        }
        if self.options.background_work && self.rng.below(4) == 0 {
            self.db().wait_for_background_work().unwrap();
        }
        let all = self.round % 10 == 9;
        self.check("after the round", all);
        self.round += 1;
    }
}

fn run(seed: u64, background_work: bool) {
    let mut rng = Rng(seed);
    let options = options(&mut rng, background_work);
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut p = Pinned {
        rng,
        dir,
        options,
        db: Some(db),
        model: Model::new(),
        snapshots: Vec::new(),
        writes: 0,
        round: 0,
    };
    for _ in 0..200 {
        p.round();
    }
    let deepest = p.db().stats().levels.iter().rposition(|l| l.tables > 0);
    assert!(deepest >= Some(3), "the tree is not deep: {deepest:?}");
    // Released in random order, checking the rest after each.
    while !p.snapshots.is_empty() {
        let n = p.rng.below(p.snapshots.len() as u64) as usize;
        p.snapshots.remove(n);
        for _ in 0..5 {
            let j = p.rng.below(HOT * SPREAD);
            p.put(filler(j));
        }
        p.check("while releasing", false);
    }
    if p.options.background_work {
        p.db().wait_for_background_work().unwrap();
    }
    p.check("settled", true);
    p.db.take().unwrap().close().unwrap();
    p.db = Some(Db::open(p.dir.path(), p.options.clone()).unwrap());
    p.check("reopened", true);
}

#[test]
fn pinned_versions_inline() {
    for seed in 1..=3 {
        run(seed, false);
    }
}

#[test]
fn pinned_versions_background() {
    for seed in 11..=13 {
        run(seed, true);
    }
}
