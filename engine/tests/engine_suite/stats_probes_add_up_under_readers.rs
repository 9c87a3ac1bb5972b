//! Every `Db::stats()` taken while other threads get keys tells one story
//! per level: each table probe has exactly one verdict, so
//! `table_probes == filter_negatives + filter_true_positives +
//! filter_false_positives + probes_without_filter`, in each level and in
//! the total, in every snapshot of the counters, not only once the readers
//! have stopped (the relation `bloomlsm stats` prints and the study reads
//! its "probes without a filter" from).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::{Db, LevelStats};
use common::narrow_tree::narrow_tree_options;
use common::{absent, fill, key, scratch_dir};

const KEYS: u64 = 600;

fn verdicts(s: &LevelStats) -> u64 {
    s.filter_negatives
        + s.filter_true_positives
        + s.filter_false_positives
        + s.probes_without_filter
}

#[test]
fn probes_equal_their_verdicts_in_every_stats_taken_beside_readers() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), narrow_tree_options()).unwrap();
    fill(&db, KEYS);
    db.flush().unwrap();
    for i in (0..KEYS).step_by(7) {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    let tables: u64 = db.stats().levels.iter().map(|l| l.tables).sum();
    assert!(tables >= 4, "a tree of several tables: {tables}");
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    db.get(&key(i % KEYS)).unwrap();
                    db.get(&absent(i % KEYS)).unwrap();
                    i += 4;
                }
            });
        }
        let mut uneven = Vec::new();
        // 20,000 rounds, and on until the readers have probed a thousand
        // tables, however the threads are scheduled.
        for round in 0u64.. {
            let s = db.stats();
            for (level, l) in s.levels.iter().chain(std::iter::once(&s.total)).enumerate() {
                if l.table_probes != verdicts(l) {
                    uneven.push((round, level, l.table_probes, verdicts(l)));
                }
            }
            if round >= 20_000 && s.total.table_probes > 1000 {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(
            uneven.is_empty(),
            "{} snapshots whose probes and verdicts differ (round, level, probes, verdicts), first: {:?}",
            uneven.len(),
            &uneven[..uneven.len().min(5)]
        );
    });
    let s = db.stats();
    assert!(s.total.table_probes > 0);
    assert_eq!(s.total.table_probes, verdicts(&s.total));
}
