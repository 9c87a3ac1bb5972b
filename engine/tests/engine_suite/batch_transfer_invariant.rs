//! Batches that move amounts between accounts keep the total fixed, and
//! no reader may see a different total: two writer threads, each over its
//! own half of the accounts (interleaved in key order), make transfers
//! (two accounts), sweeps (every account, a batch larger than the
//! memtable) and closings (an account deleted, its balance moved to
//! another, and opened again later), while reader threads sum the
//! accounts by scans, by a snapshot's gets and by its scan, read held
//! snapshots and iterators again later, and another thread flushes and
//! rebuilds filters; the background threads flush, compact and rebalance
//! a deep tree of narrow tables. Every read must sum to the total; a held
//! snapshot must answer as it did. After the writer ends, a reopen holds
//! the total too. Pass or fail never depends on the threads' timing.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::{Db, FilterPolicy, Options, WriteBatch};
use common::{Rng, scratch_dir};

const ACCOUNTS: u64 = 48;
const WRITERS: u64 = 2;
const START: i64 = 1000;
/// Each writer's accounts' total.
const TOTAL: i64 = START * (ACCOUNTS / WRITERS) as i64;
const BATCHES: u64 = 1500;

fn account(i: u64) -> Vec<u8> {
    // Far apart in key order, padded so a sweep outgrows the memtable.
    format!("{:02}-acct-{i:04}", i % 7).into_bytes()
}

fn encode(balance: i64) -> Vec<u8> {
    let mut v = balance.to_string().into_bytes();
    v.push(b'|');
    v.resize(40, b'.');
    v
}

fn decode(v: &[u8]) -> i64 {
    let s = std::str::from_utf8(v).unwrap();
    s[..s.find('|').unwrap()].parse().unwrap()
}

fn owner(key: &[u8]) -> usize {
    let s = std::str::from_utf8(key).unwrap();
    let i: u64 = s[s.len() - 4..].parse().unwrap();
    (i % WRITERS) as usize
}

