//! Every `Db::stats()` taken while other threads get keys tells one story,
//! in every snapshot of the counters, not only once the readers have
//! stopped:
//! - per level: each table probe has exactly one verdict, so
//!   `table_probes == filter_negatives + filter_true_positives +
//!   filter_false_positives + probes_without_filter`, in each level and
//!   in the total (the relation `bloomlsm stats` prints and the study
//!   reads its "probes without a filter" from);
//! - each memtable hit is one of the gets, so `memtable_hits <= gets`
//!   (the share of gets the memtable answered is at most 1);
//! - per level: each block a get searched came from a file or the cache
//!   after a verdict that searches one, so `data_blocks_read +
//!   block_cache_hits <= filter_true_positives + filter_false_positives +
//!   probes_without_filter` (equal once the readers stop).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::{Db, LevelStats, Stats};
use common::narrow_tree::narrow_tree_options;
use common::{absent, fill, key, scratch_dir};

/// Takes `db.stats()` beside four reader threads, reader `t` calling
/// `read(i)` for i = t, t + 4, t + 8, ... until told to stop: at least
/// `rounds` times and on until `enough` holds for one taken after them
/// (the readers have done enough, however the threads are scheduled), or
/// a reader ended (failed). Returns what `broken` says of each snapshot
/// that breaks the relation under test (nothing: it holds).
fn stats_beside_readers(
    db: &Db,
    rounds: u64,
    read: impl Fn(u64) + Sync,
    enough: impl Fn(&Stats) -> bool,
    broken: impl Fn(&Stats) -> Vec<String>,
) -> Vec<String> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4u64)
            .map(|t| {
                let (read, stop) = (&read, &stop);
                scope.spawn(move || {
                    let mut i = t;
                    while !stop.load(Ordering::Relaxed) {
                        read(i);
                        i += 4;
                    }
                })
            })
            .collect();
        let mut found = Vec::new();
        for round in 0u64.. {
            let s = db.stats();
            found.extend(
                broken(&s)
                    .into_iter()
                    .map(|b| format!("round {round}: {b}")),
            );
            if (round >= rounds && enough(&s)) || readers.iter().any(|r| r.is_finished()) {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        found
    })
}

/// Fails naming how many of `found` (what `stats_beside_readers`
/// returned) broke the relation, as `what`, and the first five.
fn assert_none_broken(found: &[String], what: &str) {
    assert!(
        found.is_empty(),
        "{} {what}, first: {:?}",
        found.len(),
        &found[..found.len().min(5)]
    );
}

fn verdicts(s: &LevelStats) -> u64 {
    s.filter_negatives
        + s.filter_true_positives
        + s.filter_false_positives
        + s.probes_without_filter
}

/// Verdicts after which the get searched a data block.
fn searching_verdicts(s: &LevelStats) -> u64 {
    s.filter_true_positives + s.filter_false_positives + s.probes_without_filter
}

/// Blocks the gets searched, from files or the cache.
fn blocks(s: &LevelStats) -> u64 {
    s.data_blocks_read + s.block_cache_hits
}

const TREE_KEYS: u64 = 600;

/// A narrow tree of several tables below L0, every seventh key deleted.
fn narrow_tree(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, narrow_tree_options()).unwrap();
    fill(&db, TREE_KEYS);
    db.flush().unwrap();
    for i in (0..TREE_KEYS).step_by(7) {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    let tables: u64 = db.stats().levels.iter().map(|l| l.tables).sum();
    assert!(tables >= 4, "a tree of several tables: {tables}");
    db
}

/// Takes stats beside readers of present and absent keys of
/// [`narrow_tree`], and returns, for each snapshot and level (the last
/// level being the total), `broken`'s account of a level breaking the
/// relation under test.
fn levels_beside_tree_readers(broken: fn(&LevelStats) -> Option<String>) -> Vec<String> {
    let dir = scratch_dir();
    let db = narrow_tree(dir.path());
    let found = stats_beside_readers(
        &db,
        20_000,
        |i| {
            db.get(&key(i % TREE_KEYS)).unwrap();
            db.get(&absent(i % TREE_KEYS)).unwrap();
        },
        |s| s.total.table_probes > 1000,
        |s| {
            let levels = s.levels.iter().chain(std::iter::once(&s.total));
            levels
                .enumerate()
                .filter_map(|(level, l)| Some(format!("level {level}: {}", broken(l)?)))
                .collect()
        },
    );
    // Once the readers stopped, each relation is an equality.
    let s = db.stats();
    assert!(blocks(&s.total) > 0, "the gets searched blocks");
    for (level, l) in s.levels.iter().chain(std::iter::once(&s.total)).enumerate() {
        assert_eq!(l.table_probes, verdicts(l), "level {level}");
        assert_eq!(blocks(l), searching_verdicts(l), "level {level}");
    }
    found
}

#[test]
fn probes_equal_their_verdicts_in_every_stats_taken_beside_readers() {
    let uneven = levels_beside_tree_readers(|l| {
        (l.table_probes != verdicts(l))
            .then(|| format!("probes {}, verdicts {}", l.table_probes, verdicts(l)))
    });
    assert_none_broken(
        &uneven,
        "levels of snapshots whose probes and verdicts differ (the last level is the total)",
    );
}

#[test]
fn blocks_stay_within_their_verdicts_in_every_stats_taken_beside_readers() {
    let over = levels_beside_tree_readers(|l| {
        (blocks(l) > searching_verdicts(l)).then(|| {
            format!(
                "blocks {}, verdicts that search one {}",
                blocks(l),
                searching_verdicts(l)
            )
        })
    });
    assert_none_broken(
        &over,
        "levels of snapshots with more blocks than verdicts that search one (the last level is the total)",
    );
}

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
    // Many rounds: the old order (gets read, then hits) was caught in
    // about one round in 40,000.
    let over = stats_beside_readers(
        &db,
        200_000,
        |i| assert_eq!(db.get(&key(i % 8)).unwrap().as_deref(), Some(&b"new"[..])),
        |s| s.memtable_hits > 1000,
        |s| {
            (s.memtable_hits > s.gets)
                .then(|| format!("hits {}, gets {}", s.memtable_hits, s.gets))
                .into_iter()
                .collect()
        },
    );
    assert_none_broken(&over, "snapshots with more memtable hits than gets");
    let s = db.stats();
    assert!(
        s.memtable_hits > 1000,
        "the readers were answered by the memtable: {}",
        s.memtable_hits
    );
    assert_eq!(s.memtable_hits, s.gets, "every get hit the memtable");
}
