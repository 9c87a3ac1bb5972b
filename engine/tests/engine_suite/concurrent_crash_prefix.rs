//! A power loss under concurrent writers: three threads write their own
//! keys (puts, deletes, two-key batches) to a deep narrow tree that
//! flushes and compacts on its background threads, one of them calling
//! `flush` now and then; the device dies at some operation (every
//! mutating operation from there on fails, the failing write leaving a
//! prefix of its bytes or none), the store is closed (its fsyncs fail
//! too) and the power is cut (unsynced bytes lost, or kept page by page
//! or sector by sector).
//!
//! Invariants after the reopen (README: `SyncMode`, `Db::flush`, WAL
//! recovery):
//! - the store opens (damage is only ever in unsynced tails);
//! - each thread's keys hold exactly the state after some prefix of that
//!   thread's writes (writes are numbered in one log, so a power loss
//!   can cut the log, never leave a hole in it): never an older version
//!   after a newer one, never a deleted key back, never half a batch;
//! - the prefix covers every write acknowledged with `SyncMode::Always`,
//!   and with `SyncMode::Never` every write acknowledged before a
//!   `flush` that returned `Ok` began (the flush put it in a table);
//! - no write refused with `WritesStopped` is there.
//!
//! Never a full `compact()`; no sleeps. `LIFE21_SEEDS=N` runs N seeds,
//! `LIFE21_FIRST=S` from seed S (0 by default).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm::fs::fault::{FaultFs, PartialWrite, UnsyncedFate};
use bloomlsm::{Db, Error, Options, SyncMode, WriteBatch};
use common::{Rng, scratch_dir};

const THREADS: usize = 3;
const KEYS: u64 = 40;
const OPS: u64 = 300;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// One write's pairs (`None`: a delete).
type Pairs = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn key(t: usize, i: u64) -> Vec<u8> {
    format!("t{t}k{i:04}").into_bytes()
}

/// What a thread did: the writes that may have been applied, in order
/// (every acknowledged one, then at most a failed one), and how many of
/// them were acknowledged.
#[derive(Default)]
struct History {
    writes: Vec<Pairs>,
    acked: usize,
    /// Per write, how many writes each thread had acknowledged when it
    /// began: those come before it in the log.
    after: Vec<Vec<u64>>,
}

fn worker(db: &Db, t: usize, seed: u64, acked: &[AtomicU64], durable: &[AtomicU64]) -> History {
    let mut rng = Rng(seed ^ ((t as u64 + 1) << 40));
    let mut h = History::default();
    for op in 0..OPS {
        let mut pairs: Pairs = Vec::new();
        let mut batch = WriteBatch::new();
        for _ in 0..if rng.below(4) == 0 { 2 } else { 1 } {
            let i = rng.below(KEYS);
            if rng.below(10) < 4 {
                batch.delete(&key(t, i));
                pairs.push((key(t, i), None));
            } else {
                let mut v = format!("t{t}-op{op}-k{i}-").into_bytes();
                v.resize(v.len() + rng.below(60) as usize, b'v');
                batch.put(&key(t, i), &v);
                pairs.push((key(t, i), Some(v)));
            }
        }
        let seen: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        match db.write(batch) {
            Ok(()) => {
                h.after.push(seen);
                h.writes.push(pairs);
                h.acked += 1;
                acked[t].store(h.acked as u64, Ordering::SeqCst);
            }
            // Refused up front: never logged.
            Err(Error::WritesStopped(_)) => break,
            Err(_) => {
                h.after.push(seen);
                h.writes.push(pairs);
                break;
            }
        }
        if t == 0 && op % 17 == 16 {
            // Everything acknowledged (by any thread) before this flush
            // begins is in a table once it returns `Ok`.
            let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
            if db.flush().is_ok() {
                for (d, b) in durable.iter().zip(before) {
                    d.fetch_max(b, Ordering::SeqCst);
                }
            } else {
                break;
            }
        }
    }
    h
}

