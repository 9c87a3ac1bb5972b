//! Deep-tree model test: a store of many levels of narrow tables (tiny
//! memtable, file and level budgets, size ratio 3, seven levels, inline
//! background work so a case runs the same way every time) against a
//! `BTreeMap`, with a third of the operations deletes, keys in a drifting
//! window, batches, gets of present, deleted and absent keys, scans,
//! snapshots held across many later writes, `rebuild_filters` at random
//! policies and close-and-reopen, and never a full compaction: every
//! compaction is one the store chose, so tombstones and old versions meet
//! at every depth.
//!
//! `BLOOMLSM_MODEL_OPS` sets the total operations (default 100,000, in
//! cases of `BLOOMLSM_MODEL_CASE_OPS`, default 5,000);
//! `BLOOMLSM_MODEL_SEED` replays one case (the seed a failure prints).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;
use crate::deep;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Instant;

use bloomlsm::FilterKind;
use bloomlsm::{Db, Options, Snapshot, WriteBatch};
use common::{Model, scratch_dir};
use deep::{
    Case, DeepCases, Op, PolicySpec, Shape, key, progress, report_failure_at, start_watchdog, value,
};
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.replace('_', ""))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(v) => format!("Some({:?})", String::from_utf8_lossy(v)),
        None => "None".into(),
    }
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

/// What one case did, for the summary.
#[derive(Debug, Default, Clone)]
struct CaseFigures {
    ops: usize,
    /// Single operations: a batch counts as its puts and deletes.
    units: usize,
    deletes: usize,
    puts: usize,
    /// Deepest level that held a table at some point.
    max_depth: usize,
    rebuilds: usize,
    reopens: usize,
    snapshot_checks: usize,
    flushes: u64,
    compactions: u64,
    deletion_compactions: u64,
}

/// A store under test and the model it must agree with.
struct Run<'a> {
    case: &'a Case,
    options: Options,
    dir: tempfile::TempDir,
    db: Option<Db>,
    model: Model,
    /// Keys deleted and not written since.
    deleted: BTreeSet<Vec<u8>>,
    /// Keys of every put and delete, in order.
    recent: Vec<u32>,
    snapshots: Vec<Option<(Snapshot, Model)>>,
    figures: CaseFigures,
    /// Ends the watchdog's watch of this case when the run ends, however.
    _watch: deep::CaseWatch,
    /// Index of the operation running.
    at: usize,
    /// Counters of earlier opens (stats restart at each open).
    flushes_before: u64,
    compactions_before: u64,
    deletion_compactions_before: u64,
}

impl<'a> Run<'a> {
    fn new(case: &'a Case) -> Result<Self, TestCaseError> {
        let options = case.shape.options();
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options.clone()).map_err(|e| fail(format!("open: {e}")))?;
        Ok(Self {
            case,
            options,
            dir,
            db: Some(db),
            model: Model::new(),
            deleted: BTreeSet::new(),
            recent: Vec::new(),
            snapshots: (0..deep::SNAPSHOT_SLOTS).map(|_| None).collect(),
            figures: CaseFigures::default(),
            _watch: deep::CaseWatch,
            at: 0,
            flushes_before: 0,
            compactions_before: 0,
            deletion_compactions_before: 0,
        })
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn put(&mut self, k: u32, v: Vec<u8>) {
        self.recent.push(k);
        self.deleted.remove(&key(k));
        self.model.insert(key(k), v);
        self.figures.puts += 1;
    }

    fn delete(&mut self, k: u32) {
        self.recent.push(k);
        if self.model.remove(&key(k)).is_some() {
            self.deleted.insert(key(k));
        }
        self.figures.deletes += 1;
    }

    fn check_get(&self, k: &[u8], what: &str) -> Result<(), TestCaseError> {
        let got = self
            .db()
            .get(k)
            .map_err(|e| fail(format!("get {what} {:?}: {e}", String::from_utf8_lossy(k))))?;
        let want = self.model.get(k).cloned();
        if got != want {
            return Err(fail(format!(
                "get of {what} key {:?} returned {} but the newest write was {}\n{}",
                String::from_utf8_lossy(k),
                show(&got),
                show(&want),
                self.explain(k)
            )));
        }
        Ok(())
    }

