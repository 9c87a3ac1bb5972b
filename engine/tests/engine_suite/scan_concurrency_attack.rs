//! Attack on range scans while the tree changes under them, on many
//! threads at once: one writer (puts, deletes, batches that write a key
//! more than once, a drifting hot window so keys are overwritten and
//! deleted again and again), two readers and a maintenance thread
//! (`rebuild_filters` at Uniform, PerLevel and Optimized policies, and
//! flushes) run against a deep store of narrow tables with background
//! (for a quarter of the phases: inline) flushes and compactions (and, for some seeds, deletion-triggered
//! compactions and one table file open at a time). Keys are prefixes of
//! each other, share their first eight bytes (the level fences' ties) and
//! end in 0x00 or 0xFF runs. Between phases the store is closed and
//! reopened with other table sizes and policies, and the next phase's
//! bounds include every table's smallest and largest key and their
//! neighbours.
//!
//! Invariants checked, each against a history of every version with the
//! sequence of the batch that wrote it:
//!
//! - a `Snapshot::scan`, fresh or from a snapshot held across many later
//!   writes, compactions and rebuilds, yields exactly the history as of
//!   the snapshot's sequence within its bounds (every `RangeBounds` form,
//!   empty and inverted ranges, bounds on written, deleted, absent and
//!   fence keys);
//! - a `Db::scan` yields exactly the history as of ONE sequence between
//!   the last sequence read before it was created and the one read after
//!   (never half a batch, never keys from two different moments);
//! - a get through a held snapshot agrees with the same history;
//! - an iterator held open and read a few pairs at a time while the other
//!   threads work (its snapshot sometimes released right after creating
//!   it) yields the same, and one dropped mid-way yielded a prefix of it.
//!
//! Never a full `compact()`; `wait_for_background_work` is not called.
//! `BLOOMLSM_SCAN_ATTACK_SEEDS` sets the number of seeds (default 12),
//! `BLOOMLSM_SCAN_ATTACK_FIRST` the first, `BLOOMLSM_SCAN_ATTACK_WRITES`
//! the writer's operations per phase (default 1500).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use bloomlsm::{Db, DbIter, FilterKind, FilterPolicy, Options, Snapshot, WriteBatch};
use common::live_tables::live_tables;
use common::{Rng, scratch_dir};

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);
/// A key's versions: `(sequence, value or None for a delete)`, oldest first.
type Versions = Vec<(u64, Option<Vec<u8>>)>;

/// Every version ever written: per key, `(sequence of the end of its
/// batch, value or None for a delete)`, in write order. A reader at a
/// sequence `s` that ends a batch sees the last version with sequence
/// `<= s` (a later write of the same key in one batch comes later here).
#[derive(Default)]
struct History {
    versions: BTreeMap<Vec<u8>, Versions>,
}

fn below_end(key: &[u8], end: &Bound<Vec<u8>>) -> bool {
    match end {
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
        Bound::Unbounded => true,
    }
}

impl History {
    /// The versions of keys in `range` (an inverted range: none).
    fn in_range<'a>(
        &'a self,
        range: &'a Range,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Versions)> + 'a {
        // `BTreeMap::range` panics on inverted ranges: bound the start
        // only, and stop at the end by hand.
        self.versions
            .range::<Vec<u8>, _>((range.0.clone(), Bound::Unbounded))
            .take_while(move |(k, _)| below_end(k, &range.1))
    }

    /// What a reader at `seq` sees in `range`.
    fn at(&self, seq: u64, range: &Range) -> Pairs {
        self.in_range(range)
            .filter_map(|(k, vs)| {
                let n = vs.partition_point(|(s, _)| *s <= seq);
                let (_, v) = vs[..n].last()?;
                v.as_ref().map(|v| (k.clone(), v.clone()))
            })
            .collect()
    }

    /// The sequences in `lo..=hi` at which what `range` shows can differ:
    /// `lo` and every batch end in `(lo, hi]` that wrote a key in it.
    fn moments(&self, range: &Range, lo: u64, hi: u64) -> Vec<u64> {
        let mut m: Vec<u64> = self
            .in_range(range)
            .flat_map(|(_, vs)| vs.iter().map(|(s, _)| *s))
            .filter(|s| *s > lo && *s <= hi)
            .collect();
        m.push(lo);
        m.sort_unstable();
        m.dedup();
        m
    }
}

