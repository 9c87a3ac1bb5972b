//! `use_direct_reads` under concurrency, on a disk file system: many
//! threads read (gets, range scans, iterators held across compactions)
//! while one thread churns other keys so background flushes, compactions
//! and filter rebuilds (in place and copied) replace the tables under them.
//! Each thread has its own bounce buffer; tables are opened (direct reads
//! of their index and filter) on the background thread while readers read.
//! Invariant: every answer about the stable keys is the value written,
//! whatever the churn does around them.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bloomlsm::{Db, FilterPolicy, Options};
use common::Rng;

/// Stable keys `s…`, written once; churned keys `c…` sort before them,
/// `t…` after, so a scan of `s..t` sees exactly the stable keys.
fn stable(i: u64) -> Vec<u8> {
    format!("s{:05}", i).into_bytes()
}

/// Lengths from 1 byte to past a 4 KiB aligned unit, so stable entries'
/// blocks start and end anywhere in their aligned ranges.
fn stable_value(i: u64) -> Vec<u8> {
    let len = match i % 9 {
        0 => 4097 + (i as usize * 13) % 3000,
        1..=3 => 200 + (i as usize * 7) % 700,
        _ => 1 + (i as usize * 3) % 90,
    };
    (0..len).map(|j| (i as usize * 17 + j) as u8).collect()
}

const STABLE: u64 = 400;

#[test]
fn readers_on_many_threads_see_the_stable_keys_through_churn() {
    run(None);
}

/// As above with one table file open at a time (`max_open_files`): every
/// read that misses the 1-byte block cache may reopen its file, while
/// compactions drop the last handles on tables and unlink their files.
#[test]
fn readers_on_many_threads_see_the_stable_keys_through_churn_with_one_file_open() {
    run(Some(1));
}

fn run(max_open_files: Option<usize>) {
    let Some(dir) = common::disk_dir() else {
        return;
    };
    let options = Options {
        use_direct_reads: true,
        max_open_files,
        memtable_bytes: 4096,
        target_file_bytes: 4096,
        l1_bytes: 16 << 10,
        block_size: 256,
        level_size_ratio: 3,
        num_levels: 5,
        l0_compaction_trigger: 2,
        block_cache_bytes: 1,
        filter_policy: FilterPolicy::Optimized { bits_per_key: 10.0 },
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    // Interleaved with churn so stable keys are spread over many tables.
    for i in 0..STABLE {
        db.put(&stable(i), &stable_value(i)).unwrap();
        db.put(format!("c{i:05}").as_bytes(), b"x").unwrap();
    }
    db.flush().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4u64)
        .map(|t| {
            let (db, stop, reads) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&reads));
            std::thread::spawn(move || {
                let mut rng = Rng(0x5eed + t);
                // An iterator over all stable keys, read a little per round
                // while compactions replace the tables it reads.
                let mut held = db.scan(stable(0)..b"t".to_vec()).unwrap();
                let mut held_at = 0;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..50 {
                        let i = rng.below(STABLE);
                        let got = db.get(&stable(i)).unwrap();
                        assert!(got == Some(stable_value(i)), "thread {t}: get {i}");
                        let gone = format!("s{i:05}-absent");
                        assert_eq!(db.get(gone.as_bytes()).unwrap(), None);
                    }
                    let a = rng.below(STABLE);
                    let n = 1 + rng.below(40);
                    let got: Vec<_> = db
                        .scan(stable(a)..b"t".to_vec())
                        .unwrap()
                        .take(n as usize)
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<_> = (a..STABLE.min(a + n))
                        .map(|i| (stable(i), stable_value(i)))
                        .collect();
                    assert!(got == want, "thread {t}: scan from {a}");
                    for _ in 0..5 {
                        match held.next() {
                            Some(r) => {
                                let (k, v) = r.unwrap();
                                assert!(
                                    k == stable(held_at) && v == stable_value(held_at),
                                    "thread {t}: held iterator item {held_at}"
                                );
                                held_at += 1;
                            }
                            None => {
                                assert_eq!(held_at, STABLE, "thread {t}: held ended early");
                                held = db.scan(stable(0)..b"t".to_vec()).unwrap();
                                held_at = 0;
                            }
                        }
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Churn: overwrites and deletes around the stable keys, and filter
    // budgets that move so every table's filter is rebuilt, while the
    // readers read.
    let mut rng = Rng(7);
    for round in 0..30u64 {
        if round == 15 {
            // Halfway, a reader has finished a round (or ended: its join
            // reports why), so reads ran beside the churn. Left to the
            // scheduler, readers that got no CPU before the churn ended
            // counted none and failed the check at the end.
            while reads.load(Ordering::Relaxed) == 0 && !readers.iter().any(|r| r.is_finished()) {
                std::thread::yield_now();
            }
        }
        for _ in 0..200 {
            let i = rng.below(2000);
            let k = if rng.below(2) == 0 {
                format!("c{i:05}")
            } else {
                format!("t{i:05}")
            };
            if rng.below(3) == 0 {
                db.delete(k.as_bytes()).unwrap();
            } else {
                let len = rng.below(600) as usize;
                db.put(k.as_bytes(), &vec![round as u8; len]).unwrap();
            }
        }
        if round % 5 == 4 {
            let bits = [2.0, 12.0, 6.0][(round / 5 % 3) as usize];
            db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
                .unwrap();
        }
    }
    db.wait_for_background_work().unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let stats = db.stats();
    println!(
        "{} reader rounds; {} flushes, {} compactions, {} filters built, {} blocks read",
        reads.load(Ordering::Relaxed),
        stats.flushes,
        stats.compactions,
        stats.filters_built,
        stats.total.data_blocks_read
    );
    assert!(stats.compactions > 0, "no compaction ran under the readers");
    if let Some(max) = max_open_files {
        // Files were closed by the bound and reopened by reads: more opens
        // than the tables written (each written table counts one filter).
        println!("{} table file opens", stats.table_file_opens);
        assert!(stats.table_file_opens > stats.filters_built);
        assert!(stats.open_table_files.unwrap() <= max as u64);
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    for i in 0..STABLE {
        assert!(db.get(&stable(i)).unwrap() == Some(stable_value(i)));
    }
}
