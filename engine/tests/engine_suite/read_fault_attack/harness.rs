//! One case of the attack: a store on a `FaultFs`, its model, snapshots
//! and held iterators, the workload run while a read fault is armed, and
//! the checks after the faults stop.

use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, ReadFault};
use bloomlsm::{CorruptFilterPolicy, Db, DbIter, Error, FilterPolicy, Options, Snapshot};

use crate::common::{Model, Rng, short_key};

pub const EIO: i32 = 5;
const KEYS: u64 = 600;

/// How a case's store runs.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub max_open_files: Option<usize>,
    pub direct: bool,
    pub seed: u64,
}

/// The shape of a case: `max_open_files`, direct reads or not, its seed.
pub fn shape(max_open_files: Option<usize>, direct: bool, seed: u64) -> Shape {
    Shape {
        max_open_files,
        direct,
        seed,
    }
}

pub fn options(max_open_files: Option<usize>, direct: bool, policy: FilterPolicy) -> Options {
    Options {
        filter_policy: policy,
        block_size: 256,
        memtable_bytes: 4 << 10,
        target_file_bytes: 2 << 10,
        l1_bytes: 8 << 10,
        level_size_ratio: 3,
        dynamic_level_bytes: false,
        num_levels: 6,
        l0_compaction_trigger: 2,
        // Small: most block reads go to the file.
        block_cache_bytes: 4 << 10,
        max_open_files,
        use_direct_reads: direct,
        background_work: true,
        ..Options::default()
    }
}

impl Shape {
    /// The options of a case of this shape: its filter policy, what it
    /// does with a filter that cannot be read (a table without it, its
    /// rebuild in the background, or the table's open failing), its size
    /// ratio (3 or 4) and deletion-triggered compactions vary with the
    /// seed.
    pub fn options(&self) -> Options {
        let on_corrupt_filter = match self.seed / 3 % 3 {
            0 => CorruptFilterPolicy::Ignore,
            1 => CorruptFilterPolicy::Rebuild,
            _ => CorruptFilterPolicy::Fail,
        };
        Options {
            on_corrupt_filter,
            // Tombstone-heavy tables merged down early, where a failed
            // merge must not bring a deleted key back.
            deletion_compaction_ratio: (self.seed % 2 == 1).then_some(0.2),
            level_size_ratio: 3 + self.seed % 2,
            ..options(self.max_open_files, self.direct, policy(self.seed))
        }
    }
}

/// The filter policy of case `seed`: optimized ones rebuild filters in
/// the background as the tree's shape moves.
fn policy(seed: u64) -> FilterPolicy {
    match seed % 3 {
        0 => FilterPolicy::Optimized { bits_per_key: 8.0 },
        1 => FilterPolicy::Uniform { bits_per_key: 10.0 },
        _ => FilterPolicy::PerLevel(vec![12.0, 9.0, 6.0, 3.0]),
    }
}

/// An error a failed read may give: the injected `EIO`, on a table file.
pub fn is_read_error(e: &Error) -> bool {
    let path = match e {
        Error::Io { path, .. } | Error::Table(bloomlsm::sstable::Error::Io { path, .. }) => path,
        _ => return false,
    };
    e.raw_os_error() == Some(EIO) && path.extension().is_some_and(|x| x == "sst")
}

/// An error a refused write (or a failed flush, compaction, filter
/// rebuild or wait) may give: the read error, or writes stopped by one.
pub fn is_job_error(e: &Error) -> bool {
    match e {
        Error::WritesStopped(stop) => stop.raw_os_error() == Some(EIO),
        other => is_read_error(other),
    }
}

/// An iterator held across the workload, with the pairs it must yield.
struct Held {
    it: DbIter,
    want: Vec<(Vec<u8>, Vec<u8>)>,
    at: usize,
    what: String,
}

