//! `Db::wait_for_background_work` while other threads keep writing.
//!
//! Its contract: it repeats flushes, compactions and filter rebalancing
//! "until a round changes nothing (at most 64 rounds, so writes from other
//! threads meanwhile cannot hold it forever)". The rounds were bounded but
//! a round was not: it flushed until no frozen memtable was left and
//! compacted until no level needed it, and with writers freezing a small
//! memtable every few puts, each flush or compaction left another one due.
//! With background threads the wait held the flush lock across its whole
//! flush loop (the flush thread never got it back) and returned only once
//! the writers stopped: not within 20 s, in every run of three shapes
//! (tiny memtables and tables, `Optimized` filters, L0 triggers 2/3/4),
//! while the writers went on at full speed. Invariant now: once a write
//! has come in since the wait began, each loop of a round stops after one
//! step, so the wait returns after at most 64 bounded rounds, writes or not.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use bloomlsm::{Db, Options};
use common::{Rng, scratch_dir};

/// Far above a passing run (well under a second here).
const WATCHDOG: Duration = Duration::from_secs(60);

#[test]
fn a_wait_returns_while_other_threads_keep_writing() {
    let options = Options {
        block_size: 64,
        memtable_bytes: 300,
        target_file_bytes: 200,
        l1_bytes: 400,
        level_size_ratio: 2,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 4,
        max_immutable_memtables: 3,
        ..Options::default()
    };
    let dir = scratch_dir();
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut rng = Rng(t + 3);
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("k{:04}", rng.below(200)).into_bytes();
                    db.put(&k, b"valuevaluevalue").unwrap();
                }
            })
        })
        .collect();
    // Let the writers get going: frozen memtables and L0 tables due.
    while db.stats().flushes < 200 {
        std::thread::yield_now();
    }
    let (tx, rx) = mpsc::channel();
    let waiter = Arc::clone(&db);
    let waiting = std::thread::spawn(move || {
        let _ = tx.send(waiter.wait_for_background_work());
    });
    let answer = rx.recv_timeout(WATCHDOG);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let answer =
        answer.unwrap_or_else(|_| panic!("hung: the wait outlived {WATCHDOG:?} of writes"));
    answer.unwrap();
    drop(rx);
    // The waiter drops its handle after it sends: join it, so that ours
    // is the last one.
    waiting.join().unwrap();
    Arc::try_unwrap(db).unwrap().close().unwrap();
}