/// Keys in groups of eight sharing their first eight bytes ("g0000012"),
/// each group: the bare prefix, then with "\0", "\0\0", "a", "a\xff\xff",
/// "\xff", twenty "\xff" and a long tail (every third group also two keys
/// longer than a block); plus single bytes 0x00, 0x01 and runs of 0xFF at
/// the very ends of the key space.
fn universe(groups: u64) -> Vec<Vec<u8>> {
    let mut keys = vec![vec![0u8], vec![1u8], vec![0xff], vec![0xff; 3]];
    for g in 0..groups {
        let p = format!("g{g:07}").into_bytes();
        let tails: [&[u8]; 8] = [
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"a\xff\xff",
            b"\xff",
            &[0xff; 20],
            b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        ];
        for t in tails {
            keys.push([p.as_slice(), t].concat());
        }
        if g % 3 == 0 {
            // Keys longer than a block: a block, and an index entry, each.
            keys.push([p.as_slice(), &[b'm'; 300]].concat());
            keys.push([p.as_slice(), b"a", &[0; 150]].concat());
        }
    }
    keys.sort();
    keys
}

/// A bound near the keys the store holds: a written key, one beside it
/// (with a 0x00 added, its last byte dropped, the empty key, cut anywhere
/// and a byte added), a table's smallest or largest key from the last
/// reopen, or none.
fn bound(rng: &mut Rng, keys: &[Vec<u8>], fences: &[Vec<u8>]) -> Bound<Vec<u8>> {
    let mut k = if !fences.is_empty() && rng.below(3) == 0 {
        rng.pick(fences).clone()
    } else {
        rng.pick(keys).clone()
    };
    match rng.below(6) {
        0 => k.push(0),
        // Down to the empty key (no key is empty: a bound may be).
        1 => {
            k.pop();
        }
        // Anywhere between keys (where index separators fall): cut, then
        // one byte.
        2 => {
            k.truncate(rng.below(k.len() as u64 + 1) as usize);
            k.push(*rng.pick(&[0, b'a', b'n', 0xfe, 0xff]));
        }
        _ => {}
    }
    match rng.below(7) {
        0 => Bound::Unbounded,
        1..=3 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn range(rng: &mut Rng, keys: &[Vec<u8>], fences: &[Vec<u8>]) -> Range {
    let lo = bound(rng, keys, fences);
    // Often an end near the start: short, empty and inverted ranges.
    let hi = match (&lo, rng.below(3)) {
        (Bound::Included(k) | Bound::Excluded(k), 0) => {
            let i = keys.partition_point(|x| x < k);
            let j = (i + rng.below(12) as usize).saturating_sub(3);
            let e = keys[j.min(keys.len() - 1)].clone();
            if rng.below(2) == 0 {
                Bound::Included(e)
            } else {
                Bound::Excluded(e)
            }
        }
        _ => bound(rng, keys, fences),
    };
    (lo, hi)
}

fn show(r: &Range) -> String {
    let b = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(k) => format!("Included({:?})", String::from_utf8_lossy(k)),
        Bound::Excluded(k) => format!("Excluded({:?})", String::from_utf8_lossy(k)),
        Bound::Unbounded => "Unbounded".into(),
    };
    format!("{}..{}", b(&r.0), b(&r.1))
}

fn scan_db(db: &Db, r: &Range) -> DbIter {
    db.scan::<Vec<u8>, _>(r.clone()).unwrap()
}

fn scan_snap(s: &Snapshot, r: &Range) -> DbIter {
    s.scan::<Vec<u8>, _>(r.clone()).unwrap()
}

/// Where a scan's answer must come from: one sequence, or one of the
/// sequences in `lo..=hi` (a scan without a snapshot).
#[derive(Clone, Copy, Debug)]
enum At {
    Seq(u64),
    Window(u64, u64),
}

/// Checks that `got` (all of a scan when `complete`, else what was read
/// before it was dropped) is what a reader at `at` sees in `range`.
fn check(hist: &Mutex<History>, at: At, range: &Range, got: &Pairs, complete: bool, what: &str) {
    let hist = hist.lock().unwrap();
    let (lo, hi) = match at {
        At::Seq(s) => (s, s),
        At::Window(lo, hi) => (lo, hi),
    };
    let moments = hist.moments(range, lo, hi);
    let fits = |want: &Pairs| {
        if complete {
            want == got
        } else {
            want.len() >= got.len() && want[..got.len()] == got[..]
        }
    };
    if moments.iter().any(|&s| fits(&hist.at(s, range))) {
        return;
    }
    let want = hist.at(lo, range);
    let first_diff = want
        .iter()
        .zip(got.iter())
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let sh = |p: Option<&(Vec<u8>, Vec<u8>)>| {
        p.map(|(k, v)| {
            (
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
    };
    panic!(
        "{what}: scan {} at {at:?} (complete: {complete}) matches no moment {moments:?}; \
         got {} pairs, at {lo} want {}; first difference at {first_diff}: got {:?}, want {:?}",
        show(range),
        got.len(),
        want.len(),
        sh(got.get(first_diff)),
        sh(want.get(first_diff)),
    );
}

/// An iterator held open by a reader, read a few pairs at a time.
struct Held {
    it: DbIter,
    at: At,
    range: Range,
    got: Pairs,
    /// Kept alive with the iterator, or released right after creating it.
    _snapshot: Option<Snapshot>,
}

fn options(rng: &mut Rng) -> Options {
    let trigger = 2 + rng.below(2) as usize;
    Options {
        filter_policy: policy(rng),
        filter_kind: *rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]),
        block_size: *rng.pick(&[64, 128, 256]),
        memtable_bytes: *rng.pick(&[512, 1024, 2048]),
        max_immutable_memtables: 1 + rng.below(3) as usize,
        block_cache_bytes: *rng.pick(&[0, 4096, 1 << 20]),
        l0_compaction_trigger: trigger,
        l0_slowdown_trigger: trigger + 3,
        l0_stop_trigger: trigger + 8,
        l1_bytes: *rng.pick(&[1024, 2048, 4096]),
        level_size_ratio: 2 + rng.below(3),
        dynamic_level_bytes: rng.below(2) == 0,
        num_levels: 5 + rng.below(3) as usize,
        target_file_bytes: *rng.pick(&[256, 512, 1024, 2048]),
        max_open_files: (rng.below(3) == 0).then(|| 1 + rng.below(3) as usize),
        deletion_compaction_ratio: (rng.below(2) == 0).then_some(0.3),
        // Mostly on background threads; else inline in the writer's
        // writes (while readers and the maintenance thread run).
        background_work: rng.below(4) != 0,
        ..Options::default()
    }
}

fn policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(4) {
        0 => FilterPolicy::Uniform {
            bits_per_key: *rng.pick(&[0.0, 4.0, 10.0]),
        },
        1 => FilterPolicy::PerLevel(vec![10.0, 6.0, 2.0, 0.0]),
        _ => FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&[3.0, 6.0, 10.0]),
        },
    }
}