impl Held {
    /// Reads up to `n` items; `Some(failed)` once it ended or failed
    /// (drop it), `None` while it goes on.
    fn read(&mut self, n: usize, ctx: &str) -> Option<bool> {
        for _ in 0..n {
            match self.it.next() {
                Some(Ok(got)) => {
                    let want = self.want.get(self.at);
                    assert!(
                        want == Some(&got),
                        "{ctx}: {} item {}: got {:?}, want {:?}",
                        self.what,
                        self.at,
                        String::from_utf8_lossy(&got.0),
                        want.map(|w| String::from_utf8_lossy(&w.0).into_owned()),
                    );
                    self.at += 1;
                }
                Some(Err(e)) => {
                    assert!(
                        is_read_error(&e),
                        "{ctx}: {} item {}: {e}",
                        self.what,
                        self.at
                    );
                    // Read on after the error, it never skips a pair: it
                    // ends, fails again, or goes on where it stopped.
                    if let Some(Ok(got)) = self.it.next() {
                        assert!(
                            self.want.get(self.at) == Some(&got),
                            "{ctx}: {} skipped pairs after an error at item {}",
                            self.what,
                            self.at
                        );
                    }
                    return Some(true);
                }
                None => {
                    assert_eq!(
                        self.at,
                        self.want.len(),
                        "{ctx}: {} ended early, silently",
                        self.what
                    );
                    return Some(false);
                }
            }
        }
        None
    }
}

/// What a case saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    pub failed_reads: u64,
    pub refused_writes: u64,
    pub failed_jobs: u64,
    pub faults: u64,
    /// Tables left without a usable filter once healed (a filter read
    /// that failed at a table's open, under `CorruptFilterPolicy::Ignore`).
    pub filterless: u64,
}

/// A store under attack and what it must hold.
pub struct Case {
    pub shape: Shape,
    pub fs: FaultFs,
    pub db: Option<Db>,
    pub dir: tempfile::TempDir,
    pub model: Model,
    snaps: Vec<(Snapshot, Model)>,
    held: Vec<Held>,
    rng: Rng,
    writes: u64,
    pub stopped: bool,
    pub seen: Seen,
    pub ctx: String,
}

impl Case {
    /// A store of `shape` with a tree built without faults, three
    /// snapshots and four iterators held. `None` where direct reads are
    /// asked for and the file system here refuses them.
    pub fn build(shape: Shape, what: &str) -> Option<Self> {
        let dir = if shape.direct {
            crate::common::disk_dir()?
        } else {
            crate::common::scratch_dir()
        };
        let fs = FaultFs::new();
        let options = shape.options();
        let db = Db::open_with_fs(dir.path(), options, Arc::new(fs.clone())).unwrap();
        let mut case = Self {
            shape,
            fs,
            db: Some(db),
            dir,
            model: Model::new(),
            snaps: Vec::new(),
            held: Vec::new(),
            rng: Rng(shape.seed),
            writes: 0,
            stopped: false,
            seen: Seen::default(),
            ctx: format!("{what} {shape:?}"),
        };
        for round in 0..4 {
            case.write(500);
            if round % 2 == 0 {
                case.take_snapshot();
            }
            case.hold_iterator();
        }
        Some(case)
    }

    pub fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn take_snapshot(&mut self) {
        let snap = self.db().snapshot();
        self.snaps.push((snap, self.model.clone()));
    }

    /// An iterator over a random range, from now or from a snapshot.
    fn hold_iterator(&mut self) {
        let from = short_key(self.rng.below(KEYS / 2));
        let on_snap = !self.snaps.is_empty() && self.rng.below(2) == 0;
        let (it, model, what) = if on_snap {
            let i = self.rng.below(self.snaps.len() as u64) as usize;
            let (snap, model) = &self.snaps[i];
            (
                snap.scan(from.clone()..),
                model,
                format!("iterator on snapshot {i}"),
            )
        } else {
            (
                self.db().scan(from.clone()..),
                &self.model,
                "iterator".into(),
            )
        };
        let want: Vec<_> = model
            .range(from..)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match it {
            Ok(it) => {
                let what = format!("{what} from write {}", self.writes);
                self.held.push(Held {
                    it,
                    want,
                    at: 0,
                    what,
                });
            }
            Err(e) => {
                assert!(is_read_error(&e), "{}: scan: {e}", self.ctx);
                self.seen.failed_reads += 1;
            }
        }
    }

