//! Concurrency stress: writer, reader and scanner threads for a bounded
//! time while flushes and compactions run, checked against per-key
//! histories: no lost write, no value that was never written, no reader
//! going back in time, no deadlock (bounded by a timeout).
//! Duration: 3 s, or `BLOOMLSM_STRESS_SECONDS`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bloomlsm::{Db, Options, WriteBatch};
use rand::Rng;

const KEYS: usize = 2000;

fn key(k: usize) -> Vec<u8> {
    format!("stress{k:05}").into_bytes()
}

/// Values are "key:version"; versions of a key only grow.
fn parse(k: usize, v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).unwrap();
    let (kk, version) = s.split_once(':').unwrap();
    assert_eq!(kk.parse::<usize>().unwrap(), k, "value of another key: {s}");
    version.parse().unwrap()
}

#[test]
fn writers_readers_scanners_with_background_work() {
    stress(None);
}

/// With two table files open at most: nearly every read and scan that
/// misses the block cache reopens a file the set closed, while flushes
/// and compactions drop files from the tree.
#[test]
fn writers_readers_scanners_with_background_work_and_two_open_files() {
    stress(Some(2));
}

fn stress(max_open_files: Option<usize>) {
    let seconds: u64 = std::env::var("BLOOMLSM_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 64 << 10,
        l1_bytes: 256 << 10,
        target_file_bytes: 64 << 10,
        max_open_files,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let latest: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel::<(&'static str, u64)>();

    let writer = {
        let (db, latest, stop, done) = (
            Arc::clone(&db),
            Arc::clone(&latest),
            Arc::clone(&stop),
            done_tx.clone(),
        );
        std::thread::spawn(move || {
            let mut rng = rand::rng();
            let mut writes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut batch = WriteBatch::new();
                let mut bumped = Vec::new();
                for _ in 0..rng.random_range(1..4) {
                    let k = rng.random_range(0..KEYS);
                    if bumped.contains(&k) {
                        continue;
                    }
                    // Announce the version before writing it, so `latest`
                    // bounds what a reader may see.
                    let version = latest[k].fetch_add(1, Ordering::AcqRel) + 1;
                    batch.put(&key(k), format!("{k}:{version}").as_bytes());
                    bumped.push(k);
                }
                writes += bumped.len() as u64;
                db.write(batch).unwrap();
            }
            done.send(("writer", writes)).unwrap();
        })
    };
    let mut workers = vec![writer];
    for _ in 0..2 {
        let (db, latest, stop, done) = (
            Arc::clone(&db),
            Arc::clone(&latest),
            Arc::clone(&stop),
            done_tx.clone(),
        );
        workers.push(std::thread::spawn(move || {
            let mut rng = rand::rng();
            let mut seen = vec![0u64; KEYS];
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = rng.random_range(0..KEYS);
                let got = db.get(&key(k)).unwrap().map_or(0, |v| parse(k, &v));
                assert!(
                    got <= latest[k].load(Ordering::Acquire),
                    "key {k}: version {got} was never written"
                );
                assert!(
                    got >= seen[k],
                    "key {k}: went back from {} to {got}",
                    seen[k]
                );
                seen[k] = got;
                reads += 1;
            }
            done.send(("reader", reads)).unwrap();
        }));
    }
    {
        let (db, latest, stop, done) = (
            Arc::clone(&db),
            Arc::clone(&latest),
            Arc::clone(&stop),
            done_tx.clone(),
        );
        workers.push(std::thread::spawn(move || {
            let mut rng = rand::rng();
            let mut scanned = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let from = rng.random_range(0..KEYS);
                let mut previous: Option<Vec<u8>> = None;
                for item in db.scan(key(from)..).unwrap().take(100) {
                    let (k, v) = item.unwrap();
                    assert!(
                        previous.as_ref().is_none_or(|p| p < &k),
                        "scan out of order"
                    );
                    let index: usize = std::str::from_utf8(&k[6..]).unwrap().parse().unwrap();
                    assert!(parse(index, &v) <= latest[index].load(Ordering::Acquire));
                    previous = Some(k);
                    scanned += 1;
                }
            }
            done.send(("scanner", scanned)).unwrap();
        }));
    }
    drop(done_tx);
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut figures = Vec::new();
    for _ in 0..workers.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        figures.push(
            done_rx
                .recv_timeout(left)
                .expect("a worker did not finish: deadlock or stall"),
        );
    }
    for w in workers {
        w.join().unwrap();
    }
    db.wait_for_background_work().unwrap();
    for k in 0..KEYS {
        let want = latest[k].load(Ordering::Acquire);
        let got = db.get(&key(k)).unwrap().map_or(0, |v| parse(k, &v));
        assert_eq!(got, want, "key {k}: lost write");
    }
    let stats = db.stats();
    println!(
        "{seconds} s: {figures:?}; {} flushes, {} compactions; every key at its last written version",
        stats.flushes, stats.compactions
    );
}
