//! Review attack on bottommost cleanups and read-only opens: a deep narrow
//! store under key-ordered runs (trivial moves), overwrites and heavy
//! deletes, snapshots held and released, filter rebuilds, reopen, and
//! read-only opens in between, every answer checked against a model (at
//! every held snapshot too). Never a full `compact()`.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Db, FilterPolicy, Options, Snapshot};
use common::{Model, Rng};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:07}").into_bytes()
}

fn options(background_work: bool, dynamic_level_bytes: bool) -> Options {
    Options {
        dynamic_level_bytes,
        memtable_bytes: 1024,
        target_file_bytes: 512,
        l1_bytes: 1024,
        block_size: 96,
        level_size_ratio: 2,
        num_levels: 9,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        background_work,
        ..Options::default()
    }
}

fn check(db: &Db, model: &Model, snapshots: &[(Snapshot, Model)], at: &str) {
    let got: Model = db
        .scan::<Vec<u8>, _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(&got, model, "{at}: scan");
    for (s, m) in snapshots {
        let got: Model = s
            .scan::<Vec<u8>, _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(&got, m, "{at}: scan at snapshot {}", s.sequence());
    }
}

fn check_gets(db: &Db, model: &Model, top: u64, at: &str) {
    for i in 0..top {
        let k = key(i);
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "{at}: get {i}");
    }
}