    /// For a failure report: the key's history in this case, where a
    /// traced get found it, and the shape of the tree.
    fn explain(&self, k: &[u8]) -> String {
        let mut out = String::from("  history of the key:");
        let mine = |x: &u32| key(*x) == k;
        for (i, op) in self.case.ops.iter().enumerate().take(self.at + 1) {
            let what = match op {
                Op::Put { k, id, .. } if mine(k) => vec![format!("put v{id}")],
                Op::Delete { k } if mine(k) => vec!["delete".to_string()],
                Op::Batch(items) => items
                    .iter()
                    .filter(|(x, _)| mine(x))
                    .map(|(_, v)| match v {
                        Some((id, _)) => format!("put v{id} in a batch"),
                        None => "delete in a batch".into(),
                    })
                    .collect(),
                Op::Reopen | Op::RebuildFilters(_) | Op::Flush => vec![format!("{op:?}")],
                _ => vec![],
            };
            for w in what {
                out.push_str(&format!(" [{i}] {w};"));
            }
        }
        if let Ok((_, trace)) = self.db().get_traced(k) {
            out.push_str("\n  traced get:");
            for step in &trace.steps {
                out.push_str(&format!(" {:?}={:?};", step.source, step.result));
            }
        }
        let tables: Vec<u64> = self.db().stats().levels.iter().map(|l| l.tables).collect();
        out.push_str(&format!("\n  tables per level: {tables:?}"));
        out
    }

