//! A store shared through `Arc<Db>` by several threads (puts, deletes,
//! two-key batches, gets, snapshots and iterators held across later
//! writes, `flush`, `rebuild_filters`, `wait_for_background_work`) on a
//! deep narrow tree compacting on its background threads, while every
//! mutating file operation from some point on fails (a dying device).
//!
//! Invariants checked (README / `Db` docs):
//! - each thread's keys are its own, so its model is exact: a get, a held
//!   snapshot's get and a held iterator answer exactly what the thread's
//!   acknowledged writes say, before, during and after the failure
//!   ("a write that returns `Err` ... is not visible"; reads go on after
//!   a stop);
//! - after the first failure every change is refused (the writes with
//!   `WritesStopped` once a stop is set), and nothing panics;
//! - while the store is open a second `open` and an `open_read_only` of
//!   the directory are refused with `Locked`;
//! - `close` (once the last `Arc` is gone) reports an error whenever some
//!   call saw one; reads of snapshots held past it fail with `Closed`;
//! - an immediate reopen in the same process, on the healed file system,
//!   holds every acknowledged write, never an older version nor a
//!   deleted key; a write that failed with an I/O error is there whole
//!   (both keys of a batch) or not at all; a write refused with
//!   `WritesStopped` never reached the WAL, so it is never there.
//!
//! Never a full `compact()`; no sleeps. `LIFE21_SEEDS=N` runs N seeds,
//! `LIFE21_FIRST=S` from seed S (0 by default).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, PartialWrite};
use bloomlsm::{Db, Error, FilterPolicy, Options, Snapshot, SyncMode, WriteBatch};
use common::{Rng, scratch_dir};

const THREADS: u64 = 4;
const KEYS: u64 = 48;
const OPS: u64 = 260;

fn key(t: u64, i: u64) -> Vec<u8> {
    format!("t{t}k{i:04}").into_bytes()
}

fn value(t: u64, op: u64, i: u64, rng: &mut Rng) -> Vec<u8> {
    let pad = rng.below(90) as usize;
    let mut v = format!("t{t}-op{op}-k{i}-").into_bytes();
    v.resize(v.len() + pad, b'a' + (op % 26) as u8);
    v
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// A write's pairs (`None`: a delete).
type Pairs = Vec<(Vec<u8>, Option<Vec<u8>>)>;
/// A held iterator, the pairs it must yield, and how many it has.
type HeldIter = (bloomlsm::DbIter, Vec<(Vec<u8>, Vec<u8>)>, usize);

/// What one thread leaves behind: its acknowledged state, the values of
/// writes that failed with an I/O error after the last ack of their key
/// (a batch's pairs kept together), and values refused with
/// `WritesStopped`.
#[derive(Default)]
struct Outcome {
    acked: Model,
    /// Each failed (not refused) write: its pairs (`None`: a delete).
    uncertain: Vec<Pairs>,
    refused: Vec<(Vec<u8>, Vec<u8>)>,
    saw_error: bool,
}

fn random_policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(4) {
        0 => FilterPolicy::Uniform { bits_per_key: 0.0 },
        1 => FilterPolicy::Uniform { bits_per_key: 7.5 },
        2 => FilterPolicy::Optimized { bits_per_key: 4.0 },
        _ => FilterPolicy::PerLevel(vec![12.0, 6.0, 0.5]),
    }
}

fn options(rng: &mut Rng) -> Options {
    let stop = *rng.pick(&[1, 2, 4, 8]);
    let slow = 1 + rng.below(stop as u64) as usize;
    let trigger = 1 + rng.below(slow as u64) as usize;
    Options {
        memtable_bytes: *rng.pick(&[1, 300, 1024, 3000]),
        target_file_bytes: *rng.pick(&[1, 300, 1000, u64::MAX]),
        l1_bytes: *rng.pick(&[1, 1024, u64::MAX]),
        block_size: *rng.pick(&[64, 100, 4096]),
        level_size_ratio: *rng.pick(&[2, 3, u64::MAX]),
        num_levels: *rng.pick(&[2, 3, 5, 9]),
        l0_compaction_trigger: trigger,
        l0_slowdown_trigger: slow,
        l0_stop_trigger: stop,
        max_immutable_memtables: 1 + rng.below(2) as usize,
        block_cache_bytes: *rng.pick(&[0, 512, 1 << 20]),
        max_open_files: *rng.pick(&[None, Some(1), Some(3)]),
        sync: *rng.pick(&[SyncMode::Never, SyncMode::Always]),
        filter_policy: random_policy(rng),
        dynamic_level_bytes: rng.below(2) == 0,
        background_work: rng.below(4) != 0,
        deletion_compaction_ratio: *rng.pick(&[None, None, Some(0.3), Some(1.0)]),
        ..Options::default()
    }
}