/// Each writer's total over `pairs`.
fn sums(pairs: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Vec<i64> {
    let mut sums = vec![0; WRITERS as usize];
    for (k, v) in pairs {
        sums[owner(&k)] += decode(&v);
    }
    sums
}

fn sum_of_gets(answers: &[Option<Vec<u8>>]) -> Vec<i64> {
    sums(
        (0..ACCOUNTS)
            .zip(answers)
            .filter_map(|(i, a)| a.clone().map(|v| (account(i), v))),
    )
}

const TOTALS: [i64; WRITERS as usize] = [TOTAL; WRITERS as usize];

fn options(seed: u64) -> Options {
    Options {
        memtable_bytes: 1024 + 512 * (seed % 3) as usize,
        max_immutable_memtables: 2,
        target_file_bytes: 512,
        block_size: 128,
        l1_bytes: 1024,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        dynamic_level_bytes: seed.is_multiple_of(2),
        deletion_compaction_ratio: Some(0.2),
        filter_policy: FilterPolicy::Optimized { bits_per_key: 6.0 },
        background_work: true,
        ..Options::default()
    }
}

fn run(seed: u64) {
    let dir = scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options(seed)).unwrap());
    let mut first = WriteBatch::new();
    for i in 0..ACCOUNTS {
        first.put(&account(i), &encode(START));
    }
    db.write(first).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let writing = Arc::new(std::sync::atomic::AtomicU64::new(WRITERS));
    for w in 0..WRITERS {
        let (db, done, writing) = (Arc::clone(&db), Arc::clone(&done), Arc::clone(&writing));
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ (w << 8));
            // The writer's own view of the balances (None: closed; only
            // its own accounts are read).
            let mut balances: Vec<Option<i64>> = vec![Some(START); ACCOUNTS as usize];
            let mine = |rng: &mut Rng| (rng.below(ACCOUNTS / WRITERS) * WRITERS + w) as usize;
            for n in 0..BATCHES {
                let mut b = WriteBatch::new();
                let from = mine(&mut rng);
                let to = mine(&mut rng);
                match n % 10 {
                    // A sweep: every open account gives one to the next
                    // open one, each key written twice in the batch (the
                    // later write wins).
                    0 => {
                        let open: Vec<usize> = (0..ACCOUNTS as usize)
                            .filter(|&i| i as u64 % WRITERS == w && balances[i].is_some())
                            .collect();
                        for (j, &i) in open.iter().enumerate() {
                            let next = open[(j + 1) % open.len()];
                            b.put(&account(i as u64), &encode(-7));
                            if next != i {
                                *balances[i].as_mut().unwrap() -= 1;
                                *balances[next].as_mut().unwrap() += 1;
                            }
                        }
                        for &i in &open {
                            b.put(&account(i as u64), &encode(balances[i].unwrap()));
                        }
                    }
                    // A closing: `from` deleted, its balance moved.
                    1 if from != to && balances[to].is_some() && balances[from].is_some() => {
                        let moved = balances[from].take().unwrap();
                        *balances[to].as_mut().unwrap() += moved;
                        b.put(&account(from as u64), &encode(0));
                        b.delete(&account(from as u64));
                        b.put(&account(to as u64), &encode(balances[to].unwrap()));
                    }
                    // A reopening of a closed account, funded by `to`.
                    2 if balances[from].is_none() && balances[to].is_some() => {
                        *balances[to].as_mut().unwrap() -= 5;
                        balances[from] = Some(5);
                        b.put(&account(to as u64), &encode(balances[to].unwrap()));
                        b.put(&account(from as u64), &encode(5));
                    }
                    _ if from != to && balances[from].is_some() && balances[to].is_some() => {
                        let amount = rng.below(50) as i64;
                        *balances[from].as_mut().unwrap() -= amount;
                        *balances[to].as_mut().unwrap() += amount;
                        b.put(&account(from as u64), &encode(balances[from].unwrap()));
                        b.put(&account(to as u64), &encode(balances[to].unwrap()));
                    }
                    _ => continue,
                }
                db.write(b).unwrap();
            }
            if writing.fetch_sub(1, Ordering::SeqCst) == 1 {
                done.store(true, Ordering::SeqCst);
            }
            balances
        }));
    }
    {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ 0x55);
            while !done.load(Ordering::SeqCst) {
                if rng.below(2) == 0 {
                    db.flush().unwrap();
                } else {
                    db.rebuild_filters(FilterPolicy::Uniform {
                        bits_per_key: rng.below(12) as f64,
                    })
                    .unwrap();
                }
            }
            Vec::new()
        }));
    }
    for r in 0..2u64 {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ (r + 100));
            let mut held = Vec::new();
            let mut iters = Vec::new();
            while !done.load(Ordering::SeqCst) {
                match rng.below(4) {
                    0 => {
                        let got = sums(db.scan::<&[u8], _>(..).unwrap().map(|r| r.unwrap()));
                        assert_eq!(got, TOTALS, "a scan saw part of a batch");
                    }
                    1 => {
                        let s = db.snapshot();
                        let answers: Vec<_> =
                            (0..ACCOUNTS).map(|i| s.get(&account(i)).unwrap()).collect();
                        let got = sum_of_gets(&answers);
                        assert_eq!(got, TOTALS, "a snapshot's gets saw part of a batch");
                        held.push((s, answers));
                        iters.push(db.scan::<&[u8], _>(..).unwrap());
                    }
                    2 if !held.is_empty() => {
                        let i = rng.below(held.len() as u64) as usize;
                        let (s, answers) = &held[i];
                        let again: Vec<_> =
                            (0..ACCOUNTS).map(|i| s.get(&account(i)).unwrap()).collect();
                        assert!(again == *answers, "a held snapshot answered differently");
                        let got = sums(s.scan::<&[u8], _>(..).unwrap().map(|r| r.unwrap()));
                        assert_eq!(got, TOTALS, "a held snapshot's scan");
                        held.swap_remove(i);
                    }
                    _ if !iters.is_empty() => {
                        let it = iters.swap_remove(rng.below(iters.len() as u64) as usize);
                        assert_eq!(sums(it.map(|r| r.unwrap())), TOTALS, "a held iterator");
                    }
                    _ => {}
                }
                if held.len() > 6 {
                    held.remove(0);
                }
                if iters.len() > 6 {
                    iters.remove(0);
                }
            }
            Vec::new()
        }));
    }
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    // Each account as its writer left it.
    let balances: Vec<Option<i64>> = (0..ACCOUNTS as usize)
        .map(|i| results[i % WRITERS as usize][i])
        .collect();
    let check = |db: &Db, what: &str| {
        for (i, b) in balances.iter().enumerate() {
            let got = db.get(&account(i as u64)).unwrap().map(|v| decode(&v));
            assert_eq!(got, *b, "{what}: account {i}");
        }
        let got = sums(db.scan::<&[u8], _>(..).unwrap().map(|r| r.unwrap()));
        assert_eq!(got, TOTALS, "{what}");
    };
    db.wait_for_background_work().unwrap();
    check(&db, "settled");
    Arc::into_inner(db).unwrap().close().unwrap();
    let db = Db::open(dir.path(), options(seed)).unwrap();
    check(&db, "reopened");
}

#[test]
fn readers_never_see_part_of_a_transfer() {
    for seed in 1..=2 {
        run(seed);
    }
}