    /// `n` writes: puts (overwrites of 600 keys) and about 25% deletes.
    /// A refused write changes nothing; once one is refused every later
    /// one must be too.
    pub fn write(&mut self, n: u64) {
        for _ in 0..n {
            let i = self.rng.below(KEYS);
            let key = short_key(i);
            self.writes += 1;
            let value = (self.rng.below(4) != 0).then(|| {
                let len = 8 + self.rng.below(90) as usize;
                let mut v = format!("{i}:{}:", self.writes).into_bytes();
                v.resize(len.max(v.len()), b'a' + (self.writes % 26) as u8);
                v
            });
            let result = match &value {
                Some(v) => self.db().put(&key, v),
                None => self.db().delete(&key),
            };
            match result {
                Ok(()) => {
                    assert!(!self.stopped, "{}: a write after the stop", self.ctx);
                    match value {
                        Some(v) => self.model.insert(key, v),
                        None => self.model.remove(&key),
                    };
                }
                Err(e) => {
                    assert!(is_job_error(&e), "{}: write: {e}", self.ctx);
                    self.stopped = true;
                    self.seen.refused_writes += 1;
                }
            }
        }
    }

    /// Gets of `n` random keys, now and at a random snapshot.
    fn gets(&mut self, n: u64) {
        for _ in 0..n {
            let key = short_key(self.rng.below(KEYS));
            let got = self.db().get(&key);
            self.seen.failed_reads += u64::from(check(&self.ctx, &key, got, self.model.get(&key)));
            if self.snaps.is_empty() {
                continue;
            }
            let i = self.rng.below(self.snaps.len() as u64) as usize;
            let (snap, model) = &self.snaps[i];
            let got = snap.get(&key);
            let ctx = format!("{} snapshot {i}", self.ctx);
            self.seen.failed_reads += u64::from(check(&ctx, &key, got, model.get(&key)));
        }
    }

    fn advance_iterators(&mut self, n: usize) {
        let ctx = self.ctx.clone();
        let mut failed = 0;
        self.held.retain_mut(|h| match h.read(n, &ctx) {
            None => true,
            Some(f) => {
                failed += u64::from(f);
                false
            }
        });
        self.seen.failed_reads += failed;
    }

    /// The workload run while a fault is armed: writes (driving flushes,
    /// compactions and background filter rebuilds), gets, iterators
    /// advanced and new ones taken, and one filter rebuild.
    pub fn workload(&mut self) {
        for round in 0..6 {
            self.write(150);
            self.gets(40);
            self.advance_iterators(60);
            if round == 2 {
                self.hold_iterator();
                let policy = policy(self.shape.seed + 1 + round);
                let before = self.db().options().filter_policy;
                if let Err(e) = self.db().rebuild_filters(policy) {
                    assert!(is_job_error(&e), "{}: rebuild_filters: {e}", self.ctx);
                    // A failed rebuild puts the old policy back.
                    assert_eq!(self.db().options().filter_policy, before, "{}", self.ctx);
                    self.seen.failed_jobs += 1;
                }
            }
        }
    }

    /// Arms `fault` for reads or read-opens and runs the workload.
    pub fn attack(&mut self, opens: bool, fault: ReadFault) {
        if opens {
            self.fs.fail_read_opens(fault);
        } else {
            self.fs.fail_reads(fault);
        }
        self.workload();
    }

