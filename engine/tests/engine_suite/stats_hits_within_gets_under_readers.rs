//! Every `Db::stats()` taken while other threads get keys found in the
//! memtable counts no more memtable hits than gets: each hit is one of
//! the gets, so `memtable_hits <= gets` in every snapshot of the
//! counters (the share of gets the memtable answered is at most 1), not
//! only once the readers have stopped.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::Db;
use common::narrow_tree::narrow_tree_options;
use common::{fill, key, scratch_dir};

#[test]
fn memtable_hits_stay_within_gets_in_every_stats_taken_beside_readers() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), narrow_tree_options()).unwrap();
    fill(&db, 300);
    db.flush().unwrap();
    // Overwrites the memtable keeps (its 2 KiB hold them): work runs
    // inline, so nothing flushes them while the readers run.
    for i in 0..8 {
        db.put(&key(i), b"new").unwrap();
    }
    assert_eq!(db.get(&key(0)).unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(
        db.stats().memtable_hits,
        1,
        "key 0 answered by the memtable"
    );
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    assert_eq!(db.get(&key(i % 8)).unwrap().as_deref(), Some(&b"new"[..]));
                    i += 1;
                }
            });
        }
        let mut over = Vec::new();
        // Many rounds: the old order (gets read, then hits) was caught
        // in about one round in 40,000.
        // And until the readers have been answered a thousand times, however
        // the threads are scheduled.
        for round in 0u64.. {
            let s = db.stats();
            if s.memtable_hits > s.gets {
                over.push((round, s.memtable_hits, s.gets));
            }
            if round >= 200_000 && s.memtable_hits > 1000 {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(
            over.is_empty(),
            "{} snapshots with more memtable hits than gets (round, hits, gets), first: {:?}",
            over.len(),
            &over[..over.len().min(5)]
        );
    });
    let s = db.stats();
    assert!(
        s.memtable_hits > 1000,
        "the readers were answered by the memtable: {}",
        s.memtable_hits
    );
    assert_eq!(s.memtable_hits, s.gets, "every get hit the memtable");
}