/// The writer: `ops` operations, each applied and recorded under the
/// history's lock (so a reader that locks it after reading a sequence
/// finds every write at or below it). Every `every` operations it asks
/// the maintenance thread for work.
fn writer(
    db: &Db,
    hist: &Mutex<History>,
    keys: &[Vec<u8>],
    seed: u64,
    ops: u64,
    kick: &mpsc::Sender<()>,
) {
    let mut rng = Rng(seed);
    let mut window = rng.below(keys.len() as u64);
    for op in 0..ops {
        if rng.below(8) == 0 {
            window = (window + 1 + rng.below(20)) % keys.len() as u64;
        }
        let pick = |rng: &mut Rng| {
            if rng.below(5) == 0 {
                rng.below(keys.len() as u64) as usize
            } else {
                ((window + rng.below(48)) % keys.len() as u64) as usize
            }
        };
        let n = if rng.below(6) == 0 {
            2 + rng.below(5)
        } else {
            1
        };
        let mut batch = WriteBatch::new();
        let mut writes = Vec::new();
        for _ in 0..n {
            let k = keys[pick(&mut rng)].clone();
            if rng.below(5) < 2 {
                batch.delete(&k);
                writes.push((k, None));
            } else {
                let mut v = format!("v{op}.{}", writes.len()).into_bytes();
                v.resize(v.len() + rng.below(40) as usize, b'.');
                batch.put(&k, &v);
                writes.push((k, Some(v)));
            }
        }
        {
            let mut h = hist.lock().unwrap();
            db.write(batch).unwrap();
            let end = db.last_sequence();
            for (k, v) in writes {
                h.versions.entry(k).or_default().push((end, v));
            }
        }
        if op % 64 == 63 {
            let _ = kick.send(());
        }
    }
}

