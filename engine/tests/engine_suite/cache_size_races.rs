//! Several readers racing the background work at block cache sizes from
//! none to more than the store, with and without `O_DIRECT` reads, under
//! `FilterPolicy::Optimized` (so settling rebalances filters, in place or
//! as copies, while readers hold the tables) and heavy deletes. One writer
//! writes rounds of every key in key order (a round's value names it);
//! a key is deleted in the rounds `deleted` says. Each reader checks:
//!
//! - a get returns the key's state of a round between the last round
//!   finished before it started and the one in progress after it ended;
//! - a held scan (read a pair at a time, with gets in between) and a
//!   snapshot's scan each show one moment of the writer: some round `r`
//!   written up to some key, round `r - 1` after it;
//! - a snapshot reads the same, by gets and by scans, every time.
//!
//! `concurrent_reads.rs` has one reader at one cache size without direct
//! reads; this reaches the cache's edges (every read a miss, a block
//! evicted while a reader holds it) with more than one reader.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm::{Db, DbIter, FilterKind, FilterPolicy, Options, Snapshot};
use common::{Rng, direct_reads_work, scratch_dir};

fn keys() -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for i in 0..30u8 {
        keys.push([&b"samefenc"[..], &[i % 4, i]].concat());
    }
    for len in 1..=8 {
        keys.push(vec![b'q'; len]);
    }
    for i in 0..6u8 {
        keys.push(vec![0xff; 7].into_iter().chain([i]).collect());
        keys.push(vec![0x00, i]);
    }
    // Enough keys a table for filters above the smallest one, so budgets
    // move and `Optimized` rebalances.
    for i in 0..240u32 {
        keys.push(format!("k{i:05}").into_bytes());
    }
    keys.sort();
    keys
}

/// Key `i` is deleted in round `r` when this holds (a third of writes),
/// else put.
fn deleted(i: usize, r: u64) -> bool {
    (r + i as u64).is_multiple_of(3)
}

fn value(i: usize, r: u64) -> Vec<u8> {
    let mut v = r.to_be_bytes().to_vec();
    v.resize(8 + (i * 37 + r as usize * 11) % 40, i as u8);
    v
}

/// Key `i`'s state after round `r` (round 0: never written).
fn state(i: usize, r: u64) -> Option<Vec<u8>> {
    (r > 0 && !deleted(i, r)).then(|| value(i, r))
}

/// Checks that `got` is key `i`'s state after some round in `lo..=hi`.
fn check_get(i: usize, got: &Option<Vec<u8>>, lo: u64, hi: u64, what: &str) {
    if let Some(v) = got {
        let r = u64::from_be_bytes(v[..8].try_into().unwrap());
        assert_eq!(v, &value(i, r), "{what}: key {i}: a value no write wrote");
    }
    assert!(
        (lo..=hi).any(|r| &state(i, r) == got),
        "{what}: key {i} read {:?}, but rounds {lo}..={hi} were live",
        got.as_ref()
            .map(|v| u64::from_be_bytes(v[..8].try_into().unwrap()))
    );
}

/// `seen` (every key's state, in key order) is one moment of the writer
/// between rounds `lo` and `hi` done: round `r` written for keys before
/// `p`, round `r - 1` from `p` on.
fn check_moment(seen: &[Option<Vec<u8>>], lo: u64, hi: u64, what: &str) {
    let n = seen.len();
    let ok = (lo.max(1)..=hi.max(1)).any(|r| {
        (0..=n).any(|p| {
            seen.iter()
                .enumerate()
                .all(|(i, s)| *s == state(i, if i < p { r } else { r - 1 }))
        })
    });
    // Runs of equal rounds (None: absent), so a failure fits a screen.
    let mut runs: Vec<(Option<u64>, usize)> = Vec::new();
    for s in seen {
        let r = s
            .as_ref()
            .map(|v| u64::from_be_bytes(v[..8].try_into().unwrap()));
        match runs.last_mut() {
            Some((last, n)) if *last == r => *n += 1,
            _ => runs.push((r, 1)),
        }
    }
    assert!(
        ok,
        "{what}: no moment of rounds {lo}..={hi} reads (round, keys): {runs:?}"
    );
}

