//! Differential tests: the same random operations applied to bloomlsm and
//! RocksDB give identical answers, across flushes and reopens.
//!
//! `same_answers_as_rocksdb` runs short cases on a shallow store;
//! `deep_tree_same_answers_as_rocksdb` runs long cases on the deep store of
//! `engine/tests/engine_suite/deep_model.rs` (seven levels of narrow tables, a third of
//! the operations deletes, drifting keys, snapshots, `rebuild_filters`,
//! reopens, no full compaction), with the same operations generator.
//! `BLOOMLSM_DIFF_OPS` sets its total operations (default 100,000); a hang
//! ends the test after `BLOOMLSM_MODEL_STALL_SECONDS` (120) naming the case.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

#[path = "../../engine/tests/deep/mod.rs"]
mod deep;

use std::collections::BTreeSet;

use bloomlsm::{Db, Options, WriteBatch};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u16),
    Delete(u8),
    Batch(Vec<(u8, Option<u16>)>),
    Get(u8),
    Scan(u8),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Put(k % 48, v)),
        2 => any::<u8>().prop_map(|k| Op::Delete(k % 48)),
        1 => proptest::collection::vec((any::<u8>(), proptest::option::of(any::<u16>())), 1..5)
            .prop_map(|v| Op::Batch(v.into_iter().map(|(k, x)| (k % 48, x)).collect())),
        4 => any::<u8>().prop_map(|k| Op::Get(k % 64)),
        1 => any::<u8>().prop_map(|k| Op::Scan(k % 64)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    vec![b'k', k / 10, k % 10, k]
}

fn small() -> Options {
    Options {
        memtable_bytes: 1024,
        block_size: 128,
        target_file_bytes: 1024,
        l1_bytes: 4096,
        ..Options::default()
    }
}

fn rocks(dir: &std::path::Path) -> rocksdb::DB {
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    o.set_compression_type(rocksdb::DBCompressionType::None);
    rocksdb::DB::open(&o, dir).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn same_answers_as_rocksdb(ops in proptest::collection::vec(op(), 1..150)) {
        let dir = tempfile::tempdir().unwrap();
        let (ours_dir, rocks_dir) = (dir.path().join("ours"), dir.path().join("rocks"));
        let mut ours = Some(Db::open(&ours_dir, small()).unwrap());
        let mut theirs = Some(rocks(&rocks_dir));
        for op in ops {
            let (o, r) = (ours.as_ref().unwrap(), theirs.as_ref().unwrap());
            match op {
                Op::Put(k, v) => { o.put(&key(k), &v.to_le_bytes()).unwrap(); r.put(key(k), v.to_le_bytes()).unwrap(); }
                Op::Delete(k) => { o.delete(&key(k)).unwrap(); r.delete(key(k)).unwrap(); }
                Op::Batch(items) => {
                    let mut b = WriteBatch::new();
                    let mut rb = rocksdb::WriteBatch::default();
                    for (k, v) in items {
                        match v {
                            Some(v) => { b.put(&key(k), &v.to_le_bytes()); rb.put(key(k), v.to_le_bytes()); }
                            None => { b.delete(&key(k)); rb.delete(key(k)); }
                        }
                    }
                    o.write(b).unwrap();
                    r.write(rb).unwrap();
                }
                Op::Get(k) => prop_assert_eq!(o.get(&key(k)).unwrap(), r.get(key(k)).unwrap()),
                Op::Scan(k) => {
                    let mine: Vec<_> = o.scan(key(k)..).unwrap().take(10).map(|x| x.unwrap()).collect();
                    let mode = rocksdb::IteratorMode::From(&key(k), rocksdb::Direction::Forward);
                    let theirs: Vec<_> = r.iterator(mode).take(10).map(|x| { let (a, b) = x.unwrap(); (a.to_vec(), b.to_vec()) }).collect();
                    prop_assert_eq!(mine, theirs);
                }
                Op::Flush => { o.flush().unwrap(); r.flush().unwrap(); }
                Op::Reopen => {
                    ours.take().unwrap().close().unwrap();
                    drop(theirs.take());
                    ours = Some(Db::open(&ours_dir, small()).unwrap());
                    theirs = Some(rocks(&rocks_dir));
                }
            }
        }
    }
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A snapshot of each store taken at the same moment, and the keys present then.
type SnapshotPair<'a> = (bloomlsm::Snapshot, rocksdb::Snapshot<'a>, BTreeSet<Vec<u8>>);

