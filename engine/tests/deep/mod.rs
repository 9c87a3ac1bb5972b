//! Operations for deep-tree tests: a store of many levels of narrow tables
//! driven by a write load whose keys cluster in a window that drifts over a
//! large key space, with about a third of the operations deletes.
//!
//! Shared by `engine/tests/engine_suite/deep_model.rs` (against a `BTreeMap`) and
//! `benches/tests/differential.rs` (against RocksDB), which includes this
//! file by path. A case is generated from one `u64` seed by a generator
//! that never changes with crate versions (SplitMix64), so a seed names
//! the same case forever; [`DeepCases`] is a proptest strategy whose
//! shrinking deletes runs of operations (halving the run length down to
//! single operations), which finds a short failing sequence in a few
//! hundred runs where element-by-element deletion would need thousands.
#![allow(dead_code)] // Each including test uses the parts it needs.

use std::cell::Cell;
use std::fmt;
use std::io::Write as _;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Instant;

use bloomlsm::{FilterKind, FilterPolicy, Options};
use proptest::strategy::{NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;

/// Keys are `u32`s shown as 8 hex digits, so byte order is numeric order.
pub fn key(k: u32) -> Vec<u8> {
    format!("{k:08x}").into_bytes()
}

/// The value written by the operation with `id`: unique per write, so an
/// older version of a key can never pass for the newest.
pub fn value(id: u32, pad: u8) -> Vec<u8> {
    let mut v = format!("v{id}-").into_bytes();
    v.resize(v.len() + usize::from(pad), b'.');
    v
}

/// A filter policy for `rebuild_filters` (and for the store at open).
#[derive(Clone, Debug, PartialEq)]
pub enum PolicySpec {
    /// `FilterPolicy::Uniform`.
    Uniform(f64),
    /// `FilterPolicy::PerLevel`.
    PerLevel(Vec<f64>),
    /// `FilterPolicy::Optimized`.
    Optimized(f64),
}

impl PolicySpec {
    /// The engine's policy.
    pub fn policy(&self) -> FilterPolicy {
        match self {
            Self::Uniform(b) => FilterPolicy::Uniform { bits_per_key: *b },
            Self::PerLevel(v) => FilterPolicy::PerLevel(v.clone()),
            Self::Optimized(b) => FilterPolicy::Optimized { bits_per_key: *b },
        }
    }
}

/// One step of a case. Keys are absolute, so deleting other steps while
/// shrinking leaves each remaining step's keys as they were. `pick` fields
/// choose a key at run time from what the store should hold then.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `put(key(k), value(id, pad))`.
    Put { k: u32, id: u32, pad: u8 },
    /// `delete(key(k))`.
    Delete { k: u32 },
    /// One batch: `Some((id, pad))` puts, `None` deletes, applied in order.
    Batch(Vec<(u32, Option<(u32, u8)>)>),
    /// `get` of a key chosen by the generator (in the window, written
    /// long ago, or almost surely never written).
    Get { k: u32 },
    /// `get` of the `pick`-th key present now (nothing if none is).
    GetPresent { pick: u32 },
    /// `get` of the key of the `back`-th most recent put or delete (0 =
    /// the last): keys whose versions sit in L0 and the memtable.
    GetRecent { back: u16 },
    /// `get` of the `pick`-th key deleted and not written since.
    GetDeleted { pick: u32 },
    /// `scan(key(from)..key(from + span))`, compared whole.
    Scan { from: u32, span: u32 },
    /// Takes a snapshot into `slot`, dropping the one there.
    Snapshot { slot: u8 },
    /// Checks the snapshot in `slot` (if any): `get` of a key it holds,
    /// of a key present now, and a scan from that key, all as of the snapshot.
    CheckSnapshot { slot: u8, pick: u32, span: u32 },
    /// Drops the snapshot in `slot`.
    ReleaseSnapshot { slot: u8 },
    /// `rebuild_filters(policy)`.
    RebuildFilters(PolicySpec),
    /// `flush()` (a memtable into L0; never a full compaction).
    Flush,
    /// Drops every snapshot, `close()`, `open()` with the same options.
    Reopen,
}