/// The pairs of `it`, placed by key: every key's state.
fn states(keys: &[Vec<u8>], pairs: &[(Vec<u8>, Vec<u8>)], what: &str) -> Vec<Option<Vec<u8>>> {
    let mut at = pairs.iter().peekable();
    let out = keys
        .iter()
        .map(|k| match at.peek() {
            Some((pk, v)) if pk == k => {
                let v = v.clone();
                at.next();
                Some(v)
            }
            _ => None,
        })
        .collect();
    assert!(
        at.next().is_none(),
        "{what}: a key never written, or out of order"
    );
    out
}

fn drain(it: DbIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.unwrap()).collect()
}

struct Shared {
    db: Db,
    keys: Vec<Vec<u8>>,
    /// The last round whose writes all returned.
    done: AtomicU64,
}

/// One reader's `passes` passes of gets, a held scan with gets between
/// its steps, and snapshots read again later.
fn reader(s: &Shared, seed: u64, passes: u64) {
    let mut rng = Rng(seed);
    let n = s.keys.len();
    let mut snapshots: Vec<(Snapshot, Vec<Option<Vec<u8>>>)> = Vec::new();
    for pass in 0..passes {
        let lo = s.done.load(Ordering::SeqCst);
        for _ in 0..n {
            let i = rng.below(n as u64) as usize;
            let got = s.db.get(&s.keys[i]).unwrap();
            let hi = s.done.load(Ordering::SeqCst) + 1;
            check_get(i, &got, lo, hi, "get");
        }

        // A held scan: a pair at a time, a get between, so flushes,
        // compactions and rebuilds install while it is open.
        let lo = s.done.load(Ordering::SeqCst);
        let it = s.db.scan::<&[u8], _>(..).unwrap();
        let hi = s.done.load(Ordering::SeqCst) + 1;
        let mut pairs = Vec::new();
        for p in it {
            pairs.push(p.unwrap());
            let i = rng.below(n as u64) as usize;
            s.db.get(&s.keys[i]).unwrap();
        }
        check_moment(&states(&s.keys, &pairs, "held scan"), lo, hi, "held scan");

        // A bounded scan from a random key to another.
        let (a, b) = (rng.below(n as u64) as usize, rng.below(n as u64) as usize);
        let (a, b) = (a.min(b), a.max(b));
        let lo = s.done.load(Ordering::SeqCst);
        let got = drain(
            s.db.scan(s.keys[a].as_slice()..s.keys[b].as_slice())
                .unwrap(),
        );
        let hi = s.done.load(Ordering::SeqCst) + 1;
        let got = states(&s.keys[a..b], &got, "bounded scan");
        for (j, g) in got.iter().enumerate() {
            check_get(a + j, g, lo, hi, "bounded scan");
        }

        if pass % 3 == 0 {
            let lo = s.done.load(Ordering::SeqCst);
            let snap = s.db.snapshot();
            let hi = s.done.load(Ordering::SeqCst) + 1;
            let seen: Vec<Option<Vec<u8>>> = s.keys.iter().map(|k| snap.get(k).unwrap()).collect();
            check_moment(&seen, lo, hi, "snapshot");
            snapshots.push((snap, seen));
            if snapshots.len() > 3 {
                snapshots.remove(0);
            }
        }
        for (snap, seen) in &snapshots {
            let i = rng.below(n as u64) as usize;
            assert_eq!(
                &snap.get(&s.keys[i]).unwrap(),
                &seen[i],
                "snapshot {} key {i}",
                snap.sequence()
            );
            let scanned = drain(snap.scan::<&[u8], _>(..).unwrap());
            assert_eq!(
                states(&s.keys, &scanned, "snapshot scan"),
                *seen,
                "snapshot {} scan",
                snap.sequence()
            );
        }
    }
}

