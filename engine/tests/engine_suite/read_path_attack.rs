//! The read path against a `BTreeMap`, on the shapes where it is easiest
//! to get wrong: keys that share their first eight bytes (the level
//! fences), keys that are prefixes of one another, `0x00` and `0xff`
//! bytes, values far larger than the 64..256-byte data blocks (so one key's
//! versions span blocks), narrow tables in many levels, a third of the
//! writes deletes, snapshots held across many writes, and, unlike the
//! other model tests:
//!
//! - the background threads on (flushes, compactions and, under
//!   `FilterPolicy::Optimized`, filter rebuilds racing the reads);
//! - scans with every kind of bound (included, excluded, unbounded) from
//!   and to keys beside the written ones, now and at snapshots;
//! - iterators opened and drained a few pairs at a time across later
//!   writes, flushes, compactions, filter rebuilds and deletes of the
//!   tables they read: each must give exactly the model as of its opening;
//! - close and reopen in the middle (held iterators and snapshots then
//!   answer `Error::Closed`).
//!
//! `BLOOMLSM_ATTACK_SEED` replays one seed.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::ops::Bound;

use bloomlsm::{Db, DbIter, Error, FilterKind, FilterPolicy, Options, Snapshot, WriteBatch};
use common::{Model, Rng, direct_reads_work, scratch_dir};

