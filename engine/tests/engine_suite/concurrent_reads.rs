//! Reads racing the background threads: while one thread writes rounds of
//! every key (each round's value names the round; a key is deleted in
//! the rounds a fixed rule says) with tiny memtables and tables, so
//! flushes, compactions and trivial moves install new versions all the
//! time, and another thread rebuilds every filter at other policies (or,
//! under `Optimized`, settles the background work over and over), readers
//! check that
//!
//! - a get returns the key's state of a round between the last round
//!   finished before the get started and the one in progress after it
//!   ended (never an older version, never a deleted key brought back,
//!   never a key missed);
//! - a snapshot, read again later, gives the same answers, and its scan
//!   agrees with its gets;
//! - a scan without a snapshot gives each key a state of a round in the
//!   same window, in order, each key once.
//!
//! Keys share eight-byte fences (and prefixes of each other), so the level
//! search compares whole keys at every table boundary.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};
use common::scratch_dir;

fn keys() -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for i in 0..24u8 {
        keys.push([&b"samefenc"[..], &[i % 3, i]].concat());
    }
    for len in 1..=10 {
        keys.push(vec![b'q'; len]);
    }
    for i in 0..6u8 {
        keys.push(vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, i]);
        keys.push(vec![0x00, i]);
    }
    keys.sort();
    keys
}

/// Key `i` is deleted in round `r` when this holds, else put.
fn deleted(i: usize, r: u64) -> bool {
    (r + i as u64).is_multiple_of(5)
}

fn value(i: usize, r: u64) -> Vec<u8> {
    let mut v = r.to_be_bytes().to_vec();
    // Some values span a 64-byte block or more.
    v.resize(8 + (i * 37 + r as usize * 11) % 150, i as u8);
    v
}

fn round_of(i: usize, v: &[u8]) -> u64 {
    let r = u64::from_be_bytes(v[..8].try_into().unwrap());
    assert_eq!(v, value(i, r).as_slice(), "key {i}: a value no write wrote");
    r
}

/// Checks that `got` is key `i`'s state after some round in `lo..=hi`
/// (round 0: never written).
fn check(i: usize, got: &Option<Vec<u8>>, lo: u64, hi: u64, what: &str) {
    let ok = (lo..=hi).any(|r| {
        let want_none = r == 0 || deleted(i, r);
        match got {
            None => want_none,
            Some(v) => !want_none && round_of(i, v) == r,
        }
    });
    let seen = got.as_ref().map(|v| round_of(i, v));
    assert!(
        ok,
        "{what}: key {i} read {seen:?} (None: absent), but rounds {lo}..={hi} were live"
    );
}

/// The rounds of reads a run makes beside the writes, at least.
const MIN_READS: u64 = 11;