/// Number of snapshot slots.
pub const SNAPSHOT_SLOTS: u8 = 3;

/// The store's configuration for one case: a deep tree of narrow tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// `Options::memtable_bytes`.
    pub memtable_bytes: usize,
    /// `Options::target_file_bytes`.
    pub target_file_bytes: u64,
    /// `Options::l1_bytes`.
    pub l1_bytes: u64,
    /// `Options::block_size`.
    pub block_size: usize,
    /// `Options::l0_compaction_trigger`.
    pub l0_compaction_trigger: usize,
    /// `Options::filter_kind`.
    pub filter_kind: FilterKind,
    /// `Options::filter_policy` at open.
    pub policy: PolicySpec,
    /// `Options::deletion_compaction_ratio`.
    pub deletion_compaction_ratio: Option<f64>,
    /// `Options::max_open_files`.
    pub max_open_files: Option<usize>,
}

impl Shape {
    /// Level size ratio of every case.
    pub const LEVEL_SIZE_RATIO: u64 = 3;
    /// Levels of every case, L0 included.
    pub const NUM_LEVELS: usize = 7;

    /// Options of the store: inline background work, so that a case runs
    /// the same way every time.
    pub fn options(&self) -> Options {
        Options {
            filter_policy: self.policy.policy(),
            filter_kind: self.filter_kind,
            block_size: self.block_size,
            memtable_bytes: self.memtable_bytes,
            block_cache_bytes: 32 << 10,
            l0_compaction_trigger: self.l0_compaction_trigger,
            l1_bytes: self.l1_bytes,
            level_size_ratio: Self::LEVEL_SIZE_RATIO,
            num_levels: Self::NUM_LEVELS,
            target_file_bytes: self.target_file_bytes,
            background_work: false,
            deletion_compaction_ratio: self.deletion_compaction_ratio,
            max_open_files: self.max_open_files,
            ..Options::default()
        }
    }
}

/// A generated case: its seed, the store's shape and the operations.
#[derive(Clone, PartialEq)]
pub struct Case {
    /// The seed it was generated from (`BLOOMLSM_MODEL_SEED` replays it).
    pub seed: u64,
    /// The store's configuration.
    pub shape: Shape,
    /// What to do, in order.
    pub ops: Vec<Op>,
}

impl fmt::Debug for Case {
    // One operation per line, numbered, whatever the `{:#?}` flag says:
    // a shrunk case is read by a person.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Case {{ seed: {:#018x}, shape: {:?},",
            self.seed, self.shape
        )?;
        writeln!(f, "  ops ({}):", self.ops.len())?;
        // A shrunk case is short; a long one is named by its seed.
        let n = self.ops.len();
        for (i, op) in self.ops.iter().enumerate() {
            if n <= 1000 || !(20..n - 20).contains(&i) {
                writeln!(f, "  {i:5}: {op:?}")?;
            } else if i == 20 {
                writeln!(f, "  ... {} operations ...", n - 40)?;
            }
        }
        write!(f, "}}")
    }
}

/// SplitMix64: a generator fixed by its definition, so a seed means the
/// same case in every build.
#[derive(Clone, Debug)]
pub struct Mix(u64);

impl Mix {
    /// Starts from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`. REQUIRES: `n > 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Bits per key for a filter: 0 (no filter) sometimes, else fractional
    /// values from 0.5 to 16.
    pub fn bits_per_key(&mut self) -> f64 {
        if self.chance(0.1) {
            0.0
        } else {
            (5.0 + self.below(156) as f64) / 10.0
        }
    }