/// The keys written: families that share eight-byte fences, prefixes of
/// each other, and `0x00`/`0xff` bytes at the fence boundary.
fn universe(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    // Random keys over few bytes, half of them behind an eight-byte
    // prefix: many share fences, many are prefixes of others.
    for _ in 0..40 {
        let mut k = if rng.below(2) == 0 {
            b"zzzzzzzz".to_vec()
        } else {
            Vec::new()
        };
        for _ in 0..1 + rng.below(11) {
            k.push(*rng.pick(&[0x00, 0x01, b'z', 0xfe, 0xff]));
        }
        keys.push(k);
    }
    // One fence for all: the eight bytes "fencefen", then 0..3 more bytes.
    for tail in [
        &b""[..],
        b"\x00",
        b"\x00\x00",
        b"\x00\x01",
        b"\x01",
        b"a",
        b"a\x00",
        b"aa",
        b"ab",
        b"b",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
        b"\xff\xff\xff",
    ] {
        keys.push([&b"fencefen"[..], tail].concat());
    }
    // Short keys that pad to the same fence.
    for len in 1..=9 {
        keys.push(
            vec![b'p'; 1]
                .into_iter()
                .chain(vec![0u8; len - 1])
                .collect(),
        );
    }
    // Prefix chains.
    for len in 1..=12 {
        keys.push(b"chainchainchain"[..len].to_vec());
    }
    // 0xff runs crossing the eighth byte.
    for len in 6..=10 {
        keys.push(vec![0xfe; len]);
        let mut k = vec![0xff; len];
        k[0] = 0xfe;
        k[len - 1] = 0xfe;
        keys.push(k);
    }
    // A plain family, so tables also hold keys that fences tell apart.
    for i in 0..60u32 {
        keys.push(format!("m{:03}", i * 7).into_bytes());
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Keys to read and to bound scans with: the written ones and keys beside
/// each (one byte more or less, the last byte up).
fn probes(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![vec![0x00], vec![0xff; 12]];
    for k in keys {
        out.push(k.clone());
        out.push([k.as_slice(), &[0x00]].concat());
        out.push([k.as_slice(), &[0xff]].concat());
        if k.len() > 1 {
            out.push(k[..k.len() - 1].to_vec());
        }
        if let Some(&last) = k.last()
            && last < 0xff
        {
            let mut up = k.clone();
            *up.last_mut().unwrap() = last + 1;
            out.push(up);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn options(rng: &mut Rng, background: bool) -> Options {
    let bits = [0.0, 0.7, 3.0, 10.0][rng.below(4) as usize];
    let filter_policy = match rng.below(3) {
        0 => FilterPolicy::Uniform { bits_per_key: bits },
        _ => FilterPolicy::Optimized {
            bits_per_key: 0.5 + rng.below(19) as f64 / 2.0,
        },
    };
    let filter_kind = *rng.pick(&[
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ]);
    Options {
        memtable_bytes: 2048 + rng.below(4096) as usize,
        max_immutable_memtables: 1 + rng.below(2) as usize,
        target_file_bytes: 512 + rng.below(1536),
        l1_bytes: 2048 + rng.below(2048),
        level_size_ratio: 2 + rng.below(2),
        dynamic_level_bytes: rng.below(4) != 0,
        num_levels: 7,
        block_size: [64, 96, 128, 256][rng.below(4) as usize],
        l0_compaction_trigger: 2 + rng.below(2) as usize,
        block_cache_bytes: [0, 4 << 10, 64 << 10][rng.below(3) as usize],
        background_work: background,
        filter_policy,
        filter_kind,
        ..Options::default()
    }
}

fn policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(3) {
        0 => FilterPolicy::Uniform {
            bits_per_key: [0.0, 0.3, 1.0, 6.0][rng.below(4) as usize],
        },
        1 => FilterPolicy::PerLevel((0..7).map(|_| rng.below(24) as f64 / 2.0).collect()),
        _ => FilterPolicy::Optimized {
            bits_per_key: 0.5 + rng.below(20) as f64 / 2.0,
        },
    }
}

/// A value of 0 to about 3 blocks, naming its write (or empty).
fn value(rng: &mut Rng, op: usize) -> Vec<u8> {
    if rng.below(12) == 0 {
        // An empty value is a value, not a tombstone.
        return Vec::new();
    }
    let len = match rng.below(10) {
        0..=5 => rng.below(12),
        6..=8 => rng.below(120),
        _ => 200 + rng.below(600),
    } as usize;
    let mut v = format!("{op}:").into_bytes();
    v.extend((0..len).map(|i| (op + i) as u8));
    v
}

fn bound(rng: &mut Rng, probes: &[Vec<u8>]) -> Bound<Vec<u8>> {
    match rng.below(5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(rng.pick(probes).clone()),
        _ => Bound::Excluded(rng.pick(probes).clone()),
    }
}

/// The model's pairs within `(start, end)`; empty where the range is
/// empty or inverted (as a scan of it is).
fn expected(
    model: &Model,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| {
            let above = match start {
                Bound::Included(s) => *k >= s,
                Bound::Excluded(s) => *k > s,
                Bound::Unbounded => true,
            };
            let below = match end {
                Bound::Included(e) => *k <= e,
                Bound::Excluded(e) => *k < e,
                Bound::Unbounded => true,
            };
            above && below
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// An iterator opened earlier and what it must still give.
struct Held {
    it: DbIter,
    want: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    what: String,
}

impl Held {
    /// Takes up to `n` pairs (all when `None`) and checks them.
    fn drain(&mut self, n: Option<usize>, at: &str) -> bool {
        let mut taken = 0;
        loop {
            if n.is_some_and(|n| taken >= n) {
                return false;
            }
            let got = self.it.next().map(|r| r.unwrap());
            let want = self.want.next();
            assert_eq!(
                got.as_ref().map(|p| short(&p.0)),
                want.as_ref().map(|p| short(&p.0)),
                "{at}: held iterator {} gave the wrong key",
                self.what
            );
            assert_eq!(
                got, want,
                "{at}: held iterator {} gave the wrong value",
                self.what
            );
            if got.is_none() {
                return true;
            }
            taken += 1;
        }
    }
}

fn short(k: &[u8]) -> String {
    format!("{k:?}")
}

fn scan_all(it: bloomlsm::Result<DbIter>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.unwrap().map(|r| r.unwrap()).collect()
}

struct Case {
    seed: u64,
    rng: Rng,
    options: Options,
    keys: Vec<Vec<u8>>,
    probes: Vec<Vec<u8>>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    held: Vec<Held>,
    deepest: usize,
    dir: std::path::PathBuf,
}

impl Case {
    fn check_gets(&self, db: &Db, at: &str) {
        for p in &self.probes {
            let want = self.model.get(p).cloned();
            let got = db.get(p).unwrap();
            if got != want {
                let (_, trace) = db.get_traced(p).unwrap();
                let tables: Vec<u64> = db.stats().levels.iter().map(|l| l.tables).collect();
                panic!(
                    "{at}: get {p:?} = {:?}, want {:?}\n  trace {:?}\n  tables {tables:?}",
                    got.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                    want.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                    trace.steps
                );
            }
            for (i, (s, frozen)) in self.snapshots.iter().enumerate() {
                assert_eq!(
                    s.get(p).unwrap(),
                    frozen.get(p).cloned(),
                    "{at}: snapshot {i} (seq {}) get {p:?}",
                    s.sequence()
                );
            }
        }
    }

    fn check_scan(&mut self, db: &Db, at: &str) {
        let (start, end) = (
            bound(&mut self.rng, &self.probes),
            bound(&mut self.rng, &self.probes),
        );
        let range = (start.clone(), end.clone());
        let inverted = match (&start, &end) {
            (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
                s > e
                    || (s == e
                        && !matches!((&start, &end), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        };
        if inverted {
            // `BTreeMap::range` panics on these; the store must give nothing.
            assert_eq!(
                scan_all(db.scan(range.clone())),
                Vec::new(),
                "{at}: inverted scan {range:?}"
            );
            return;
        }
        let want = expected(&self.model, &start, &end);
        let got = scan_all(db.scan(range.clone()));
        assert_eq!(got.len(), want.len(), "{at}: scan {range:?} pair count");
        assert_eq!(got, want, "{at}: scan {range:?}");
        for (i, (s, frozen)) in self.snapshots.iter().enumerate() {
            let want = expected(frozen, &start, &end);
            let got = scan_all(s.scan(range.clone()));
            assert_eq!(got, want, "{at}: snapshot {i} scan {range:?}");
        }
    }

    fn step(&mut self, db: &mut Option<Db>, op: usize) {
        let at = format!("seed {} op {op}", self.seed);
        let d = db.as_ref().unwrap();
        // Writes cluster in a window drifting over the keys.
        let n = self.keys.len() as u64;
        let start = (op as u64 / 6) % n;
        let pick = |rng: &mut Rng| (start + rng.below(24)) % n;
        match self.rng.below(1000) {
            0..=479 => {
                let k = self.keys[pick(&mut self.rng) as usize].clone();
                let v = value(&mut self.rng, op);
                d.put(&k, &v).unwrap();
                self.model.insert(k, v);
            }
            480..=729 => {
                let k = self.keys[pick(&mut self.rng) as usize].clone();
                d.delete(&k).unwrap();
                self.model.remove(&k);
            }
            730..=779 => {
                let mut batch = WriteBatch::new();
                for _ in 0..1 + self.rng.below(6) {
                    let k = self.keys[pick(&mut self.rng) as usize].clone();
                    if self.rng.below(2) == 0 {
                        let v = value(&mut self.rng, op);
                        batch.put(&k, &v);
                        self.model.insert(k, v);
                    } else {
                        batch.delete(&k);
                        self.model.remove(&k);
                    }
                }
                d.write(batch).unwrap();
            }
            780..=829 => {
                let p = self.rng.pick(&self.probes).clone();
                assert_eq!(
                    d.get(&p).unwrap(),
                    self.model.get(&p).cloned(),
                    "{at}: get {p:?}"
                );
                if let Some((s, frozen)) = self.snapshots.first() {
                    assert_eq!(
                        s.get(&p).unwrap(),
                        frozen.get(&p).cloned(),
                        "{at}: snapshot get {p:?}"
                    );
                }
            }
            830..=859 => self.check_scan(d, &at),
            860..=884 => {
                // Open an iterator, maybe at a snapshot, to drain later.
                let (start, end) = (bound(&mut self.rng, &self.probes), Bound::Unbounded);
                let (it, model) = match self.snapshots.last() {
                    Some((s, frozen)) if self.rng.below(2) == 0 => {
                        (s.scan((start.clone(), end.clone())).unwrap(), frozen)
                    }
                    _ => (d.scan((start.clone(), end.clone())).unwrap(), &self.model),
                };
                let want = expected(model, &start, &end).into_iter();
                self.held.push(Held {
                    it,
                    want,
                    what: format!("opened at op {op} from {start:?}"),
                });
                if self.held.len() > 4 {
                    let mut h = self.held.remove(0);
                    h.drain(None, &at);
                }
            }
            885..=934 => {
                let i = self.rng.below(self.held.len().max(1) as u64) as usize;
                let n = 1 + self.rng.below(4) as usize;
                if let Some(h) = self.held.get_mut(i)
                    && h.drain(Some(n), &at)
                {
                    self.held.remove(i);
                }
            }
            935..=954 => {
                if self.snapshots.len() >= 3 {
                    let i = self.rng.below(3) as usize;
                    self.snapshots.remove(i);
                }
                self.snapshots.push((d.snapshot(), self.model.clone()));
            }
            955..=969 => d.flush().unwrap(),
            970..=979 => d.rebuild_filters(policy(&mut self.rng)).unwrap(),
            980..=993 => d.wait_for_background_work().unwrap(),
            995..=996 => {}
            _ => {
                // Reopen: held iterators and snapshots are closed with it.
                let old = db.take().unwrap();
                let snapshot = self.snapshots.first().map(|(s, _)| s.sequence());
                old.close().unwrap();
                for h in &mut self.held {
                    assert!(
                        matches!(h.it.next(), Some(Err(Error::Closed)) | None),
                        "{at}: a held iterator after close"
                    );
                }
                self.held.clear();
                if let Some((s, _)) = self.snapshots.first() {
                    assert!(
                        matches!(s.get(b"m000"), Err(Error::Closed)),
                        "{at}: {snapshot:?}"
                    );
                }
                self.snapshots.clear();
                if self.rng.below(2) == 0 {
                    // Reopened under other read and shape options: the
                    // tables stay where they are and must read the same.
                    let o = &mut self.options;
                    o.block_size = [64, 128, 512][self.rng.below(3) as usize];
                    o.dynamic_level_bytes = !o.dynamic_level_bytes;
                    o.filter_kind = *self.rng.pick(&[
                        FilterKind::Blocked,
                        FilterKind::Standard,
                        FilterKind::Ribbon,
                    ]);
                    o.block_cache_bytes = [0, 4 << 10, 64 << 10][self.rng.below(3) as usize];
                    o.target_file_bytes = 512 + self.rng.below(1536);
                    o.level_size_ratio = 2 + self.rng.below(2);
                    o.use_direct_reads = self.rng.below(2) == 0 && direct_reads_work(&self.dir);
                }
                *db = Some(Db::open(&self.dir, self.options.clone()).unwrap());
            }
        }
        let d = db.as_ref().unwrap();
        if let Some(l) = d.stats().levels.iter().rposition(|l| l.tables > 0) {
            self.deepest = self.deepest.max(l);
        }
    }
}

fn run_case(seed: u64, background: bool, ops: usize) -> usize {
    let mut rng = Rng(seed);
    let mut options = options(&mut rng, background);
    let dir = scratch_dir();
    // Direct reads where the scratch file system takes them (tmpfs does
    // since Linux 6.6).
    options.use_direct_reads = rng.below(3) == 0 && direct_reads_work(dir.path());
    let keys = universe(&mut rng);
    let probes = probes(&keys);
    let mut case = Case {
        seed,
        rng,
        options: options.clone(),
        keys,
        probes,
        model: Model::new(),
        snapshots: Vec::new(),
        held: Vec::new(),
        deepest: 0,
        dir: dir.path().to_path_buf(),
    };
    let mut db = Some(Db::open(dir.path(), options.clone()).unwrap());
    for op in 0..ops {
        case.step(&mut db, op);
        if op % 150 == 149 {
            let at = format!("seed {seed} op {op}");
            case.check_gets(db.as_ref().unwrap(), &at);
            case.check_scan(db.as_ref().unwrap(), &at);
        }
    }
    let at = format!("seed {seed} end");
    let d = db.take().unwrap();
    for mut h in std::mem::take(&mut case.held) {
        h.drain(None, &at);
    }
    case.check_gets(&d, &at);
    assert_eq!(
        scan_all(d.scan::<&[u8], _>(..)),
        expected(&case.model, &Bound::Unbounded, &Bound::Unbounded),
        "{at}: full scan"
    );
    case.snapshots.clear();
    d.close().unwrap();
    let d = Db::open(dir.path(), options).unwrap();
    case.check_gets(&d, &format!("seed {seed} reopened"));
    if std::env::var_os("BLOOMLSM_ATTACK_VERBOSE").is_some() {
        let s = d.stats();
        eprintln!(
            "seed {seed}: deepest L{}, tables {:?}, compactions {}, trivial moves {}, rebalanced {}",
            case.deepest,
            s.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
            s.compactions,
            s.trivial_moves,
            s.filters_rebalanced
        );
    }
    d.close().unwrap();
    case.deepest
}

fn ops() -> usize {
    std::env::var("BLOOMLSM_ATTACK_OPS").map_or(4000, |s| s.parse().unwrap())
}

fn seeds(default: std::ops::RangeInclusive<u64>) -> Vec<u64> {
    match std::env::var("BLOOMLSM_ATTACK_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => default.collect(),
    }
}

#[test]
fn inline_work_reads_as_the_model() {
    for seed in seeds(1..=6) {
        let deepest = run_case(seed, false, ops());
        assert!(
            deepest >= 2,
            "seed {seed}: the tree reached only L{deepest}"
        );
    }
}

#[test]
fn background_work_reads_as_the_model() {
    for seed in seeds(101..=106) {
        let deepest = run_case(seed, true, ops());
        assert!(
            deepest >= 2,
            "seed {seed}: the tree reached only L{deepest}"
        );
    }
}

/// A store written with long keys and reopened with a smaller
/// `max_key_bytes` still holds those keys in its tables: a scan lists
/// them, so a get must find them too, not answer "absent" from the option.
#[test]
fn keys_longer_than_a_later_max_key_bytes_are_still_found() {
    let dir = scratch_dir();
    let long = vec![b'k'; 100];
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(&long, b"v").unwrap();
    db.put(b"short", b"s").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let options = Options {
        max_key_bytes: 50,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let scanned: Vec<Vec<u8>> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(scanned, vec![long.clone(), b"short".to_vec()]);
    assert_eq!(db.get(&long).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.snapshot().get(&long).unwrap(), Some(b"v".to_vec()));
    // Puts of such keys are still refused, and deletes remove them
    // (before: refused, `InvalidKey { len: 100, max: 50 }`, so the store
    // could not drop a key it held), as long as a table could hold them.
    assert!(matches!(db.put(&long, b"w"), Err(Error::InvalidKey { .. })));
    db.delete(&long).unwrap();
    assert_eq!(db.get(&long).unwrap(), None);
    assert!(matches!(
        db.delete(&vec![b'k'; (64 << 10) + 1]),
        Err(Error::InvalidKey { max: 65536, .. })
    ));
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(&long).unwrap(), None, "the delete survives a reopen");
    assert_eq!(db.get(b"short").unwrap(), Some(b"s".to_vec()));
    db.close().unwrap();
}

/// The same store under smaller limits keeps working: the WAL replayed at
/// open and compactions rewrite the long keys and large values already
/// stored (refusing them failed the open, or stopped every write at the
/// first compaction that met them), while new writes obey the limits.
#[test]
fn a_store_reopened_under_smaller_limits_opens_compacts_and_writes() {
    let dir = scratch_dir();
    let long = vec![b'k'; 100];
    let big = vec![b'v'; 1000];
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(&long, &big).unwrap();
    db.flush().unwrap();
    db.put(&long[..90], &big).unwrap(); // left in the WAL
    db.close().unwrap();
    let options = Options {
        max_key_bytes: 50,
        max_value_bytes: 100,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    db.compact().unwrap();
    db.put(b"after", b"x").unwrap();
    assert!(matches!(db.put(&long, b"w"), Err(Error::InvalidKey { .. })));
    assert!(matches!(
        db.put(b"k", &big),
        Err(Error::ValueTooLarge { .. })
    ));
    assert_eq!(db.get(&long).unwrap(), Some(big.clone()));
    assert_eq!(db.get(&long[..90]).unwrap(), Some(big.clone()));
    assert_eq!(db.get(b"after").unwrap(), Some(b"x".to_vec()));
    db.close().unwrap();
}