fn check_own(db: &Db, t: u64, model: &Model, at: &str) {
    for i in 0..KEYS {
        let k = key(t, i);
        let got = db.get(&k).unwrap_or_else(|e| panic!("{at}: get {i}: {e}"));
        assert_eq!(got.as_ref(), model.get(&k), "{at}: get t{t} k{i}");
    }
}

fn own_range(t: u64) -> (Vec<u8>, Vec<u8>) {
    (format!("t{t}k").into_bytes(), format!("t{t}l").into_bytes())
}

fn expected_range(model: &Model, t: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (lo, hi) = own_range(t);
    model
        .range(lo..hi)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One thread's load. `Err` of a write: `WritesStopped` is a refusal (never
/// applied); anything else a failure (maybe recovered, not visible now).
fn worker(db: &Db, t: u64, seed: u64) -> Outcome {
    let mut rng = Rng(seed ^ (t + 1).wrapping_mul(0x9e37));
    let mut out = Outcome::default();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    let mut iters: Vec<HeldIter> = Vec::new();
    let at = |op: u64| format!("seed {seed} thread {t} op {op}");
    for op in 0..OPS {
        let stopped_before = out.saw_error;
        // A write: a put, a delete or a two-key batch.
        let mut pairs: Pairs = Vec::new();
        let n = if rng.below(4) == 0 { 2 } else { 1 };
        let mut batch = WriteBatch::new();
        for _ in 0..n {
            let i = rng.below(KEYS);
            let k = key(t, i);
            if rng.below(10) < 4 {
                batch.delete(&k);
                pairs.push((k, None));
            } else {
                let v = value(t, op, i, &mut rng);
                batch.put(&k, &v);
                pairs.push((k, Some(v)));
            }
        }
        match db.write(batch) {
            Ok(()) => {
                assert!(
                    !stopped_before,
                    "{}: a write succeeded after this thread saw writes stop",
                    at(op)
                );
                for (k, v) in pairs {
                    match v {
                        Some(v) => out.acked.insert(k, v),
                        None => out.acked.remove(&k),
                    };
                }
            }
            Err(Error::WritesStopped(_)) => {
                out.saw_error = true;
                for (k, v) in pairs {
                    if let Some(v) = v {
                        out.refused.push((k, v));
                    }
                }
            }
            Err(e) => {
                assert!(
                    !matches!(e, Error::Closed | Error::Panicked(_) | Error::Internal(_)),
                    "{}: write failed with {e}",
                    at(op)
                );
                out.saw_error = true;
                out.uncertain.push(pairs);
            }
        }
        // Maintenance calls from some threads.
        let special = match (t, op % 23) {
            (0, 5) => Some(db.flush()),
            (1, 11) => Some(db.rebuild_filters(random_policy(&mut rng))),
            (2, 17) => Some(db.wait_for_background_work()),
            _ => None,
        };
        if let Some(Err(e)) = special {
            assert!(
                !matches!(e, Error::Closed | Error::Panicked(_) | Error::Internal(_)),
                "{}: maintenance failed with {e}",
                at(op)
            );
            out.saw_error = true;
        }
        // Reads of this thread's own keys: exact.
        if op % 7 == 0 {
            check_own(db, t, &out.acked, &at(op));
        } else {
            let i = rng.below(KEYS);
            let k = key(t, i);
            assert_eq!(
                db.get(&k).unwrap().as_ref(),
                out.acked.get(&k),
                "{}: get k{i}",
                at(op)
            );
        }
        if rng.below(20) == 0 && snaps.len() < 3 {
            snaps.push((db.snapshot(), out.acked.clone()));
        }
        if rng.below(25) == 0 && !snaps.is_empty() {
            let (s, m) = snaps.remove(rng.below(snaps.len() as u64) as usize);
            for i in 0..KEYS {
                let k = key(t, i);
                assert_eq!(
                    s.get(&k).unwrap().as_ref(),
                    m.get(&k),
                    "{}: snapshot get k{i}",
                    at(op)
                );
            }
        }
        if rng.below(20) == 0 && iters.len() < 2 {
            let (lo, hi) = own_range(t);
            let it = db.scan(lo..hi).unwrap();
            iters.push((it, expected_range(&out.acked, t), 0));
        }
        // Drain held iterators a few pairs at a time.
        for (it, want, pos) in &mut iters {
            for _ in 0..3 {
                match it.next() {
                    Some(r) => {
                        let pair = r.unwrap_or_else(|e| panic!("{}: iterator: {e}", at(op)));
                        assert_eq!(Some(&pair), want.get(*pos), "{}: iterator item", at(op));
                        *pos += 1;
                    }
                    None => {
                        assert_eq!(*pos, want.len(), "{}: iterator ended early", at(op));
                        break;
                    }
                }
            }
        }
        iters.retain(|(_, want, pos)| *pos < want.len());
    }
    check_own(db, t, &out.acked, &at(OPS));
    for (s, m) in &snaps {
        for i in 0..KEYS {
            let k = key(t, i);
            assert_eq!(
                s.get(&k).unwrap().as_ref(),
                m.get(&k),
                "{}: snapshot",
                at(OPS)
            );
        }
    }
    out
}

/// The value a reopened store may hold for `k`: the acknowledged one, or
/// that of a failed write to it after its last ack.
fn check_recovered(db: &Db, outcomes: &[Outcome], at: &str) -> Model {
    let mut recovered = Model::new();
    for (t, out) in outcomes.iter().enumerate() {
        // Which uncertain writes the store kept: decided per write, and
        // whole (every pair of a batch, or none).
        for i in 0..KEYS {
            let k = key(t as u64, i);
            let got = db.get(&k).unwrap();
            if let Some(v) = &got {
                recovered.insert(k.clone(), v.clone());
            }
            let acked = out.acked.get(&k);
            if got.as_ref() == acked {
                continue;
            }
            let from_failed = out
                .uncertain
                .iter()
                .flatten()
                .any(|(uk, uv)| *uk == k && uv.as_ref() == got.as_ref());
            let refused = out
                .refused
                .iter()
                .any(|(rk, rv)| *rk == k && Some(rv) == got.as_ref());
            assert!(
                from_failed,
                "{at}: t{t} k{i}: reopened store holds {:?}, acknowledged {:?}{}",
                got.as_ref()
                    .map(|v| String::from_utf8_lossy(v).into_owned()),
                acked.map(|v| String::from_utf8_lossy(v).into_owned()),
                if refused {
                    " (a write refused with WritesStopped)"
                } else {
                    ""
                }
            );
        }
        // A failed batch: all of it or none of it (only checkable where its
        // keys were not written again, and the batch's two keys differ).
        for w in &out.uncertain {
            if w.len() != 2 || w[0].0 == w[1].0 {
                continue;
            }
            let kept: Vec<bool> = w
                .iter()
                .map(|(k, v)| db.get(k).unwrap() == *v && out.acked.get(k) != v.as_ref())
                .collect();
            let differs: Vec<bool> = w
                .iter()
                .map(|(k, v)| out.acked.get(k) != v.as_ref())
                .collect();
            if differs.iter().all(|&d| d) {
                assert_eq!(
                    kept[0], kept[1],
                    "{at}: t{t}: a failed batch recovered in part"
                );
            }
        }
    }
    let all: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all, recovered, "{at}: scan after reopen");
    recovered
}