/// `rebuilds`: another thread rebuilds every filter at other policies
/// (which takes the store off `Optimized`); otherwise it settles the
/// background work over and over, which under `Optimized` rebuilds the
/// filters that drifted from their level's budget.
fn run(options: Options, rounds: u64, rebuilds: bool) {
    assert!(rounds >= MIN_READS, "{rounds} rounds");
    let dir = scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let keys = Arc::new(keys());
    // The last round whose writes all returned.
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    // One message per round of reads. The writer takes one at each of
    // MIN_READS rounds spread over its run, so at least MIN_READS rounds of
    // reads ran beside the writes whatever the scheduler does (left to it,
    // a reader that got little CPU could count too few); a reader gone
    // (panicked) lets it go on.
    let (read_tx, read_rx) = std::sync::mpsc::channel::<()>();
    let writer = {
        let (db, keys, done) = (Arc::clone(&db), Arc::clone(&keys), Arc::clone(&done));
        std::thread::spawn(move || {
            for r in 1..=rounds {
                if r.is_multiple_of(rounds / MIN_READS) && r / (rounds / MIN_READS) <= MIN_READS {
                    let _ = read_rx.recv();
                }
                for (i, k) in keys.iter().enumerate() {
                    if deleted(i, r) {
                        db.delete(k).unwrap();
                    } else {
                        db.put(k, &value(i, r)).unwrap();
                    }
                }
                done.store(r, Ordering::SeqCst);
            }
        })
    };
    let rebuilder = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let policies = [
                FilterPolicy::Uniform { bits_per_key: 1.0 },
                FilterPolicy::Optimized { bits_per_key: 4.0 },
                FilterPolicy::PerLevel(vec![0.0, 2.0, 9.0, 0.5]),
                FilterPolicy::Uniform { bits_per_key: 0.0 },
            ];
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                if rebuilds {
                    db.rebuild_filters(policies[n % policies.len()].clone())
                        .unwrap();
                } else {
                    db.wait_for_background_work().unwrap();
                }
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };

    let mut snapshots = Vec::new();
    let mut reads = 0u64;
    while !writer.is_finished() {
        let lo = done.load(Ordering::SeqCst);
        let got: Vec<Option<Vec<u8>>> = keys.iter().map(|k| db.get(k).unwrap()).collect();
        let hi = done.load(Ordering::SeqCst) + 1;
        for (i, g) in got.iter().enumerate() {
            check(i, g, lo, hi, "get");
        }
        reads += 1;
        let _ = read_tx.send(());

        let lo = done.load(Ordering::SeqCst);
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let hi = done.load(Ordering::SeqCst) + 1;
        let mut at = scanned.iter().peekable();
        for (i, k) in keys.iter().enumerate() {
            let got = match at.peek() {
                Some((sk, v)) if sk == k => {
                    let v = v.clone();
                    at.next();
                    Some(v)
                }
                _ => None,
            };
            check(i, &got, lo, hi, "scan");
        }
        assert!(
            at.next().is_none(),
            "scan gave a key never written or out of order"
        );

        if reads.is_multiple_of(4) {
            let s = db.snapshot();
            let seen: Vec<Option<Vec<u8>>> = keys.iter().map(|k| s.get(k).unwrap()).collect();
            snapshots.push((s, seen));
            if snapshots.len() > 3 {
                snapshots.remove(0);
            }
        }
        for (s, seen) in &snapshots {
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(
                    &s.get(k).unwrap(),
                    &seen[i],
                    "snapshot {} key {i}",
                    s.sequence()
                );
            }
            let scanned: Vec<(Vec<u8>, Vec<u8>)> = s
                .scan::<&[u8], _>(..)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .zip(seen)
                .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                .collect();
            assert_eq!(scanned, want, "snapshot {} scan", s.sequence());
        }
    }
    writer.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    rebuilder.join().unwrap();
    let r = done.load(Ordering::SeqCst);
    for (i, k) in keys.iter().enumerate() {
        check(i, &db.get(k).unwrap(), r, r, "final get");
    }
    let stats = db.stats();
    eprintln!(
        "{reads} rounds of reads; {} flushes, {} compactions, {} trivial moves, {} filters rebalanced, tables {:?}",
        stats.flushes,
        stats.compactions,
        stats.trivial_moves,
        stats.filters_rebalanced,
        stats.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
    );
    assert!(reads >= MIN_READS, "only {reads} rounds of reads");
    assert!(stats.compactions > 10, "{} compactions", stats.compactions);
    drop(snapshots);
    Arc::try_unwrap(db).unwrap().close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for (i, k) in keys.iter().enumerate() {
        check(i, &db.get(k).unwrap(), r, r, "get after reopen");
    }
}

fn options(kind: FilterKind, block_size: usize) -> Options {
    Options {
        memtable_bytes: 4096,
        max_immutable_memtables: 1,
        target_file_bytes: 1024,
        l1_bytes: 4096,
        level_size_ratio: 2,
        l0_compaction_trigger: 2,
        block_size,
        block_cache_bytes: 8 << 10,
        filter_kind: kind,
        filter_policy: FilterPolicy::Optimized { bits_per_key: 6.0 },
        ..Options::default()
    }
}

#[test]
fn reads_racing_flushes_compactions_and_rebuilds_never_go_back() {
    let scale: u64 = std::env::var("BLOOMLSM_RACE_SCALE").map_or(1, |s| s.parse().unwrap());
    run(options(FilterKind::Blocked, 64), 400 * scale, true);
    run(options(FilterKind::Ribbon, 128), 300 * scale, false);
    run(options(FilterKind::Standard, 64), 300 * scale, false);
}
