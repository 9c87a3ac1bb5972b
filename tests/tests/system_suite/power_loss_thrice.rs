//! Three power losses: one in a session on a deep tree of narrow tables
//! while snapshots and iterators are held across the compactions that
//! session ran, one inside the open that recovers from it, and one inside
//! the open that recovers from that (its replay flush, manifest, orphan
//! removal, over whatever the second loss left half done), under out of
//! order pages or sectors (a page torn inside), the failing write
//! leaving a prefix of its bytes or not, seeded renames and revived unlinks at every loss, in both
//! sync modes.
//!
//! Invariants checked:
//! - while the session runs, and after its crash, every held snapshot
//!   reads exactly the writes acknowledged before it and every held
//!   iterator yields exactly the pairs of its moment, whatever the
//!   compactions did meanwhile;
//! - a clean open of the first loss's leftovers holds every acknowledged
//!   write (`SyncMode::Always`) or a prefix of them (`Never`), with the
//!   newest version of each key and no deleted key back;
//! - after the second and the third loss the store answers exactly as
//!   that clean open (same contents, same last sequence), a get agrees
//!   with the scan on every key the workload wrote, and no table file is
//!   left that the store does not name.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::partial;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, PartialWrite, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, DbIter, Snapshot, SyncMode};
use bloomlsm_tests::{close_with_no_orphan_table, copy_store_dir, scratch_dir};
use partial::{Contents, Log, checked_contents, deep_options, writes};

/// Writes of the session.
const WRITES: usize = 800;
/// A snapshot and an iterator are taken every this many writes.
const HOLD_EVERY: usize = 170;