    /// A random filter policy.
    pub fn policy(&mut self) -> PolicySpec {
        match self.below(3) {
            0 => PolicySpec::Uniform(self.bits_per_key()),
            1 => {
                let levels = 1 + self.below(Shape::NUM_LEVELS as u64 + 1);
                PolicySpec::PerLevel((0..levels).map(|_| self.bits_per_key()).collect())
            }
            _ => PolicySpec::Optimized(self.bits_per_key()),
        }
    }
}

/// Keys stay below this (keys are 8 hex digits).
const KEY_SPACE: u64 = 1 << 30;

/// Writes keys into a window of `width` keys whose start drifts upward by
/// about one key per operation, jumping back now and then to a region
/// written long ago (whose versions are deep in the tree by then).
struct Generator {
    rng: Mix,
    base: u64,
    width: u64,
    /// Every key written, in order (repeats allowed).
    written: Vec<u32>,
    next_id: u32,
}

impl Generator {
    fn window_key(&mut self) -> u32 {
        ((self.base + self.rng.below(self.width)) % KEY_SPACE) as u32
    }

    /// A key written before, recent ones far more often than old ones.
    fn old_key(&mut self) -> u32 {
        if self.written.is_empty() {
            return self.window_key();
        }
        let n = self.written.len() as u64;
        let back = if self.rng.chance(0.5) {
            self.rng.below(n.min(2000))
        } else {
            self.rng.below(n)
        };
        self.written[(n - 1 - back) as usize]
    }

    fn put_key(&mut self) -> u32 {
        let k = match self.rng.below(100) {
            0..85 => self.window_key(),
            85..97 => self.old_key(),
            _ => self.rng.below(KEY_SPACE) as u32,
        };
        self.written.push(k);
        k
    }

    fn delete_key(&mut self) -> u32 {
        match self.rng.below(100) {
            0..55 => self.window_key(),
            55..95 => self.old_key(),
            _ => self.rng.below(KEY_SPACE) as u32,
        }
    }

    fn put(&mut self) -> (u32, u8) {
        self.next_id += 1;
        (self.next_id, self.rng.below(24) as u8)
    }

    fn drift(&mut self) {
        self.base += self.rng.below(3);
        if self.rng.chance(0.002) && !self.written.is_empty() {
            let back = self.old_key();
            self.base = u64::from(back).saturating_sub(self.width / 2);
        }
    }

    fn op(&mut self) -> Op {
        self.drift();
        match self.rng.below(1000) {
            0..280 => {
                let k = self.put_key();
                let (id, pad) = self.put();
                Op::Put { k, id, pad }
            }
            280..560 => Op::Delete {
                k: self.delete_key(),
            },
            560..640 => {
                let n = 1 + self.rng.below(8);
                let items = (0..n)
                    .map(|_| {
                        if self.rng.chance(0.4) {
                            (self.delete_key(), None)
                        } else {
                            let k = self.put_key();
                            (k, Some(self.put()))
                        }
                    })
                    .collect();
                Op::Batch(items)
            }
            640..780 => {
                let k = match self.rng.below(3) {
                    0 => self.window_key(),
                    1 => self.old_key(),
                    _ => self.rng.below(KEY_SPACE) as u32,
                };
                Op::Get { k }
            }
            780..810 => {
                let horizon = if self.rng.chance(0.7) { 100 } else { 1000 };
                Op::GetRecent {
                    back: self.rng.below(horizon) as u16,
                }
            }
            810..840 => Op::GetPresent {
                pick: self.rng.next_u64() as u32,
            },
            840..900 => Op::GetDeleted {
                pick: self.rng.next_u64() as u32,
            },
            900..940 => Op::Scan {
                from: if self.rng.chance(0.8) {
                    self.base as u32
                } else {
                    self.old_key()
                },
                span: 1 + self.rng.below(2 * self.width) as u32,
            },
            940..950 => Op::Snapshot {
                slot: self.rng.below(u64::from(SNAPSHOT_SLOTS)) as u8,
            },
            950..985 => Op::CheckSnapshot {
                slot: self.rng.below(u64::from(SNAPSHOT_SLOTS)) as u8,
                pick: self.rng.next_u64() as u32,
                span: 1 + self.rng.below(self.width) as u32,
            },
            985..990 => Op::ReleaseSnapshot {
                slot: self.rng.below(u64::from(SNAPSHOT_SLOTS)) as u8,
            },
            990..994 => Op::RebuildFilters(self.rng.policy()),
            994..999 => Op::Flush,
            _ => Op::Reopen,
        }
    }
}