fn rocks_deep(dir: &std::path::Path) -> rocksdb::DB {
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    o.set_compression_type(rocksdb::DBCompressionType::None);
    // Small memtables so RocksDB flushes and compacts too.
    o.set_write_buffer_size(64 << 10);
    rocksdb::DB::open(&o, dir).unwrap()
}

/// `[lo, hi)` from a RocksDB iterator source.
fn rocks_range<D: rocksdb::DBAccess>(
    it: rocksdb::DBIteratorWithThreadMode<'_, D>,
    hi: &[u8],
) -> Result<Pairs, TestCaseError> {
    let mut out = Vec::new();
    for item in it {
        let (k, v) = item.map_err(|e| TestCaseError::fail(format!("rocksdb scan: {e}")))?;
        if &*k >= hi {
            break;
        }
        out.push((k.to_vec(), v.to_vec()));
    }
    Ok(out)
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(v) => format!("Some({:?})", String::from_utf8_lossy(v)),
        None => "None".into(),
    }
}

/// Keys to pick from at run time (the generator's `pick` and `back`
/// fields): what the store holds now, what was deleted, what was written.
#[derive(Default)]
struct Keys {
    present: BTreeSet<Vec<u8>>,
    deleted: BTreeSet<Vec<u8>>,
    recent: Vec<Vec<u8>>,
}

impl Keys {
    fn put(&mut self, k: Vec<u8>) {
        self.deleted.remove(&k);
        self.present.insert(k.clone());
        self.recent.push(k);
    }

    fn delete(&mut self, k: Vec<u8>) {
        if self.present.remove(&k) {
            self.deleted.insert(k.clone());
        }
        self.recent.push(k);
    }
}

fn nth(set: &BTreeSet<Vec<u8>>, pick: u32) -> Option<Vec<u8>> {
    (!set.is_empty()).then(|| set.iter().nth(pick as usize % set.len()).unwrap().clone())
}

fn compare_get(
    k: &[u8],
    ours: Option<Vec<u8>>,
    theirs: Option<Vec<u8>>,
    what: &str,
) -> Result<(), TestCaseError> {
    if ours != theirs {
        return Err(TestCaseError::fail(format!(
            "get{what} of {:?}: bloomlsm {} but RocksDB {}",
            String::from_utf8_lossy(k),
            show(&ours),
            show(&theirs)
        )));
    }
    Ok(())
}

fn compare_scan(
    lo: &[u8],
    hi: &[u8],
    ours: Pairs,
    theirs: Pairs,
    what: &str,
) -> Result<(), TestCaseError> {
    if ours != theirs {
        let at = ours
            .iter()
            .zip(&theirs)
            .position(|(a, b)| a != b)
            .unwrap_or(ours.len().min(theirs.len()));
        let s = |x: Option<&(Vec<u8>, Vec<u8>)>| {
            x.map(|(k, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                )
            })
        };
        return Err(TestCaseError::fail(format!(
            "scan{what} {:?}..{:?}: bloomlsm {} pairs, RocksDB {}; first difference at {at}: bloomlsm {:?}, RocksDB {:?}",
            String::from_utf8_lossy(lo),
            String::from_utf8_lossy(hi),
            ours.len(),
            theirs.len(),
            s(ours.get(at)),
            s(theirs.get(at)),
        )));
    }
    Ok(())
}