    /// Heals, checks every key now and at every snapshot, every held
    /// iterator to its end and a full scan; waits for background work;
    /// closes; reopens under `reopen_with` and checks again. Returns what
    /// the case saw.
    pub fn heal_and_check(mut self, reopen_with: Option<usize>) -> Seen {
        self.seen.faults = self.fs.faults_injected();
        self.fs.heal();
        let ctx = format!("{} healed", self.ctx);
        self.check_all(&ctx);
        self.seen.filterless = self.db().stats().total.tables_without_usable_filter;
        for h in &mut self.held {
            let failed = loop {
                if let Some(failed) = h.read(100, &ctx) {
                    break failed;
                }
            };
            assert!(!failed, "{ctx}: {} failed once healed", h.what);
        }
        for (i, (snap, model)) in self.snaps.iter().enumerate() {
            for k in 0..KEYS {
                let key = short_key(k);
                let got = snap
                    .get(&key)
                    .unwrap_or_else(|e| panic!("{ctx}: snapshot {i}: {e}"));
                assert!(
                    got.as_ref() == model.get(&key),
                    "{ctx}: snapshot {i} key {k}"
                );
            }
            let scanned: Model = snap
                .scan::<&[u8], _>(..)
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(scanned == *model, "{ctx}: snapshot {i} scan");
        }
        let waited = self.db().wait_for_background_work();
        match &waited {
            Ok(()) => assert!(!self.stopped, "{ctx}: writes stopped, the wait succeeded"),
            Err(e) => assert!(is_job_error(e), "{ctx}: wait: {e}"),
        }
        self.stopped |= waited.is_err();
        self.check_all(&format!("{ctx}, after the wait"));
        self.held.clear();
        self.snaps.clear();
        let closed = self.db.take().unwrap().close();
        match &closed {
            Ok(()) => assert!(!self.stopped, "{ctx}: writes stopped, the close succeeded"),
            Err(e) => assert!(is_job_error(e), "{ctx}: close: {e}"),
        }
        let options = Shape {
            max_open_files: reopen_with,
            ..self.shape
        }
        .options();
        let db = Db::open_with_fs(self.dir.path(), options, Arc::new(self.fs.clone()))
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        self.db = Some(db);
        self.stopped = false;
        self.check_all(&format!("{ctx}, reopened"));
        // It takes new work and keeps it.
        self.write(300);
        assert!(!self.stopped, "{ctx}: reopened, writes refused");
        self.db().wait_for_background_work().unwrap();
        self.check_all(&format!("{ctx}, reopened and written"));
        self.db.take().unwrap().close().unwrap();
        self.seen
    }

    /// Every key and a full scan match the model, without an error.
    fn check_all(&self, ctx: &str) {
        for k in 0..KEYS {
            let key = short_key(k);
            let got = self
                .db()
                .get(&key)
                .unwrap_or_else(|e| panic!("{ctx}: key {k}: {e}"));
            assert!(
                got.as_ref() == self.model.get(&key),
                "{ctx}: key {k}: got {:?}, want {:?}",
                got.map(|v| String::from_utf8_lossy(&v).into_owned()),
                self.model
                    .get(&key)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            );
        }
        let scanned: Model = self
            .db()
            .scan::<&[u8], _>(..)
            .unwrap_or_else(|e| panic!("{ctx}: scan: {e}"))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
        assert!(scanned == self.model, "{ctx}: full scan");
    }
}

/// A get's answer is the model's, or a read error. True when it failed.
fn check(
    ctx: &str,
    key: &[u8],
    got: bloomlsm::Result<Option<Vec<u8>>>,
    want: Option<&Vec<u8>>,
) -> bool {
    match got {
        Ok(v) => {
            assert!(
                v.as_ref() == want,
                "{ctx}: key {}: got {:?}, want {:?}",
                String::from_utf8_lossy(key),
                v.map(|v| String::from_utf8_lossy(&v).into_owned()),
                want.map(|v| String::from_utf8_lossy(v).into_owned())
            );
            false
        }
        Err(e) => {
            assert!(
                is_read_error(&e),
                "{ctx}: key {}: {e}",
                String::from_utf8_lossy(key)
            );
            true
        }
    }
}