/// The case of `seed`, with `len` operations.
pub fn generate(seed: u64, len: usize) -> Case {
    let mut rng = Mix::new(seed);
    let shape = Shape {
        memtable_bytes: 512 + rng.below(1024) as usize,
        target_file_bytes: 512 + rng.below(1024),
        l1_bytes: 1024 + rng.below(2048),
        block_size: [64, 128, 256][rng.below(3) as usize],
        l0_compaction_trigger: 2 + rng.below(4) as usize,
        filter_kind: if rng.chance(0.5) {
            FilterKind::Blocked
        } else {
            FilterKind::Standard
        },
        policy: rng.policy(),
        // From the seed, not the generator: every seed keeps its case.
        // Half the seeds without (at 0.15 almost every L0 table of this
        // load, a third deletes, goes down at once, and L0 stays thin).
        deletion_compaction_ratio: [None, Some(0.5), None, Some(0.15)][(seed % 4) as usize],
        // Also from the seed: half the seeds keep one or three table files
        // open, closing and reopening files under every read.
        max_open_files: [None, Some(3), None, Some(1)][(seed / 4 % 4) as usize],
    };
    let mut g = Generator {
        base: rng.below(KEY_SPACE / 2),
        width: 128 + rng.below(512),
        rng,
        written: Vec::new(),
        next_id: 0,
    };
    let ops = (0..len).map(|_| g.op()).collect();
    Case { seed, shape, ops }
}

/// The operation a thread's case is running, for the watchdog.
struct Progress {
    thread: ThreadId,
    seed: u64,
    index: usize,
    op: Option<Op>,
    since: Instant,
}

/// The operation of each case running now, one entry per thread running
/// one. Invariant: an entry stays only while its case runs ([`progress`]
/// puts it, [`stop_watchdog`] takes it away when the case ends, however
/// it ends): the watchdog outlives the test that started it, in a test
/// binary of many tests, and an entry left behind by a case that ended
/// would read as a hang a while later and end the process of the other
/// tests.
static PROGRESS: Mutex<Vec<Progress>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<Progress>> {
    PROGRESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records that operation `index` of case `seed`, run by this thread,
/// starts (`None`: the final checks).
pub fn progress(seed: u64, index: usize, op: Option<&Op>) {
    let thread = std::thread::current().id();
    let now = Progress {
        thread,
        seed,
        index,
        op: op.cloned(),
        since: Instant::now(),
    };
    let mut running = running();
    match running.iter_mut().find(|p| p.thread == thread) {
        Some(p) => *p = now,
        None => running.push(now),
    }
}

/// Whether this thread runs a case the watchdog watches.
pub fn watched() -> bool {
    let thread = std::thread::current().id();
    running().iter().any(|p| p.thread == thread)
}

/// Turns a hang into a failure that names the case and the operation:
/// ends the process when one operation runs for `limit` seconds
/// (`BLOOMLSM_MODEL_STALL_SECONDS`, default 120; the slowest operation of a
/// healthy run takes well under a second). One watchdog a process, however
/// many tests start it; it watches every case running.
pub fn start_watchdog() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let limit = std::time::Duration::from_secs(
            std::env::var("BLOOMLSM_MODEL_STALL_SECONDS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(120),
        );
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                if let Some(p) = running().iter().find(|p| p.since.elapsed() > limit) {
                    // Straight to the process's stderr: `eprintln!` here
                    // writes to the output the test that started this
                    // thread captures, dropped once that test has ended.
                    let _ = writeln!(
                        std::io::stderr(),
                        "deep case: operation {} of case seed {:#018x} has run for over {} s (a hang): {:?}",
                        p.index,
                        p.seed,
                        limit.as_secs(),
                        p.op
                    );
                    std::process::exit(101);
                }
            }
        });
    });
}