fn state_after(h: &History, n: usize) -> Model {
    let mut m = Model::new();
    for w in &h.writes[..n] {
        for (k, v) in w {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
    }
    m
}

fn run(seed: u64) {
    let mut rng = Rng(seed);
    let sync = if seed.is_multiple_of(3) {
        SyncMode::Always
    } else {
        SyncMode::Never
    };
    let opts = Options {
        memtable_bytes: *rng.pick(&[300, 1500, 4000]),
        target_file_bytes: *rng.pick(&[200, 1000]),
        l1_bytes: 1024,
        block_size: 64 + rng.below(200) as usize,
        level_size_ratio: 2,
        num_levels: *rng.pick(&[3, 6]),
        l0_compaction_trigger: 1 + rng.below(2) as usize,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 6,
        max_immutable_memtables: 1 + rng.below(3) as usize,
        sync,
        background_work: rng.below(4) != 0,
        ..Options::default()
    };
    let dir = scratch_dir();
    let fs = FaultFs::new();
    fs.set_partial_writes(*rng.pick(&[
        PartialWrite::Nothing,
        PartialWrite::Half,
        PartialWrite::ToPage,
        PartialWrite::Seeded(seed),
    ]));
    let db = Db::open_with_fs(dir.path(), opts.clone(), Arc::new(fs.clone())).unwrap();
    let crash_at = fs.ops() + 50 + rng.below(3000);
    fs.fail_from_op(crash_at);
    let acked: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let durable: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let histories: Vec<History> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, acked, durable) = (&db, &acked, &durable);
                s.spawn(move || worker(db, t, seed, acked, durable))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // The crash: nothing the close does reaches the device.
    fs.fail_from_op(fs.ops().min(crash_at));
    let _ = db.close();
    fs.heal();
    let fate = *rng.pick(&[
        UnsyncedFate::Truncated,
        UnsyncedFate::Pages(seed),
        UnsyncedFate::Sectors(seed),
    ]);
    fs.set_unsynced_fate(fate);
    fs.simulate_power_loss().unwrap();
    let at = format!("seed {seed} ({opts:?}), crash at op {crash_at}, {fate:?}");
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(fs.clone()))
        .unwrap_or_else(|e| panic!("{at}: reopen: {e}"));
    let all: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // Per thread, the prefixes its recovered keys match (at or past its floor).
    let mut matching: Vec<(usize, usize)> = Vec::new();
    for (t, h) in histories.iter().enumerate() {
        let prefix = format!("t{t}k").into_bytes();
        let mine: Model = all
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let floor = match sync {
            SyncMode::Always => h.acked,
            SyncMode::Never => durable[t].load(Ordering::SeqCst) as usize,
        };
        let found = (floor..=h.writes.len()).find(|&n| state_after(h, n) == mine);
        if std::env::var_os("LIFE21_VERBOSE").is_some() {
            eprintln!(
                "{at}: t{t}: {} writes, {} acked, floor {floor}, found {found:?}",
                h.writes.len(),
                h.acked
            );
        }
        if found.is_none() {
            let any = (0..=h.writes.len()).find(|&n| state_after(h, n) == mine);
            panic!(
                "{at}: thread {t}: recovered keys are the state after no prefix of \
                 {} writes ({} acknowledged) at or past {floor}; any prefix: {any:?}",
                h.writes.len(),
                h.acked
            );
        }
        for (k, v) in &mine {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{at}: get");
        }
        let last = (floor..=h.writes.len())
            .rev()
            .find(|&n| state_after(h, n) == mine)
            .unwrap();
        matching.push((found.unwrap(), last));
    }
    // Across threads: a recovered write brings every write acknowledged
    // before it began (a cut of the log, not a hole in it).
    for (b, h) in histories.iter().enumerate() {
        let surely = matching[b].0;
        for i in 0..surely {
            for (a, &(_, most)) in matching.iter().enumerate() {
                assert!(
                    most as u64 >= h.after[i][a],
                    "{at}: thread {b}'s write {i} was recovered, but thread {a} has at \
                     most {most} writes back, not the {} acknowledged before it began",
                    h.after[i][a]
                );
            }
        }
    }
    db.close().unwrap();
}

#[test]
fn a_power_loss_under_concurrent_writers_keeps_a_prefix_of_each() {
    for seed in common::env_seeds("LIFE21_SEEDS", "LIFE21_FIRST", 24) {
        run(seed);
    }
}
