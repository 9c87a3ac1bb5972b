//! The interpreter: runs a [`Case`] on a store and checks every answer
//! against a `BTreeMap` (and each held snapshot against the copy taken
//! with it). It panics at the first disagreement, naming the operation:
//! that panic is the report of the fuzz target and of the property test.
//! Every operation on this healthy store must succeed, so an `Err` panics
//! too.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;

use crate::batch::WriteBatch;
use crate::db::{Db, Snapshot};
use crate::options::Options;

use super::ops::{Case, HOT_KEYS, KEY_COUNT, KeyId, KeyRange, Op, key, value};
use super::shapes::with_filters;

/// How much a check reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Check {
    /// Only if the tree changed since the last check (a write's inline
    /// flush, compaction, trivial move or filter rebalancing).
    IfTreeChanged,
    /// Now (after an explicit flush, compaction, rebuild or reopen, which
    /// need not move the counters a tree change is seen by).
    Now,
    /// Now, with every key read by get.
    EveryKey,
}

/// Snapshots held at once.
pub const SNAPSHOT_SLOTS: usize = 4;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a run did (to check that cases reach deep trees).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFigures {
    /// Operations run.
    pub ops: usize,
    /// Most levels below L0 holding tables at once, at some check (with
    /// dynamic level budgets the data sits in the deepest levels, so the
    /// deepest level in use says little).
    pub sorted_levels: usize,
    /// Checks of the whole store and every held snapshot: after each
    /// explicit flush, compaction, rebuild and reopen, and after each
    /// write that changed the tree (an inline flush, compaction, trivial
    /// move or filter rebalancing).
    pub full_checks: u64,
    /// Snapshot checks (a get or a scan at a held snapshot).
    pub snapshot_checks: u64,
}

/// A store and the models it must agree with.
struct Run<'a> {
    dir: &'a Path,
    options: Options,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<Option<(Snapshot, Model)>>,
    /// Puts so far: names the next value.
    writes: u32,
    /// Sum of the store's tree-changing counters at the last check.
    tree_counter: u64,
    /// Index and text of the operation running, for failure messages.
    at: String,
    figures: RunFigures,
}

/// Runs `case` on a new store in `dir` (which must not hold one) and
/// checks every answer; panics at the first wrong one. Ends with a full
/// check of every key.
pub fn run_case(case: &Case, dir: &Path) -> RunFigures {
    let options = case.shape.options();
    let db =
        Db::open(dir, options.clone()).unwrap_or_else(|e| panic!("open {:?}: {e}", case.shape));
    let mut run = Run {
        dir,
        options,
        db: Some(db),
        model: Model::new(),
        snapshots: (0..SNAPSHOT_SLOTS).map(|_| None).collect(),
        writes: 0,
        tree_counter: 0,
        at: String::from("open"),
        figures: RunFigures::default(),
    };
    for (i, op) in case.ops.iter().enumerate() {
        run.at = format!("op {i} {op:?}");
        run.apply(op);
        run.figures.ops += 1;
    }
    run.at = String::from("final check");
    run.check_all(Check::EveryKey);
    run.figures
}

/// `result`'s value, or a panic naming `what` and the operation.
fn ok<T, E: Debug>(result: Result<T, E>, at: &str, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{at}: {what} failed on a healthy store: {e:?}"))
}

/// A value as the put that wrote it ([`value`]'s write number, when the
/// value is long enough to hold it) and its length.
fn describe(v: Option<&[u8]>) -> String {
    match v {
        None => "nothing".into(),
        Some(v) => match v.get(..4).and_then(|id| <[u8; 4]>::try_from(id).ok()) {
            Some(id) => format!("write {} ({} bytes)", u32::from_le_bytes(id), v.len()),
            None => format!("{v:x?}"),
        },
    }
}