fn run(seed: u64) {
    let mut rng = Rng(seed);
    let opts = options(&mut rng);
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), opts.clone(), Arc::new(fs.clone())).unwrap();
    // From somewhere in the load on (or never: the last case of 8), every
    // mutating file operation fails (a dying device: healed before the
    // close in half the cases, so the close's own writes succeed), or just
    // one does (a transient fault).
    let arm = match seed % 8 {
        7 => None,
        _ => Some(fs.ops() + rng.below(6000)),
    };
    let transient = seed % 3 == 2;
    let heal_before_close = seed.is_multiple_of(2);
    // A failing write of a file may leave a prefix of its bytes behind.
    if seed % 5 < 2 {
        fs.set_partial_writes(PartialWrite::Seeded(seed));
    }
    // Where the close's own fsyncs work, every acknowledged write is
    // durable after it: a power loss then must not lose one.
    let power_loss = heal_before_close && seed.is_multiple_of(4);
    match arm {
        Some(n) if transient => fs.fail_only_op(n),
        Some(n) => fs.fail_from_op(n),
        None => {}
    }
    let db = Arc::new(db);
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let db = Arc::clone(&db);
                s.spawn(move || worker(&db, t, seed))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let at = format!(
        "seed {seed} ({opts:?}), armed at {arm:?} (transient {transient}, healed before close {heal_before_close}, power loss {power_loss})"
    );
    // Reads go on whatever stopped: every thread's keys as acknowledged.
    for (t, out) in outcomes.iter().enumerate() {
        check_own(&db, t as u64, &out.acked, &at);
    }
    // The directory is held: neither a writer nor a reader may open it.
    for (what, r) in [
        ("open", Db::open(dir.path(), opts.clone())),
        (
            "read-only open",
            Db::open_read_only(dir.path(), opts.clone()),
        ),
    ] {
        match r {
            Err(Error::Locked { .. }) => {}
            Err(e) => panic!("{at}: second {what}: {e}"),
            Ok(_) => panic!("{at}: second {what} of an open store succeeded"),
        }
    }
    let saw_error = outcomes.iter().any(|o| o.saw_error);
    if std::env::var_os("LIFE21_VERBOSE").is_some() {
        let acked: usize = outcomes.iter().map(|o| o.acked.len()).sum();
        let unc: usize = outcomes.iter().map(|o| o.uncertain.len()).sum();
        let stats = db.stats();
        eprintln!(
            "seed {seed}: armed {arm:?} ops {} faults {} saw_error {saw_error} acked {acked} uncertain {unc} levels {:?}",
            fs.ops(),
            fs.faults_injected(),
            stats.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
        );
    }
    let held = db.snapshot();
    let db = Arc::try_unwrap(db).unwrap();
    if heal_before_close {
        fs.heal();
    }
    let closed = db.close();
    if saw_error {
        // With the device healed, the close's own writes succeed: what it
        // reports is the stop.
        assert!(
            matches!(closed, Err(Error::WritesStopped(_))) || !heal_before_close && closed.is_err(),
            "{at}: close after writes stopped: {closed:?}"
        );
    }
    if fs.faults_injected() == 0 {
        assert!(
            closed.is_ok(),
            "{at}: close failed with no fault: {closed:?}"
        );
    }
    assert!(
        matches!(held.get(&key(0, 0)), Err(Error::Closed)),
        "{at}: a snapshot read after close"
    );
    fs.heal();
    if power_loss {
        drop(held);
        fs.simulate_power_loss().unwrap();
    }
    // Reopen at once, in this process (with the snapshot of the closed
    // store still alive unless power was lost).
    let db = Db::open_with_fs(dir.path(), opts.clone(), Arc::new(fs.clone()))
        .unwrap_or_else(|e| panic!("{at}: reopen: {e}"));
    let mut model = check_recovered(&db, &outcomes, &format!("{at}: reopen"));
    // The recovered store works: more writes, settle, close, reopen with
    // another shape.
    for op in 0..200u64 {
        let t = rng.below(THREADS);
        let i = rng.below(KEYS);
        let k = key(t, i);
        if rng.below(3) == 0 {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = value(t, 10_000 + op, i, &mut rng);
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    db.wait_for_background_work().unwrap();
    db.close().unwrap();
    let other = Options {
        num_levels: (opts.num_levels + 1).min(bloomlsm::MAX_LEVELS),
        level_size_ratio: opts.level_size_ratio.saturating_add(3),
        memtable_bytes: 1,
        max_open_files: Some(1),
        ..opts
    };
    let db = Db::open(dir.path(), other).unwrap();
    let all: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all, model, "{at}: after a second reopen");
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{at}");
    }
    db.close().unwrap();
}

fn seeds(default: u64) -> std::ops::Range<u64> {
    common::env_seeds("LIFE21_SEEDS", "LIFE21_FIRST", default)
}

#[test]
fn shared_store_under_a_dying_device_keeps_every_acknowledged_write() {
    for seed in seeds(16) {
        run(seed);
    }
}