fn run(dir: PathBuf, cache_bytes: u64, direct: bool, rounds: u64, passes: u64) {
    let options = Options {
        memtable_bytes: 16 << 10,
        max_immutable_memtables: 1,
        target_file_bytes: 4 << 10,
        l1_bytes: 16 << 10,
        level_size_ratio: 2,
        l0_compaction_trigger: 2,
        block_size: 256,
        block_cache_bytes: cache_bytes,
        use_direct_reads: direct,
        filter_kind: FilterKind::Blocked,
        filter_policy: FilterPolicy::Optimized { bits_per_key: 6.0 },
        deletion_compaction_ratio: Some(0.3),
        ..Options::default()
    };
    let shared = Arc::new(Shared {
        db: Db::open(&dir, options).unwrap(),
        keys: keys(),
        done: AtomicU64::new(0),
    });
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for r in 1..=rounds {
                for (i, k) in shared.keys.iter().enumerate() {
                    match state(i, r) {
                        Some(v) => shared.db.put(k, &v).unwrap(),
                        None => shared.db.delete(k).unwrap(),
                    }
                }
                shared.done.store(r, Ordering::SeqCst);
                if r % 8 == 0 {
                    // Settles, which under `Optimized` rebalances filters
                    // that drifted from their level's budget.
                    shared.db.wait_for_background_work().unwrap();
                }
            }
        });
        // Filters rebuilt at other policies and back, in place or as
        // copies, while readers hold the tables.
        let rebuilder = scope.spawn(|| {
            let policies = [
                FilterPolicy::Uniform { bits_per_key: 2.0 },
                FilterPolicy::PerLevel(vec![0.0, 12.0, 3.0]),
                FilterPolicy::Optimized { bits_per_key: 6.0 },
            ];
            let mut n = 0;
            while shared.done.load(Ordering::SeqCst) < rounds && n < 30 {
                shared.db.rebuild_filters(policies[n % 3].clone()).unwrap();
                n += 1;
            }
            shared.db.rebuild_filters(policies[2].clone()).unwrap();
        });
        let readers: Vec<_> = (0..3)
            .map(|t| {
                let s = &shared;
                scope.spawn(move || reader(s, 7 + t, passes))
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        rebuilder.join().unwrap();
        writer.join().unwrap();
    });
    let last = shared.done.load(Ordering::SeqCst);
    for (i, k) in shared.keys.iter().enumerate() {
        check_get(i, &shared.db.get(k).unwrap(), last, last, "final get");
    }
    let stats = shared.db.stats();
    eprintln!(
        "cache {cache_bytes} direct {direct}: {} flushes, {} compactions, {} filters rebalanced, {} cache hits",
        stats.flushes, stats.compactions, stats.filters_rebalanced, stats.total.block_cache_hits
    );
    assert!(stats.compactions > 5, "{} compactions", stats.compactions);
}

/// A store directory where direct reads work, if there is one.
fn direct_dir() -> Option<tempfile::TempDir> {
    let candidates = [scratch_dir(), tempfile::tempdir().unwrap()];
    candidates.into_iter().find(|d| direct_reads_work(d.path()))
}

fn both(cache_bytes: u64) {
    let dir = scratch_dir();
    run(dir.path().to_path_buf(), cache_bytes, false, 200, 60);
    match direct_dir() {
        Some(dir) => run(dir.path().to_path_buf(), cache_bytes, true, 120, 40),
        None => println!("skipped direct reads: no directory serves O_DIRECT"),
    }
}

#[test]
fn readers_race_background_work_without_a_cache() {
    both(0);
}

#[test]
fn readers_race_background_work_with_a_one_byte_cache() {
    both(1);
}

#[test]
fn readers_race_background_work_with_a_cache_of_one_page() {
    both(4096);
}

#[test]
fn readers_race_background_work_with_a_cache_larger_than_the_store() {
    both(64 << 20);
}
