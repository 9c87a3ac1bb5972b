//! Readers on four threads while a writer drives background flushes,
//! compactions and filter rebuilds, and reads and reopens of table files
//! fail now and then (seeded), `max_open_files` at `Some(1)` so that
//! readers race each other to reopen the one file the set holds: every
//! get of a key no one writes any more is its value or an `EIO`, every
//! scan over them is their pairs in order or a prefix and an `EIO`.
//! Several rounds, each healed, checked, closed and reopened.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::Db;
use bloomlsm::fs::fault::{FaultFs, ReadFault};

use super::harness::{is_job_error, is_read_error, options};
use crate::common::{Model, Rng, short_key};

/// Keys `0..STABLE` are written before the readers start, and only read.
const STABLE: u64 = 300;

fn reader(db: &Db, stable: &Model, seed: u64, stop: &AtomicBool) -> (u64, u64) {
    let (mut ok, mut failed) = (0, 0);
    let mut rng = Rng(seed);
    while !stop.load(Ordering::Relaxed) {
        if rng.below(8) == 0 {
            let from = short_key(rng.below(STABLE));
            let want: Vec<_> = stable.range(from.clone()..short_key(STABLE)).collect();
            let it = match db.scan(from..short_key(STABLE)) {
                Ok(it) => it,
                Err(e) => {
                    assert!(is_read_error(&e), "scan: {e}");
                    failed += 1;
                    continue;
                }
            };
            let mut at = 0;
            for r in it {
                match r {
                    Ok((k, v)) => {
                        assert!(want.get(at) == Some(&(&k, &v)), "scan item {at}");
                        at += 1;
                    }
                    Err(e) => {
                        assert!(is_read_error(&e), "scan item {at}: {e}");
                        failed += 1;
                        at = want.len();
                        break;
                    }
                }
            }
            assert_eq!(at, want.len(), "a scan ended early, silently");
            ok += 1;
        } else {
            let key = short_key(rng.below(STABLE));
            match db.get(&key) {
                Ok(v) => {
                    assert!(v.as_ref() == stable.get(&key), "key {key:?}");
                    ok += 1;
                }
                Err(e) => {
                    assert!(is_read_error(&e), "get: {e}");
                    failed += 1;
                }
            }
        }
    }
    (ok, failed)
}

#[test]
fn racing_readers_get_right_answers_or_errors_while_reads_and_reopens_fail() {
    let dir = crate::common::scratch_dir();
    let fs = FaultFs::new();
    let mut model = Model::new();
    let mut rng = Rng(41);
    let policy = bloomlsm::FilterPolicy::Optimized { bits_per_key: 8.0 };
    let mut totals = (0, 0, 0);
    for round in 0..30u64 {
        let opts = options(Some(1 + round as usize % 2), false, policy.clone());
        let db = Arc::new(Db::open_with_fs(dir.path(), opts, Arc::new(fs.clone())).unwrap());
        // The stable keys: overwritten and a quarter deleted, each round.
        for _ in 0..900 {
            let i = rng.below(STABLE);
            let key = short_key(i);
            if rng.below(4) == 0 {
                db.delete(&key).unwrap();
                model.remove(&key);
            } else {
                let v = format!("{i}-{round}-{}", rng.below(1 << 20)).into_bytes();
                db.put(&key, &v).unwrap();
                model.insert(key, v);
            }
        }
        let stable = Arc::new(model.clone());
        fs.fail_reads(ReadFault::Seeded {
            seed: round,
            one_in: 300,
        });
        fs.fail_read_opens(ReadFault::Seeded {
            seed: round + 100,
            one_in: 100,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|t| {
                let (db, stable, stop) = (Arc::clone(&db), Arc::clone(&stable), Arc::clone(&stop));
                std::thread::spawn(move || reader(&db, &stable, round * 10 + t, &stop))
            })
            .collect();
        // The writer: keys the readers do not read, until writes stop or
        // 3000 were written.
        let mut refused = false;
        for _ in 0..3000 {
            let i = STABLE + rng.below(STABLE);
            let key = short_key(i);
            let v = format!("{i}-{round}").into_bytes();
            match db.put(&key, &v) {
                Ok(()) => {
                    model.insert(key, v);
                }
                Err(e) => {
                    assert!(is_job_error(&e), "round {round}: put: {e}");
                    refused = true;
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            let (ok, failed) = r.join().unwrap();
            totals.0 += ok;
            totals.1 += failed;
        }
        totals.2 += u64::from(refused);
        fs.heal();
        let all: Model = db
            .scan::<&[u8], _>(..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(all == model, "round {round}: healed, the store differs");
        let db = Arc::into_inner(db).unwrap();
        match db.close() {
            Ok(()) => assert!(!refused, "round {round}: closed clean after a stop"),
            Err(e) => assert!(is_job_error(&e), "round {round}: close: {e}"),
        }
    }
    println!(
        "{} reads answered, {} failed, {} rounds stopped; {} faults",
        totals.0,
        totals.1,
        totals.2,
        fs.faults_injected()
    );
    // Thousands of reads at one in a hundred failing: a run in which no
    // reader met a failed read tested nothing.
    assert!(fs.faults_injected() > 0, "no fault was injected");
    assert!(totals.1 > 0, "no reader met a failed read");
    let db = Db::open(dir.path(), options(None, false, policy)).unwrap();
    let all: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(all == model, "reopened, the store differs");
}