/// First crashes tried: every `step()`-th operation of a clean session
/// (`CRASHSWEEP_STEP` to choose).
fn step() -> u64 {
    std::env::var("CRASHSWEEP_STEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(61)
}

/// A fault-injecting file system failing every operation from `at` on
/// (the first failing write perhaps leaving a prefix of its bytes), its
/// fates drawn from `seed`.
fn crashing_fs(at: u64, seed: u64) -> FaultFs {
    let fs = FaultFs::new();
    fs.set_unsynced_fate(if seed.is_multiple_of(2) {
        UnsyncedFate::Pages(seed)
    } else {
        UnsyncedFate::Sectors(seed)
    });
    fs.set_rename_fate(RenameFate::Seeded(seed ^ 0x5a));
    fs.set_revival(Revival::Seeded(seed.wrapping_add(1)));
    // The failing write leaves a prefix of its bytes, or nothing.
    fs.set_partial_writes(match seed % 3 {
        0 => PartialWrite::Nothing,
        1 => PartialWrite::Seeded(seed),
        _ => PartialWrite::ToPage,
    });
    fs.fail_from_op(at);
    fs
}

/// A snapshot and an iterator held across the session: what each must
/// still read.
struct Held {
    snapshot: Snapshot,
    at_snapshot: Contents,
    iter: DbIter,
    /// The pairs the iterator has yet to yield, in order.
    iter_rest: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Held {
    fn take(db: &Db, model: &Contents) -> Self {
        Self {
            snapshot: db.snapshot(),
            at_snapshot: model.clone(),
            iter: db.scan::<&[u8], _>(..).unwrap(),
            iter_rest: model
                .iter()
                .rev()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Steps the iterator once (if it has pairs left) and checks the pair.
    fn step(&mut self, what: &str) {
        let want = self.iter_rest.pop();
        let got = self.iter.next().map(|r| r.unwrap());
        assert_eq!(got, want, "{what}: a held iterator yielded another pair");
    }

    /// Checks everything the snapshot reads and the iterator's rest.
    fn check_all(&mut self, what: &str) {
        let scan: Contents = self
            .snapshot
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert!(
            scan == self.at_snapshot,
            "{what}: a held snapshot's scan changed"
        );
        for k in 0..partial::KEYS {
            let key = format!("key{k:03}").into_bytes();
            assert_eq!(
                self.snapshot.get(&key).unwrap(),
                self.at_snapshot.get(&key).cloned(),
                "{what}: a held snapshot's get of {} changed",
                String::from_utf8_lossy(&key)
            );
        }
        while !self.iter_rest.is_empty() {
            self.step(what);
        }
        assert!(
            self.iter.next().is_none(),
            "{what}: a held iterator went on"
        );
    }
}

/// The session, crashing at operation `at` (never, for `u64::MAX`), in
/// `dir`, then a power loss. Returns the session's log and its operations.
fn session(dir: &Path, sync: SyncMode, at: u64) -> (Log, u64) {
    let what = format!("{sync:?}: session crashing at {at}");
    let fs = crashing_fs(at, at);
    let mut log = Log::default();
    if let Ok(db) = Db::open_with_fs(dir, deep_options(sync), Arc::new(fs.clone())) {
        let mut model = Contents::new();
        let mut held: Vec<Held> = Vec::new();
        for (i, w) in writes(0, WRITES).iter().enumerate() {
            if !log.apply(&db, w) {
                break;
            }
            match &w.1 {
                Some(v) => model.insert(w.0.clone(), v.clone()),
                None => model.remove(&w.0),
            };
            if i % HOLD_EVERY == HOLD_EVERY / 2 {
                held.push(Held::take(&db, &model));
            }
            if i % 7 == 0 {
                for h in &mut held {
                    h.step(&what);
                }
            }
        }
        // The crash stopped the session: what is held reads as before.
        for h in &mut held {
            h.check_all(&what);
        }
        drop(db);
        drop(held);
    }
    let ops = fs.ops();
    fs.simulate_power_loss().unwrap();
    (log, ops)
}

/// An open of `dir` that crashes at operation `at` (its fates drawn from
/// `seed`), then a power loss. Returns the operations it made.
fn crashing_open(dir: &Path, sync: SyncMode, at: u64, seed: u64) -> u64 {
    let fs = crashing_fs(at, seed);
    drop(Db::open_with_fs(
        dir,
        deep_options(sync),
        Arc::new(fs.clone()),
    ));
    let ops = fs.ops();
    fs.simulate_power_loss().unwrap();
    ops
}

/// Operations a clean open of `dir`'s leftovers makes (on a copy).
fn open_ops(dir: &Path, sync: SyncMode) -> u64 {
    let probe = copy_store_dir(dir);
    crashing_open(probe.path(), sync, u64::MAX, 0)
}

/// What the store in `dir` answers, opened cleanly on the real file
/// system: its contents (get checked against the scan) and last sequence;
/// no orphan table left.
fn answers(dir: &Path, sync: SyncMode, what: &str) -> (Contents, u64) {
    let db =
        Db::open(dir, deep_options(sync)).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
    let got = checked_contents(&db, what);
    let last = db.last_sequence();
    close_with_no_orphan_table(db, dir, what);
    (got, last)
}

#[test]
fn a_third_power_loss_in_the_second_recovery_changes_no_answer() {
    let (mut firsts, mut seconds, mut thirds) = (0u64, 0u64, 0u64);
    for sync in [SyncMode::Always, SyncMode::Never] {
        let total = session(scratch_dir().path(), sync, u64::MAX).1;
        for first in (step() / 2..total).step_by(step() as usize) {
            firsts += 1;
            let crashed = scratch_dir();
            let (log, _) = session(crashed.path(), sync, first);
            let what = format!("{sync:?}: first crash at {first} of {total}");
            let reference = answers(copy_store_dir(crashed.path()).path(), sync, &what);
            let durable = if sync == SyncMode::Always {
                log.through_last_ack()
            } else {
                0
            };
            assert!(
                log.matching(&Contents::new(), &reference.0, durable)
                    .is_some(),
                "{what}: the recovered store holds no allowed outcome of the acknowledged writes"
            );
            let second_ops = open_ops(crashed.path(), sync);
            for second in 0..second_ops {
                seconds += 1;
                let twice = copy_store_dir(crashed.path());
                crashing_open(twice.path(), sync, second, first ^ (second << 20));
                let what = format!("{what}, second at {second} of {second_ops}");
                let third_ops = open_ops(twice.path(), sync);
                // Every third crash point after one second crash in four,
                // two others after the rest.
                let thirds_here: Vec<u64> = if (first / step() + second).is_multiple_of(4) {
                    (0..third_ops).collect()
                } else {
                    let a = (first + 3 * second) % third_ops.max(1);
                    vec![a, (a + third_ops / 2) % third_ops.max(1)]
                };
                for third in thirds_here {
                    thirds += 1;
                    let thrice = copy_store_dir(twice.path());
                    crashing_open(thrice.path(), sync, third, first ^ (third << 40) ^ second);
                    let what = format!("{what}, third at {third} of {third_ops}");
                    let got = answers(thrice.path(), sync, &what);
                    assert!(
                        got == reference,
                        "{what}: the store answers otherwise than a clean open of the first \
                         crash's leftovers ({} keys, last sequence {}; clean: {} keys, last \
                         sequence {}): {:?}",
                        got.0.len(),
                        got.1,
                        reference.0.len(),
                        reference.1,
                        bloomlsm_tests::first_differences(&got.0, &reference.0, "clean open")
                    );
                }
            }
        }
    }
    println!(
        "{firsts} first crashes with snapshots and iterators held, {seconds} second crashes \
         in the recovering open, {thirds} third crashes in the open recovering from that: \
         every store answers as a clean open of the first crash's leftovers"
    );
}

/// A recovering open that fails at any of its operations (once, or from
/// there on), its failing write leaving a prefix of its bytes, then
/// retried on the same files with no power loss in between (what it
/// wrote and did not undo is still there, unsynced), then a power loss:
/// the retry and the open after the loss answer as a clean open of the
/// first crash's leftovers.
#[test]
fn a_recovering_open_failed_by_a_partial_write_then_retried_changes_no_answer() {
    let (mut firsts, mut opens) = (0u64, 0u64);
    for sync in [SyncMode::Always, SyncMode::Never] {
        let total = session(scratch_dir().path(), sync, u64::MAX).1;
        for first in (step() / 3..total).step_by(step() as usize) {
            firsts += 1;
            let crashed = scratch_dir();
            session(crashed.path(), sync, first);
            let what = format!("{sync:?}: first crash at {first} of {total}");
            let reference = answers(copy_store_dir(crashed.path()).path(), sync, &what);
            let open_ops = open_ops(crashed.path(), sync);
            for at in 0..open_ops {
                opens += 1;
                let dir = copy_store_dir(crashed.path());
                let seed = first ^ (at << 24);
                let fs = crashing_fs(at, seed);
                let lasting = at % 3 == 1;
                if !lasting {
                    fs.heal();
                    fs.fail_only_op(at);
                }
                let what = format!("{what}, open failing at {at} (lasting: {lasting})");
                drop(Db::open_with_fs(
                    dir.path(),
                    deep_options(sync),
                    Arc::new(fs.clone()),
                ));
                fs.heal();
                let db = Db::open_with_fs(dir.path(), deep_options(sync), Arc::new(fs.clone()))
                    .unwrap_or_else(|e| panic!("{what}: the retried open failed: {e}"));
                let got = checked_contents(&db, &what);
                assert!(
                    got == reference.0,
                    "{what}: the retried open answers otherwise than a clean open: {:?}",
                    bloomlsm_tests::first_differences(&got, &reference.0, "clean open")
                );
                drop(db);
                fs.simulate_power_loss().unwrap();
                let got = answers(dir.path(), sync, &format!("{what}, then a power loss"));
                assert!(
                    got == reference,
                    "{what}: after a power loss the store answers otherwise than a clean \
                     open ({} keys, last sequence {}; clean: {} keys, last sequence {}): {:?}",
                    got.0.len(),
                    got.1,
                    reference.0.len(),
                    reference.1,
                    bloomlsm_tests::first_differences(&got.0, &reference.0, "clean open")
                );
            }
        }
    }
    println!(
        "{firsts} first crashes, {opens} recovering opens failed at each operation and \
         retried: every store answers as a clean open of the first crash's leftovers"
    );
}
