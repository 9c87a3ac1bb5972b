//! Batches are seen whole by concurrent readers: a writer thread rewrites
//! groups of keys, each batch one group (a put of the batch's number into
//! each key, or a delete where a fixed rule says), with the group's keys
//! far apart in key order (so in different tables, levels and memtables),
//! tiny memtables and tables, and the background threads flushing,
//! compacting, cleaning up and (under `Optimized`) rebalancing filters
//! while another thread calls `rebuild_filters` at other policies. Reader
//! threads take snapshots and read a group through them (gets and scans),
//! and scan without a snapshot: every read must show each group as one
//! whole batch (no key of a newer or older batch beside it), at least as
//! new as the last batch acknowledged before the read began, and a
//! snapshot read again later must answer the same.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bloomlsm::{Db, FilterKind, FilterPolicy, Options, WriteBatch};
use common::{Rng, scratch_dir};

const GROUPS: u64 = 12;
const GROUP_KEYS: u64 = 9;
const BATCHES: u64 = 3000;

/// Key `j` of group `g`: ordered by `j` first, so a group spans the keys.
fn key(g: u64, j: u64) -> Vec<u8> {
    format!("{j:04}-{g:03}").into_bytes()
}

/// Whether batch `n` deletes key `j` of its group (never in batch 0).
fn deletes(n: u64, j: u64) -> bool {
    n > 0 && (n + j).is_multiple_of(4)
}

fn value(n: u64, j: u64) -> Vec<u8> {
    let mut v = format!("b{n}-").into_bytes();
    v.resize(v.len() + (j * 7 % 23) as usize, b'.');
    v
}

fn batch_number(v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).unwrap();
    s[1..s.find('-').unwrap()].parse().unwrap()
}

/// The batch a group's answers (`answers[j]` for key `j`) come from; panics
/// unless they are exactly one batch's.
fn whole_batch(g: u64, answers: &[Option<Vec<u8>>], what: &str) -> u64 {
    let n = answers
        .iter()
        .flatten()
        .map(|v| batch_number(v))
        .next()
        .unwrap_or_else(|| panic!("{what}: group {g} has no key at all"));
    for (j, got) in answers.iter().enumerate() {
        let j = j as u64;
        let want = (!deletes(n, j)).then(|| value(n, j));
        assert!(
            *got == want,
            "{what}: group {g} key {j} is {:?}, but batch {n} wrote {:?}; the group: {:?}",
            got.as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned()),
            want.map(|v| String::from_utf8_lossy(&v).into_owned()),
            answers
                .iter()
                .map(|a| a.as_ref().map(|v| String::from_utf8_lossy(v).into_owned()))
                .collect::<Vec<_>>()
        );
    }
    n
}