/// The maintenance thread: at each kick, a `rebuild_filters` at some
/// policy or a flush, while the writer goes on.
fn maintenance(db: &Db, seed: u64, kicks: mpsc::Receiver<()>) -> u64 {
    let mut rng = Rng(seed);
    let mut rebuilds = 0;
    while kicks.recv().is_ok() {
        // Skip kicks queued while the last task ran.
        while kicks.try_recv().is_ok() {}
        if rng.below(3) == 0 {
            db.flush().unwrap();
        } else {
            db.rebuild_filters(policy(&mut rng)).unwrap();
            rebuilds += 1;
        }
    }
    rebuilds
}

/// A reader: until `done`, scans through fresh and held snapshots and
/// without one, and iterators held open across many of its steps.
/// Returns the scans it checked.
fn reader(
    db: &Db,
    hist: &Mutex<History>,
    keys: &[Vec<u8>],
    fences: &[Vec<u8>],
    seed: u64,
    done: &AtomicBool,
) -> u64 {
    let mut rng = Rng(seed);
    let mut snaps: Vec<Snapshot> = Vec::new();
    let mut held: Vec<Held> = Vec::new();
    let mut checked = 0;
    let what = format!("reader {seed}");
    while !done.load(Ordering::Acquire) {
        let r = range(&mut rng, keys, fences);
        match rng.below(12) {
            0..=1 => {
                let s = db.snapshot();
                let got: Pairs = scan_snap(&s, &r).map(|p| p.unwrap()).collect();
                check(hist, At::Seq(s.sequence()), &r, &got, true, &what);
                if snaps.len() < 4 {
                    snaps.push(s);
                }
            }
            2..=3 if !snaps.is_empty() => {
                // An old snapshot, after everything that ran since.
                let s = &snaps[rng.below(snaps.len() as u64) as usize];
                let got: Pairs = scan_snap(s, &r).map(|p| p.unwrap()).collect();
                check(hist, At::Seq(s.sequence()), &r, &got, true, &what);
                // Its gets agree with its scans (the filters rebuilt
                // under it included).
                for _ in 0..4 {
                    let k = rng.pick(keys);
                    let got = s.get(k).unwrap();
                    let one = (Bound::Included(k.clone()), Bound::Included(k.clone()));
                    let want = hist.lock().unwrap().at(s.sequence(), &one);
                    assert_eq!(
                        got,
                        want.into_iter().next().map(|(_, v)| v),
                        "{what}: get {:?} at {}",
                        String::from_utf8_lossy(k),
                        s.sequence()
                    );
                }
            }
            4..=5 => {
                let lo = db.last_sequence();
                let it = scan_db(db, &r);
                let hi = db.last_sequence();
                let got: Pairs = it.map(|p| p.unwrap()).collect();
                check(hist, At::Window(lo, hi), &r, &got, true, &what);
            }
            6..=7 if held.len() < 6 => {
                let h = match rng.below(3) {
                    0 => {
                        let lo = db.last_sequence();
                        let it = scan_db(db, &r);
                        let hi = db.last_sequence();
                        Held {
                            it,
                            at: At::Window(lo, hi),
                            range: r,
                            got: Vec::new(),
                            _snapshot: None,
                        }
                    }
                    n => {
                        let s = if n == 1 && !snaps.is_empty() {
                            // Through a held snapshot: its old sequence.
                            snaps.swap_remove(rng.below(snaps.len() as u64) as usize)
                        } else {
                            db.snapshot()
                        };
                        let it = scan_snap(&s, &r);
                        Held {
                            it,
                            at: At::Seq(s.sequence()),
                            range: r,
                            got: Vec::new(),
                            // Half the time released at once: the
                            // iterator alone must keep what it reads.
                            _snapshot: (rng.below(2) == 0).then_some(s),
                        }
                    }
                };
                held.push(h);
            }
            8..=10 if !held.is_empty() => {
                let i = rng.below(held.len() as u64) as usize;
                let h = &mut held[i];
                let mut ended = false;
                for _ in 0..1 + rng.below(12) {
                    match h.it.next() {
                        Some(p) => h.got.push(p.unwrap()),
                        None => {
                            ended = true;
                            break;
                        }
                    }
                }
                // Ended, or dropped mid-way now and then.
                if ended || rng.below(8) == 0 {
                    let h = held.swap_remove(i);
                    check(hist, h.at, &h.range, &h.got, ended, &what);
                    checked += 1;
                }
            }
            11 if !snaps.is_empty() => {
                snaps.swap_remove(rng.below(snaps.len() as u64) as usize);
            }
            _ => continue,
        }
        checked += 1;
    }
    for h in held {
        check(hist, h.at, &h.range, &h.got, false, &what);
    }
    checked
}