fn in_range(model: &Model, range: &KeyRange) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| range.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Run<'_> {
    fn db(&self) -> &Db {
        match &self.db {
            Some(db) => db,
            None => panic!("{}: the store is not open", self.at),
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Put(k, len) => {
                let v = self.next_value(*len);
                ok(self.db().put(&key(*k), &v), &self.at, "put");
                self.model.insert(key(*k), v);
                self.after_write(&[*k]);
            }
            Op::Delete(k) => {
                ok(self.db().delete(&key(*k)), &self.at, "delete");
                self.model.remove(&key(*k));
                self.after_write(&[*k]);
            }
            Op::Batch(ops) => {
                let mut batch = WriteBatch::new();
                let mut after = self.model.clone();
                for (k, v) in ops {
                    match v {
                        Some(len) => {
                            let v = self.next_value(*len);
                            batch.put(&key(*k), &v);
                            after.insert(key(*k), v);
                        }
                        None => {
                            batch.delete(&key(*k));
                            after.remove(&key(*k));
                        }
                    }
                }
                ok(self.db().write(batch), &self.at, "write batch");
                self.model = after;
                let keys: Vec<KeyId> = ops.iter().map(|(k, _)| *k).collect();
                self.after_write(&keys);
            }
            Op::Get(k) => self.check_get(None, *k),
            Op::Scan(range) => self.check_scan(None, range),
            Op::TakeSnapshot(slot) => {
                let snapshot = self.db().snapshot();
                self.snapshots[usize::from(*slot) % SNAPSHOT_SLOTS] =
                    Some((snapshot, self.model.clone()));
            }
            Op::SnapshotGet(slot, k) => {
                if let Some(s) = self.held(*slot) {
                    self.check_get(Some(s), *k);
                }
            }
            Op::SnapshotScan(slot, range) => {
                if let Some(s) = self.held(*slot) {
                    self.check_scan(Some(s), range);
                }
            }
            Op::ReleaseSnapshot(slot) => self.snapshots[usize::from(*slot) % SNAPSHOT_SLOTS] = None,
            Op::Flush => {
                ok(self.db().flush(), &self.at, "flush");
                self.check_all(Check::Now);
            }
            Op::Compact => {
                ok(self.db().compact(), &self.at, "compact");
                self.check_all(Check::Now);
            }
            Op::RebuildFilters(policy) => {
                ok(
                    self.db().rebuild_filters(policy.policy()),
                    &self.at,
                    "rebuild_filters",
                );
                self.check_all(Check::Now);
            }
            Op::IterAcrossRebuild {
                range,
                policy,
                overwrite,
                compact,
            } => {
                let iter = ok(self.db().scan(range.bounds()), &self.at, "scan");
                let want = in_range(&self.model, range);
                if self.model.contains_key(&key(*overwrite)) {
                    self.apply(&Op::Delete(*overwrite));
                } else {
                    self.apply(&Op::Put(*overwrite, 16));
                }
                ok(
                    self.db().rebuild_filters(policy.policy()),
                    &self.at,
                    "rebuild_filters",
                );
                if *compact {
                    ok(self.db().compact(), &self.at, "compact");
                } else {
                    ok(self.db().flush(), &self.at, "flush");
                }
                let seen: Vec<(Vec<u8>, Vec<u8>)> =
                    ok(iter.collect::<Result<_, _>>(), &self.at, "old iterator");
                assert_eq!(seen, want, "{}: the iterator's view changed", self.at);
                self.check_all(Check::Now);
            }
            Op::Reopen(filters) => {
                // Snapshots do not outlive their store.
                self.snapshots.iter_mut().for_each(|s| *s = None);
                if let Some(db) = self.db.take() {
                    ok(db.close(), &self.at, "close");
                }
                if let Some(config) = filters {
                    self.options = with_filters(self.options.clone(), config);
                }
                let db = ok(Db::open(self.dir, self.options.clone()), &self.at, "reopen");
                self.db = Some(db);
                self.check_all(Check::Now);
            }
        }
    }

    fn next_value(&mut self, len: u16) -> Vec<u8> {
        self.writes += 1;
        value(self.writes, len)
    }

    /// The snapshot in `slot`, or the first one held.
    fn held(&self, slot: u8) -> Option<usize> {
        let slot = usize::from(slot) % SNAPSHOT_SLOTS;
        if self.snapshots[slot].is_some() {
            return Some(slot);
        }
        self.snapshots.iter().position(Option::is_some)
    }

    /// After a write: the keys it wrote read back (a batch whole); if the
    /// write flushed or compacted (inline), the whole store and every
    /// held snapshot are checked.
    fn after_write(&mut self, keys: &[KeyId]) {
        for &k in keys {
            self.check_get(None, k);
        }
        self.check_all(Check::IfTreeChanged);
    }

    /// A full scan of the store and of each held snapshot, and gets of the
    /// hot keys and an eighth of the others (a different eighth each time;
    /// every key for [`Check::EveryKey`]).
    fn check_all(&mut self, check: Check) {
        let every_key = check == Check::EveryKey;
        let stats = self.db().stats();
        let counter =
            stats.flushes + stats.compactions + stats.trivial_moves + stats.filters_rebalanced;
        if counter == self.tree_counter && check == Check::IfTreeChanged {
            return;
        }
        self.tree_counter = counter;
        self.figures.full_checks += 1;
        let sorted_levels = stats.levels.iter().skip(1).filter(|l| l.tables > 0).count();
        self.figures.sorted_levels = self.figures.sorted_levels.max(sorted_levels);
        let turn = (self.figures.full_checks % 8) as usize;
        let keys: Vec<KeyId> = (0..KEY_COUNT)
            .filter(|&i| every_key || i % 8 == turn || HOT_KEYS.contains(&(i as KeyId)))
            .map(|i| i as KeyId)
            .collect();
        self.check_scan(None, &KeyRange::ALL);
        for &k in &keys {
            self.check_get(None, k);
        }
        for slot in 0..SNAPSHOT_SLOTS {
            if self.snapshots[slot].is_some() {
                self.check_scan(Some(slot), &KeyRange::ALL);
                for &k in &keys {
                    self.check_get(Some(slot), k);
                }
            }
        }
    }

    fn reader(&self, snapshot: Option<usize>) -> (&Model, Option<&Snapshot>) {
        match snapshot.and_then(|s| self.snapshots[s].as_ref()) {
            Some((s, model)) => (model, Some(s)),
            None => (&self.model, None),
        }
    }

    fn check_get(&mut self, snapshot: Option<usize>, k: KeyId) {
        let (model, snap) = self.reader(snapshot);
        let key = key(k);
        let got = match snap {
            Some(s) => ok(s.get(&key), &self.at, "snapshot get"),
            None => ok(self.db().get(&key), &self.at, "get"),
        };
        let want = model.get(&key);
        assert!(
            got.as_ref() == want,
            "{}: get {key:x?} at snapshot slot {snapshot:?}: got {}, want {}",
            self.at,
            describe(got.as_deref()),
            describe(want.map(Vec::as_slice)),
        );
        if snapshot.is_some() {
            self.figures.snapshot_checks += 1;
        }
    }

    fn check_scan(&mut self, snapshot: Option<usize>, range: &KeyRange) {
        let (model, snap) = self.reader(snapshot);
        let iter = match snap {
            Some(s) => ok(s.scan(range.bounds()), &self.at, "snapshot scan"),
            None => ok(self.db().scan(range.bounds()), &self.at, "scan"),
        };
        let seen: Vec<(Vec<u8>, Vec<u8>)> = ok(iter.collect::<Result<_, _>>(), &self.at, "scan");
        let want = in_range(model, range);
        if seen != want {
            let keys = |v: &[(Vec<u8>, Vec<u8>)]| -> Vec<Vec<u8>> {
                v.iter().map(|(k, _)| k.clone()).collect()
            };
            panic!(
                "{}: scan {range:?} at snapshot slot {snapshot:?}: got keys {:x?}, want {:x?} \
                 (or the same keys with other values)",
                self.at,
                keys(&seen),
                keys(&want)
            );
        }
        if snapshot.is_some() {
            self.figures.snapshot_checks += 1;
        }
    }
}