/// Each group's answers from one scan of everything.
fn groups_of_scan(pairs: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Vec<Vec<Option<Vec<u8>>>> {
    let mut groups = vec![vec![None; GROUP_KEYS as usize]; GROUPS as usize];
    for (k, v) in pairs {
        let s = std::str::from_utf8(&k).unwrap();
        let j: usize = s[..4].parse().unwrap();
        let g: usize = s[5..].parse().unwrap();
        groups[g][j] = Some(v);
    }
    groups
}

fn options(seed: u64) -> Options {
    let mut rng = Rng(seed);
    Options {
        filter_policy: FilterPolicy::Optimized {
            bits_per_key: 4.0 + rng.below(8) as f64,
        },
        filter_kind: *rng.pick(&[
            FilterKind::Blocked,
            FilterKind::Standard,
            FilterKind::Ribbon,
        ]),
        memtable_bytes: 400 + rng.below(800) as usize,
        max_immutable_memtables: 1 + rng.below(2) as usize,
        target_file_bytes: 300,
        l1_bytes: 600,
        block_size: 64,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        dynamic_level_bytes: rng.below(2) == 0,
        deletion_compaction_ratio: (rng.below(2) == 0).then_some(0.25),
        background_work: true,
        ..Options::default()
    }
}

fn run(seed: u64) {
    let dir = scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options(seed)).unwrap());
    // Batch 0 of every group, then numbered batches from 1.
    for g in 0..GROUPS {
        let mut b = WriteBatch::new();
        for j in 0..GROUP_KEYS {
            b.put(&key(g, j), &value(0, j));
        }
        db.write(b).unwrap();
    }
    // The last batch acknowledged, per group.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..GROUPS).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (db, acked, done) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&done));
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ 1);
            for n in 1..=BATCHES {
                let g = rng.below(GROUPS);
                let mut b = WriteBatch::new();
                for j in 0..GROUP_KEYS {
                    if deletes(n, j) {
                        b.delete(&key(g, j));
                    } else {
                        b.put(&key(g, j), &value(n, j));
                    }
                }
                db.write(b).unwrap();
                acked[g as usize].store(n, Ordering::SeqCst);
            }
            done.store(true, Ordering::SeqCst);
        }));
    }
    {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ 2);
            while !done.load(Ordering::SeqCst) {
                let policy = match rng.below(3) {
                    0 => FilterPolicy::Uniform {
                        bits_per_key: rng.below(14) as f64,
                    },
                    1 => FilterPolicy::PerLevel(vec![10.0, 1.0, 0.0, 6.0]),
                    _ => FilterPolicy::Optimized {
                        bits_per_key: 1.0 + rng.below(12) as f64,
                    },
                };
                db.rebuild_filters(policy).unwrap();
                std::thread::yield_now();
            }
        }));
    }
    for r in 0..2u64 {
        let (db, acked, done) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&done));
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ (10 + r));
            let mut held = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let g = rng.below(GROUPS);
                let floor: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
                match rng.below(3) {
                    0 => {
                        // A snapshot: gets of one group, kept to read again.
                        let s = db.snapshot();
                        let answers: Vec<_> = (0..GROUP_KEYS)
                            .map(|j| s.get(&key(g, j)).unwrap())
                            .collect();
                        let n = whole_batch(g, &answers, "snapshot gets");
                        assert!(
                            n >= floor[g as usize],
                            "snapshot older than batch {}",
                            floor[g as usize]
                        );
                        held.push((s, g, answers));
                    }
                    1 => {
                        // A scan of everything, without a snapshot.
                        let pairs = db.scan::<&[u8], _>(..).unwrap().map(|r| r.unwrap());
                        for (g, answers) in groups_of_scan(pairs).iter().enumerate() {
                            let n = whole_batch(g as u64, answers, "scan");
                            assert!(n >= floor[g], "scan older than batch {}", floor[g]);
                        }
                    }
                    _ => {
                        // A held snapshot read again: the same answers, by
                        // gets and by its scan.
                        if held.is_empty() {
                            continue;
                        }
                        let i = rng.below(held.len() as u64) as usize;
                        let (s, g, answers) = &held[i];
                        let again: Vec<_> = (0..GROUP_KEYS)
                            .map(|j| s.get(&key(*g, j)).unwrap())
                            .collect();
                        assert!(again == *answers, "a snapshot answered differently later");
                        let pairs = s.scan::<&[u8], _>(..).unwrap().map(|r| r.unwrap());
                        let scanned = groups_of_scan(pairs);
                        assert!(
                            scanned[*g as usize] == *answers,
                            "a snapshot's scan disagrees with its gets"
                        );
                        for (g, answers) in scanned.iter().enumerate() {
                            whole_batch(g as u64, answers, "snapshot scan");
                        }
                        if rng.below(2) == 0 {
                            held.swap_remove(i);
                        }
                    }
                }
                if held.len() > 8 {
                    held.remove(0);
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    db.wait_for_background_work().unwrap();
    let check = |db: &Db, what: &str| {
        let scanned = groups_of_scan(db.scan::<&[u8], _>(..).unwrap().map(|r| r.unwrap()));
        for g in 0..GROUPS {
            let n = whole_batch(g, &scanned[g as usize], what);
            assert_eq!(
                n,
                acked[g as usize].load(Ordering::SeqCst),
                "{what}: group {g}"
            );
            let answers: Vec<_> = (0..GROUP_KEYS)
                .map(|j| db.get(&key(g, j)).unwrap())
                .collect();
            assert!(
                answers == scanned[g as usize],
                "{what}: gets and scan disagree"
            );
        }
    };
    check(&db, "settled");
    Arc::into_inner(db).unwrap().close().unwrap();
    let db = Db::open(dir.path(), options(seed)).unwrap();
    check(&db, "reopened");
}

#[test]
fn batches_are_seen_whole() {
    for seed in 1..=2 {
        run(seed);
    }
}