/// The table fences of the closed store in `dir`: every table's smallest
/// and largest key.
fn fences_of(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let mut f: Vec<Vec<u8>> = live_tables(dir)
        .into_iter()
        .flat_map(|t| [t.smallest, t.largest])
        .collect();
    f.sort();
    f.dedup();
    f
}

fn run(seed: u64, phases: u64, ops: u64) {
    let mut rng = Rng(seed);
    let keys = universe(24 + rng.below(24));
    let dir = scratch_dir();
    let hist = Mutex::new(History::default());
    let mut fences: Vec<Vec<u8>> = Vec::new();
    let mut options = options(&mut rng);
    for phase in 0..phases {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let what = format!("seed {seed} phase {phase}");
        let last = hist
            .lock()
            .unwrap()
            .versions
            .values()
            .flat_map(|v| v.iter().map(|(s, _)| *s))
            .max()
            .unwrap_or(0);
        assert_eq!(db.last_sequence(), last, "{what}: sequence after reopen");
        // After the reopen: everything, and ranges on the fences.
        for i in 0..40 {
            let r = if i == 0 {
                (Bound::Unbounded, Bound::Unbounded)
            } else {
                range(&mut rng, &keys, &fences)
            };
            let got: Pairs = scan_db(&db, &r).map(|p| p.unwrap()).collect();
            check(&hist, At::Seq(last), &r, &got, true, &what);
        }
        let done = AtomicBool::new(false);
        let (kick, kicks) = mpsc::channel();
        let (wseed, mseed, r1, r2) = (rng.next(), rng.next(), rng.next(), rng.next());
        let (rebuilds, scans) = std::thread::scope(|s| {
            let m = s.spawn(|| maintenance(&db, mseed, kicks));
            let readers: Vec<_> = [r1, r2]
                .into_iter()
                .map(|rs| {
                    let (db, hist, keys, fences, done) = (&db, &hist, &keys, &fences, &done);
                    s.spawn(move || reader(db, hist, keys, fences, rs, done))
                })
                .collect();
            writer(&db, &hist, &keys, wseed, ops, &kick);
            drop(kick);
            let rebuilds = m.join().unwrap();
            done.store(true, Ordering::Release);
            let scans: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
            (rebuilds, scans)
        });
        let stats = db.stats();
        eprintln!(
            "{what}: {scans} scans checked, {rebuilds} rebuilds, {} flushes, {} compactions, \
             levels {:?}",
            stats.flushes,
            stats.compactions,
            stats.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
        );
        db.close().unwrap();
        fences = fences_of(dir.path());
        // The next phase: other table sizes and policies over the same tree.
        let next = self::options(&mut rng);
        options = Options {
            num_levels: options.num_levels.max(next.num_levels),
            ..next
        };
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn scans_agree_with_the_history_while_the_tree_changes() {
    let first = env("BLOOMLSM_SCAN_ATTACK_FIRST", 0);
    let seeds = env("BLOOMLSM_SCAN_ATTACK_SEEDS", 12);
    let ops = env("BLOOMLSM_SCAN_ATTACK_WRITES", 1500);
    for seed in first..first + seeds {
        run(seed, 3, ops);
    }
}