    fn check_scan(
        &self,
        snapshot: Option<(&Snapshot, &Model)>,
        lo: Vec<u8>,
        hi: Vec<u8>,
    ) -> Result<(), TestCaseError> {
        let (iter, model) = match snapshot {
            Some((s, m)) => (s.scan(lo.clone()..hi.clone()), m),
            None => (self.db().scan(lo.clone()..hi.clone()), &self.model),
        };
        let got: Vec<(Vec<u8>, Vec<u8>)> = iter
            .and_then(|it| it.collect())
            .map_err(|e| fail(format!("scan: {e}")))?;
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(lo.clone()..hi.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if got != want {
            let as_of = if snapshot.is_some() {
                "as of a snapshot "
            } else {
                ""
            };
            let first_diff = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            let s = |x: Option<&(Vec<u8>, Vec<u8>)>| {
                x.map(|(k, v)| {
                    format!(
                        "{}={}",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    )
                })
            };
            return Err(fail(format!(
                "scan {as_of}{:?}..{:?}: {} pairs, expected {}; first difference at {first_diff}: got {:?}, expected {:?}",
                String::from_utf8_lossy(&lo),
                String::from_utf8_lossy(&hi),
                got.len(),
                want.len(),
                s(got.get(first_diff)),
                s(want.get(first_diff)),
            )));
        }
        Ok(())
    }

    /// Every present key, every deleted key, and one scan of everything.
    fn check_all(&self) -> Result<(), TestCaseError> {
        for k in self.model.keys() {
            self.check_get(k, "a present")?;
        }
        for k in &self.deleted {
            self.check_get(k, "a deleted")?;
        }
        self.check_scan(None, key(0), key(u32::MAX))
    }

    fn sample_depth(&mut self) {
        let stats = self.db().stats();
        if let Some(deepest) = stats.levels.iter().rposition(|l| l.tables > 0) {
            self.figures.max_depth = self.figures.max_depth.max(deepest);
        }
        self.figures.flushes = self.flushes_before + stats.flushes;
        self.figures.compactions = self.compactions_before + stats.compactions;
        self.figures.deletion_compactions =
            self.deletion_compactions_before + stats.deletion_compactions;
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        self.figures.units += match op {
            Op::Batch(items) => items.len(),
            _ => 1,
        };
        let err = |what: &str, e: bloomlsm::Error| fail(format!("{what} failed: {e}"));
        match op {
            Op::Put { k, id, pad } => {
                self.db()
                    .put(&key(*k), &value(*id, *pad))
                    .map_err(|e| err("put", e))?;
                self.put(*k, value(*id, *pad));
            }
            Op::Delete { k } => {
                self.db().delete(&key(*k)).map_err(|e| err("delete", e))?;
                self.delete(*k);
            }
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                for (k, v) in items {
                    match v {
                        Some((id, pad)) => b.put(&key(*k), &value(*id, *pad)),
                        None => b.delete(&key(*k)),
                    };
                }
                self.db().write(b).map_err(|e| err("write", e))?;
                for (k, v) in items {
                    match v {
                        Some((id, pad)) => self.put(*k, value(*id, *pad)),
                        None => self.delete(*k),
                    }
                }
            }
            Op::Get { k } => self.check_get(&key(*k), "a")?,
            Op::GetRecent { back } => {
                if let Some(i) = self.recent.len().checked_sub(1 + usize::from(*back)) {
                    self.check_get(&key(self.recent[i]), "a recently written")?;
                }
            }
            Op::GetPresent { pick } => {
                if !self.model.is_empty() {
                    let i = *pick as usize % self.model.len();
                    let k = self.model.keys().nth(i).unwrap().clone();
                    self.check_get(&k, "a present")?;
                }
            }
            Op::GetDeleted { pick } => {
                if !self.deleted.is_empty() {
                    let i = *pick as usize % self.deleted.len();
                    let k = self.deleted.iter().nth(i).unwrap().clone();
                    self.check_get(&k, "a deleted")?;
                }
            }
            Op::Scan { from, span } => {
                self.check_scan(None, key(*from), key(from.saturating_add(*span)))?
            }
            Op::Snapshot { slot } => {
                let s = self.db().snapshot();
                self.snapshots[usize::from(*slot)] = Some((s, self.model.clone()));
            }
            Op::CheckSnapshot { slot, pick, span } => {
                if let Some((snap, m)) = &self.snapshots[usize::from(*slot)] {
                    self.figures.snapshot_checks += 1;
                    // A key the snapshot holds, and one present now.
                    let then = (!m.is_empty())
                        .then(|| m.keys().nth(*pick as usize % m.len()).unwrap().clone());
                    let now = (!self.model.is_empty()).then(|| {
                        self.model
                            .keys()
                            .nth(*pick as usize % self.model.len())
                            .unwrap()
                            .clone()
                    });
                    for k in then.iter().chain(now.iter()) {
                        let got = snap
                            .get(k)
                            .map_err(|e| fail(format!("snapshot get: {e}")))?;
                        let want = m.get(k).cloned();
                        if got != want {
                            return Err(fail(format!(
                                "get of {:?} as of a snapshot returned {} but it held {}",
                                String::from_utf8_lossy(k),
                                show(&got),
                                show(&want)
                            )));
                        }
                    }
                    if let Some(k) = then {
                        // From that key to `span` keys past it.
                        let from =
                            u32::from_str_radix(std::str::from_utf8(&k).unwrap(), 16).unwrap();
                        self.check_scan(Some((snap, m)), k, key(from.saturating_add(*span)))?;
                    }
                }
            }
            Op::ReleaseSnapshot { slot } => self.snapshots[usize::from(*slot)] = None,
            Op::RebuildFilters(policy) => {
                self.db()
                    .rebuild_filters(policy.policy())
                    .map_err(|e| err("rebuild_filters", e))?;
                self.figures.rebuilds += 1;
            }
            Op::Flush => self.db().flush().map_err(|e| err("flush", e))?,
            Op::Reopen => {
                self.sample_depth();
                self.flushes_before = self.figures.flushes;
                self.compactions_before = self.figures.compactions;
                self.deletion_compactions_before = self.figures.deletion_compactions;
                for s in &mut self.snapshots {
                    *s = None;
                }
                self.db
                    .take()
                    .unwrap()
                    .close()
                    .map_err(|e| err("close", e))?;
                let db = Db::open(self.dir.path(), self.options.clone())
                    .map_err(|e| err("reopen", e))?;
                self.db = Some(db);
                self.figures.reopens += 1;
                self.check_all()?;
            }
        }
        Ok(())
    }