/// Applies a case to both stores, comparing every answer. The stores are
/// reopened at each `Reopen`, so each stretch between two reopens runs
/// with its own pair of handles (RocksDB snapshots borrow their store).
fn run_deep_case(case: &deep::Case) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir_in(
        Some(std::path::PathBuf::from("/dev/shm"))
            .filter(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir),
    )
    .unwrap();
    let (ours_dir, rocks_dir) = (dir.path().join("ours"), dir.path().join("rocks"));
    let options = case.shape.options();
    let fail = |i: usize, e: String| {
        deep::report_failure_at(i);
        TestCaseError::fail(format!("operation {i} ({:?}): {e}", case.ops.get(i)))
    };
    let mut keys = Keys::default();
    let mut i = 0;
    loop {
        let ours =
            Db::open(&ours_dir, options.clone()).map_err(|e| fail(i, format!("open: {e}")))?;
        let theirs = rocks_deep(&rocks_dir);
        let mut snaps: Vec<Option<SnapshotPair<'_>>> =
            (0..deep::SNAPSHOT_SLOTS).map(|_| None).collect();
        while i < case.ops.len() {
            let op = &case.ops[i];
            deep::progress(case.seed, i, Some(op));
            let at = |e: TestCaseError| match e {
                TestCaseError::Fail(why) => fail(i, why.to_string()),
                other => other,
            };
            let get = |k: Vec<u8>, what: &str| -> Result<(), TestCaseError> {
                let o = ours.get(&k).map_err(|e| fail(i, format!("get: {e}")))?;
                let r = theirs.get(&k).unwrap();
                compare_get(&k, o, r, what).map_err(at)
            };
            match op {
                deep::Op::Put { k, id, pad } => {
                    ours.put(&deep::key(*k), &deep::value(*id, *pad))
                        .map_err(|e| fail(i, format!("put: {e}")))?;
                    theirs.put(deep::key(*k), deep::value(*id, *pad)).unwrap();
                    keys.put(deep::key(*k));
                }
                deep::Op::Delete { k } => {
                    ours.delete(&deep::key(*k))
                        .map_err(|e| fail(i, format!("delete: {e}")))?;
                    theirs.delete(deep::key(*k)).unwrap();
                    keys.delete(deep::key(*k));
                }
                deep::Op::Batch(items) => {
                    let mut b = WriteBatch::new();
                    let mut rb = rocksdb::WriteBatch::default();
                    for (k, v) in items {
                        match v {
                            Some((id, pad)) => {
                                b.put(&deep::key(*k), &deep::value(*id, *pad));
                                rb.put(deep::key(*k), deep::value(*id, *pad));
                            }
                            None => {
                                b.delete(&deep::key(*k));
                                rb.delete(deep::key(*k));
                            }
                        }
                    }
                    ours.write(b).map_err(|e| fail(i, format!("write: {e}")))?;
                    theirs.write(rb).unwrap();
                    for (k, v) in items {
                        match v {
                            Some(_) => keys.put(deep::key(*k)),
                            None => keys.delete(deep::key(*k)),
                        }
                    }
                }
                deep::Op::Get { k } => get(deep::key(*k), "")?,
                deep::Op::GetRecent { back } => {
                    if let Some(j) = keys.recent.len().checked_sub(1 + usize::from(*back)) {
                        get(keys.recent[j].clone(), " of a recent key")?;
                    }
                }
                deep::Op::GetPresent { pick } => {
                    if let Some(k) = nth(&keys.present, *pick) {
                        get(k, " of a present key")?;
                    }
                }
                deep::Op::GetDeleted { pick } => {
                    if let Some(k) = nth(&keys.deleted, *pick) {
                        get(k, " of a deleted key")?;
                    }
                }
                deep::Op::Scan { from, span } => {
                    let (lo, hi) = (deep::key(*from), deep::key(from.saturating_add(*span)));
                    let o: Pairs = ours
                        .scan(lo.clone()..hi.clone())
                        .and_then(|it| it.collect())
                        .map_err(|e| fail(i, format!("scan: {e}")))?;
                    let mode = rocksdb::IteratorMode::From(&lo, rocksdb::Direction::Forward);
                    let r = rocks_range(theirs.iterator(mode), &hi)?;
                    compare_scan(&lo, &hi, o, r, "").map_err(at)?;
                }
                deep::Op::Snapshot { slot } => {
                    snaps[usize::from(*slot)] =
                        Some((ours.snapshot(), theirs.snapshot(), keys.present.clone()));
                }
                deep::Op::CheckSnapshot { slot, pick, span } => {
                    if let Some((o, r, then)) = &snaps[usize::from(*slot)] {
                        let candidates = [nth(then, *pick), nth(&keys.present, *pick)];
                        for k in candidates.iter().flatten() {
                            let ov = o
                                .get(k)
                                .map_err(|e| fail(i, format!("snapshot get: {e}")))?;
                            compare_get(k, ov, r.get(k).unwrap(), " as of a snapshot")
                                .map_err(at)?;
                        }
                        if let Some(lo) = &candidates[0] {
                            let from =
                                u32::from_str_radix(std::str::from_utf8(lo).unwrap(), 16).unwrap();
                            let hi = deep::key(from.saturating_add(*span));
                            let ov: Pairs = o
                                .scan(lo.clone()..hi.clone())
                                .and_then(|it| it.collect())
                                .map_err(|e| fail(i, format!("snapshot scan: {e}")))?;
                            let mode = rocksdb::IteratorMode::From(lo, rocksdb::Direction::Forward);
                            let rv = rocks_range(r.iterator(mode), &hi)?;
                            compare_scan(lo, &hi, ov, rv, " as of a snapshot").map_err(at)?;
                        }
                    }
                }
                deep::Op::ReleaseSnapshot { slot } => snaps[usize::from(*slot)] = None,
                deep::Op::RebuildFilters(policy) => ours
                    .rebuild_filters(policy.policy())
                    .map_err(|e| fail(i, format!("rebuild_filters: {e}")))?,
                deep::Op::Flush => {
                    ours.flush().map_err(|e| fail(i, format!("flush: {e}")))?;
                    theirs.flush().unwrap();
                }
                deep::Op::Reopen => {
                    i += 1;
                    break;
                }
            }
            i += 1;
        }
        // Everything, in both, before each reopen and at the end.
        deep::progress(case.seed, i, None);
        let lo = deep::key(0);
        let hi = deep::key(u32::MAX);
        let o: Pairs = ours
            .scan(lo.clone()..hi.clone())
            .and_then(|it| it.collect())
            .map_err(|e| fail(i, format!("scan: {e}")))?;
        let r = rocks_range(theirs.iterator(rocksdb::IteratorMode::Start), &hi)?;
        compare_scan(&lo, &hi, o, r, " of everything").map_err(|e| {
            deep::report_failure_at(i);
            match e {
                TestCaseError::Fail(why) => {
                    TestCaseError::fail(format!("after operation {}: {why}", i.saturating_sub(1)))
                }
                other => other,
            }
        })?;
        drop(snaps);
        ours.close().map_err(|e| fail(i, format!("close: {e}")))?;
        drop(theirs);
        if i >= case.ops.len() {
            return Ok(());
        }
    }
}

#[test]
fn deep_tree_same_answers_as_rocksdb() {
    let total: usize = std::env::var("BLOOMLSM_DIFF_OPS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(100_000);
    let per_case = 5_000;
    let mut config = Config::with_source_file(file!());
    config.cases = total.div_ceil(per_case) as u32;
    config.failure_persistence = Some(Box::new(FileFailurePersistence::WithSource(
        "proptest-regressions",
    )));
    if config.max_shrink_iters == u32::MAX {
        config.max_shrink_iters = 20_000;
    }
    if config.max_shrink_time == 0 {
        config.max_shrink_time = 30 * 60 * 1000;
    }
    let strategy = deep::DeepCases {
        len: per_case,
        fixed_seed: None,
    };
    deep::start_watchdog();
    let started = std::time::Instant::now();
    let result = TestRunner::new(config.clone()).run(&strategy, |case| run_deep_case(&case));
    deep::stop_watchdog();
    if let Err(e) = result {
        panic!("{e}");
    }
    println!(
        "{} deep cases of {per_case} operations: same answers as RocksDB ({:.1} s)",
        config.cases,
        started.elapsed().as_secs_f64()
    );
}