/// Held by a case while it runs on this thread: dropped when the case
/// ends, however it ends (passed, failed, panicked), it stops the
/// watchdog's watch of it ([`stop_watchdog`]).
#[derive(Debug)]
pub struct CaseWatch;

impl Drop for CaseWatch {
    fn drop(&mut self) {
        stop_watchdog();
    }
}

/// Stops watching the case this thread runs (it ended: passed, failed
/// or panicked).
pub fn stop_watchdog() {
    let thread = std::thread::current().id();
    running().retain(|p| p.thread != thread);
}

thread_local! {
    static FAILED_AT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Called by a test that fails at operation `index` of the case it runs:
/// the shrinker then first cuts every operation after it.
pub fn report_failure_at(index: usize) {
    FAILED_AT.with(|f| f.set(Some(index)));
}

/// Cases of `len` operations from seeds proptest draws (or `fixed_seed`).
#[derive(Clone, Debug)]
pub struct DeepCases {
    /// Operations per case.
    pub len: usize,
    /// Generate this seed every time instead of drawing one.
    pub fixed_seed: Option<u64>,
}

impl Strategy for DeepCases {
    type Tree = CaseTree;
    type Value = Case;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let seed = match self.fixed_seed {
            Some(s) => s,
            None => proptest::num::u64::ANY.new_tree(runner)?.current(),
        };
        let case = generate(seed, self.len);
        let kept = (0..case.ops.len()).collect::<Vec<_>>();
        FAILED_AT.with(|f| f.set(None));
        Ok(CaseTree {
            chunk: (kept.len() / 2).max(1),
            kept,
            case,
            pos: 0,
            candidate: None,
        })
    }
}

/// Shrinks a case by deleting runs of operations: runs of half the case,
/// then a quarter, and so on down to single operations. `kept` is the
/// last sequence known to fail; `candidate` the run being tried without.
#[derive(Clone, Debug)]
pub struct CaseTree {
    case: Case,
    kept: Vec<usize>,
    chunk: usize,
    pos: usize,
    candidate: Option<(usize, usize)>,
}

impl CaseTree {
    fn next_candidate(&mut self) -> bool {
        loop {
            if self.chunk == 0 {
                return false;
            }
            if self.pos < self.kept.len() {
                let end = (self.pos + self.chunk).min(self.kept.len());
                self.candidate = Some((self.pos, end));
                return true;
            }
            self.chunk /= 2;
            self.pos = 0;
        }
    }
}

impl ValueTree for CaseTree {
    type Value = Case;

    fn current(&self) -> Case {
        let ops = self
            .kept
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.candidate.is_some_and(|(s, e)| (s..e).contains(i)))
            .map(|(_, &op)| self.case.ops[op].clone())
            .collect();
        Case {
            seed: self.case.seed,
            shape: self.case.shape.clone(),
            ops,
        }
    }

    // Called after `current()` failed: the candidate run is not needed.
    fn simplify(&mut self) -> bool {
        if let Some((s, e)) = self.candidate.take() {
            self.kept.drain(s..e);
        }
        // Nothing after the failing operation ran: drop it all at once.
        if let Some(at) = FAILED_AT.with(|f| f.take())
            && at + 1 < self.kept.len()
        {
            self.candidate = Some((at + 1, self.kept.len()));
            return true;
        }
        self.next_candidate()
    }

    // Called after `current()` passed: the candidate run is needed.
    fn complicate(&mut self) -> bool {
        if self.candidate.take().is_none() {
            return false;
        }
        self.pos += self.chunk;
        self.next_candidate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_case() {
        assert_eq!(generate(7, 300), generate(7, 300));
        assert_ne!(generate(7, 300).ops, generate(8, 300).ops);
    }
}