    /// Runs every operation, checking as it goes; returns the figures.
    fn run(mut self) -> Result<CaseFigures, TestCaseError> {
        let ops = &self.case.ops;
        for (i, op) in ops.iter().enumerate() {
            self.at = i;
            progress(self.case.seed, i, Some(op));
            let at = |e: TestCaseError| {
                report_failure_at(i);
                let TestCaseError::Fail(why) = e else {
                    return e;
                };
                fail(format!("operation {i} ({op:?}): {why}"))
            };
            self.step(op).map_err(at)?;
            if i % 100 == 99 {
                self.sample_depth();
            }
            if i % 1000 == 999 {
                self.check_all().map_err(at)?;
            }
        }
        progress(self.case.seed, ops.len(), None);
        self.sample_depth();
        self.check_all().map_err(|e| {
            report_failure_at(ops.len());
            let TestCaseError::Fail(why) = e else {
                return e;
            };
            fail(format!("final check after {} operations: {why}", ops.len()))
        })?;
        self.figures.ops = ops.len();
        for s in &mut self.snapshots {
            *s = None;
        }
        self.db
            .take()
            .unwrap()
            .close()
            .map_err(|e| fail(format!("close: {e}")))?;
        Ok(self.figures)
    }
}

#[test]
fn deep_tree_matches_btreemap() {
    let total = env_usize("BLOOMLSM_MODEL_OPS", 100_000);
    let per_case = env_usize("BLOOMLSM_MODEL_CASE_OPS", 5_000).max(1);
    let fixed_seed = std::env::var("BLOOMLSM_MODEL_SEED").ok().map(|s| {
        let s = s.trim_start_matches("0x");
        u64::from_str_radix(s, 16).expect("BLOOMLSM_MODEL_SEED is a hex seed")
    });
    let cases = if fixed_seed.is_some() {
        1
    } else {
        total.div_ceil(per_case)
    };
    let mut config = Config::with_source_file(file!());
    config.cases = cases as u32;
    config.failure_persistence = Some(Box::new(FileFailurePersistence::WithSource(
        "proptest-regressions",
    )));
    if config.max_shrink_iters == u32::MAX {
        // proptest's default is 4 per case: far too few to shrink one case
        // of thousands of operations.
        config.max_shrink_iters = 20_000;
    }
    if config.max_shrink_time == 0 {
        // Shrinking reruns a case hundreds of times: bound it (milliseconds).
        config.max_shrink_time = 30 * 60 * 1000;
    }
    let strategy = DeepCases {
        len: per_case,
        fixed_seed,
    };
    let figures: Mutex<Vec<(u64, CaseFigures)>> = Mutex::new(Vec::new());
    start_watchdog();
    let started = Instant::now();
    let result = TestRunner::new(config).run(&strategy, |case| {
        let f = Run::new(&case)?.run()?;
        figures.lock().unwrap().push((case.seed, f));
        Ok(())
    });
    // Each case's `CaseWatch` ended its watch when the case ended.
    let elapsed = started.elapsed();
    if let Err(e) = result {
        panic!("{e}");
    }
    let figures = figures.into_inner().unwrap();
    let ops: usize = figures.iter().map(|(_, f)| f.ops).sum();
    let deletes: usize = figures.iter().map(|(_, f)| f.deletes).sum();
    let puts: usize = figures.iter().map(|(_, f)| f.puts).sum();
    let units: usize = figures.iter().map(|(_, f)| f.units).sum();
    let sum = |g: fn(&CaseFigures) -> u64| figures.iter().map(|(_, f)| g(f)).sum::<u64>();
    let mut depths = [0usize; deep::Shape::NUM_LEVELS];
    for (_, f) in &figures {
        depths[f.max_depth] += 1;
    }
    println!(
        "{} cases, {ops} operations ({puts} puts, {deletes} deletes = {:.0}% of single operations) in {:.1} s; \
         {} flushes, {} compactions ({} deletion-triggered), {} filter rebuilds, {} reopens, {} snapshot checks; \
         cases by deepest level reached (L0..L6): {depths:?}",
        figures.len(),
        100.0 * deletes as f64 / units.max(1) as f64,
        elapsed.as_secs_f64(),
        sum(|f| f.flushes),
        sum(|f| f.compactions),
        sum(|f| f.deletion_compactions),
        sum(|f| f.rebuilds as u64),
        sum(|f| f.reopens as u64),
        sum(|f| f.snapshot_checks as u64),
    );
    let deep_cases = figures.iter().filter(|(_, f)| f.max_depth >= 4).count();
    assert!(
        deep_cases * 4 >= figures.len() * 3,
        "only {deep_cases} of {} cases reached L4: the tree is not deep",
        figures.len()
    );
}