fn attack(seed: u64, background_work: bool, dynamic: bool, steps: u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(background_work, dynamic);
    let mut db = Some(Db::open(dir.path(), opts.clone()).unwrap());
    let mut rng = Rng(seed);
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut next_fresh = 0u64;
    let mut cleanups = 0;
    for step in 0..steps {
        let at = format!("seed {seed} step {step}");
        let d = db.as_ref().unwrap();
        match rng.below(100) {
            // A key-ordered run on a fresh range, with deletes inside.
            0..=19 => {
                let n = 8 + rng.below(40);
                for i in next_fresh..next_fresh + n {
                    let k = key(i);
                    let v = format!("v{step}-{i}").into_bytes();
                    d.put(&k, &v).unwrap();
                    model.insert(k.clone(), v);
                    if rng.below(4) == 0 {
                        d.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
                next_fresh += n;
            }
            // Deletes of an older range in key order.
            20..=44 => {
                if next_fresh > 0 {
                    let from = rng.below(next_fresh);
                    let n = 1 + rng.below(30);
                    for i in from..(from + n).min(next_fresh) {
                        let k = key(i);
                        d.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
            }
            // Overwrites of an older range.
            45..=64 => {
                if next_fresh > 0 {
                    let from = rng.below(next_fresh);
                    let n = 1 + rng.below(20);
                    for i in from..(from + n).min(next_fresh) {
                        let k = key(i);
                        let v = format!("o{step}-{i}").into_bytes();
                        d.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                }
            }
            65..=72 => {
                if snapshots.len() >= 3 {
                    let i = rng.below(snapshots.len() as u64) as usize;
                    snapshots.remove(i);
                }
                snapshots.push((d.snapshot(), model.clone()));
            }
            73..=79 => {
                if !snapshots.is_empty() {
                    // The oldest first, often: that is the release trigger.
                    let i = if rng.below(2) == 0 {
                        0
                    } else {
                        rng.below(snapshots.len() as u64) as usize
                    };
                    snapshots.remove(i);
                }
            }
            80..=83 => d.flush().unwrap(),
            84..=86 => d
                .rebuild_filters(FilterPolicy::Uniform {
                    bits_per_key: [0.0, 4.0, 10.0][rng.below(3) as usize],
                })
                .unwrap(),
            87..=90 => d.wait_for_background_work().unwrap(),
            91..=93 => check(d, &model, &snapshots, &at),
            94..=96 => {
                // Read-only open between two read-write ones: WAL-only
                // writes replayed into memory must answer as they did.
                snapshots.clear();
                cleanups += d.stats().bottom_cleanups;
                db.take().unwrap().close().unwrap();
                let ro = Db::open_read_only(dir.path(), opts.clone()).unwrap();
                let s = ro.snapshot();
                check(&ro, &model, &[], &format!("{at} read-only"));
                check_gets(&ro, &model, next_fresh, &format!("{at} read-only"));
                let got: Model = s
                    .scan::<Vec<u8>, _>(..)
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                assert_eq!(got, model, "{at}: read-only snapshot");
                drop(s);
                ro.close().unwrap();
                db = Some(Db::open(dir.path(), opts.clone()).unwrap());
            }
            _ => {
                snapshots.clear();
                cleanups += d.stats().bottom_cleanups;
                db.take().unwrap().close().unwrap();
                db = Some(Db::open(dir.path(), opts.clone()).unwrap());
            }
        }
    }
    let d = db.as_ref().unwrap();
    check(d, &model, &snapshots, "end");
    snapshots.clear();
    d.wait_for_background_work().unwrap();
    check(d, &model, &[], "end, settled");
    check_gets(d, &model, next_fresh, "end, settled");
    cleanups += d.stats().bottom_cleanups;
    assert!(
        cleanups > 0,
        "seed {seed}: the workload must reach bottommost cleanups"
    );
    db.take().unwrap().close().unwrap();
    let d = Db::open(dir.path(), opts).unwrap();
    check_gets(&d, &model, next_fresh, "end, reopened");
}

#[test]
fn cleanup_and_read_only_attack_inline_static() {
    for seed in 1..=3 {
        attack(seed * 7919, false, false, 400);
    }
}

#[test]
fn cleanup_and_read_only_attack_inline_dynamic() {
    for seed in 1..=3 {
        attack(seed * 104_729, false, true, 400);
    }
}

#[test]
fn cleanup_and_read_only_attack_background() {
    for seed in 1..=2 {
        attack(seed * 1_299_709, true, seed % 2 == 0, 400);
    }
}

/// Snapshots taken and dropped on other threads while the writer deletes
/// and overwrites (each drop may be the oldest's release, which asks for
/// a cleanup from the dropping thread while the compaction thread picks
/// its own): a read at a snapshot answers the same before and after the
/// cleanups that run meanwhile, and the writer's model holds at the end.
/// (Whether a cleanup is due at all depends on the interleaving: with the
/// whole key space at L5, the tombstones above it meet a deeper table and
/// are left to size-driven compactions, by design.)
#[test]
fn snapshot_reads_repeat_while_cleanups_run_on_background_threads() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let opts = options(true, false);
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    const KEYS: u64 = 600;
    // Per reader, the rounds it finished so far.
    let finished: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let readers: Vec<_> = (0..2u64)
        .map(|t| {
            let db = Arc::clone(&db);
            let stop = Arc::clone(&stop);
            let finished = Arc::clone(&finished[t as usize]);
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9 + t);
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let s = db.snapshot();
                    let from = rng.below(KEYS);
                    let probe: Vec<Vec<u8>> = (from..(from + 40).min(KEYS)).map(key).collect();
                    let first: Vec<_> = probe.iter().map(|k| s.get(k).unwrap()).collect();
                    let scan1: Model = s
                        .scan(key(from)..key(from + 40))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    std::thread::sleep(std::time::Duration::from_millis(rng.below(4)));
                    let again: Vec<_> = probe.iter().map(|k| s.get(k).unwrap()).collect();
                    let scan2: Model = s
                        .scan(key(from)..key(from + 40))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    assert_eq!(
                        first,
                        again,
                        "thread {t} round {rounds}: gets at snapshot {}",
                        s.sequence()
                    );
                    assert_eq!(
                        scan1,
                        scan2,
                        "thread {t} round {rounds}: scan at snapshot {}",
                        s.sequence()
                    );
                    drop(s);
                    rounds += 1;
                    finished.store(rounds, Ordering::Release);
                }
                rounds
            })
        })
        .collect();
    let mut rng = Rng(424_242);
    let mut model = Model::new();
    let mut held: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..3000u64 {
        let i = if step < 600 { step } else { rng.below(KEYS) };
        let k = key(i);
        if step >= 600 && rng.below(3) != 0 {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{step}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        if step % 250 == 0 {
            if held.len() >= 2 {
                held.remove(0);
            }
            held.push((db.snapshot(), model.clone()));
        }
        if step % 500 == 499 {
            check(&db, &model, &held, &format!("step {step}"));
        }
        if step == 1500 {
            // Halfway, every reader has finished a round (or ended: its
            // join reports why), so each one read beside the writes. Left
            // to the scheduler, a reader that got no CPU before the writes
            // ended counted no round and failed the check at the end.
            while finished
                .iter()
                .zip(&readers)
                .any(|(f, r)| f.load(Ordering::Acquire) == 0 && !r.is_finished())
            {
                std::thread::yield_now();
            }
        }
    }
    held.clear();
    db.wait_for_background_work().unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    check(&db, &model, &[], "end");
}