/// A case that ended leaves nothing for the watchdog. The watchdog
/// outlives the test that starts it in the engine suite's process, and an
/// operation left recorded by a case that ended read as a hang two
/// minutes later: the watchdog ended the process (status 101), and every
/// test still running in it, with no message (its line went to the
/// captured output of the test that had started it, long over). Under
/// `--test-threads 1` the replays below run after
/// `deep_tree_matches_btreemap` stopped watching, and the last operation
/// of the last one stayed recorded.
#[test]
fn an_ended_case_leaves_no_operation_watched() {
    let case = deep::generate(7, 40);
    Run::new(&case).and_then(Run::run).unwrap();
    assert!(
        !deep::watched(),
        "an operation of a case that ended is still watched"
    );
}

/// Runs one hand-kept case (a shrunk failure) and panics with its report.
fn replay(case: Case) {
    if let Err(e) = Run::new(&case).and_then(Run::run) {
        panic!("{e}\n{case:?}");
    }
}

/// Shrunk from seed 0xfdc9d9af00040ccc (fault 2 of RELIABILITY.md): two L0 tables
/// hold versions v1414 and v1419 of one key; `rebuild_filters` gives the
/// older table the larger file number, and `get` returned v1414.
#[test]
fn rebuild_filters_keeps_the_order_of_l0() {
    replay(Case {
        seed: 0xfdc9_d9af_0004_0ccc,
        shape: Shape {
            memtable_bytes: 869,
            target_file_bytes: 635,
            l1_bytes: 2442,
            block_size: 128,
            l0_compaction_trigger: 4,
            filter_kind: FilterKind::Blocked,
            policy: PolicySpec::PerLevel(vec![6.9]),
            deletion_compaction_ratio: None,
            max_open_files: None,
        },
        ops: vec![
            Op::Put {
                k: 327620628,
                id: 1411,
                pad: 11,
            },
            Op::Delete { k: 327620538 },
            Op::Batch(vec![
                (327620564, Some((1412, 9))),
                (327619720, None),
                (327620793, None),
                (327620739, Some((1413, 5))),
                (327620631, Some((1414, 10))),
                (327620729, Some((1415, 0))),
            ]),
            Op::Delete { k: 327620651 },
            Op::Delete { k: 878345571 },
            Op::Delete { k: 327620520 },
            Op::Put {
                k: 327620658,
                id: 1416,
                pad: 0,
            },
            Op::Put {
                k: 327620821,
                id: 1417,
                pad: 11,
            },
            Op::Delete { k: 327620790 },
            Op::Batch(vec![
                (327620721, Some((1418, 11))),
                (327619841, None),
                (327620631, Some((1419, 15))),
                (734313512, Some((1420, 21))),
                (327620670, Some((1421, 10))),
                (327619978, None),
                (327620199, None),
            ]),
            Op::Put {
                k: 327620609,
                id: 1422,
                pad: 6,
            },
            Op::Batch(vec![
                (327620698, None),
                (327620228, None),
                (327620359, Some((1423, 8))),
                (327620817, Some((1424, 15))),
                (327620636, Some((1425, 14))),
            ]),
            Op::RebuildFilters(PolicySpec::Uniform(9.7)),
        ],
    });
}
