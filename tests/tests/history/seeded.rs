//! The deterministic variant: one thread, inline background work
//! (`background_work: false`), the same operation mix as the timed run
//! (writes with 40% deletes, gets, scans, snapshots held across flushes,
//! compactions and rebuilds, `rebuild_filters`, flushes) plus reopens in
//! the middle (read-only first, then read-write with another filter kind
//! and sync mode), from one seed. Every answer is exact: with one thread
//! the window of each read is one version.

use std::time::Instant;

use bloomlsm::{Db, Error, SyncMode};
use bloomlsm_tests::scratch_dir;

use super::rng::Mix;
use super::shape::{deep_options, kind, policy, sorted_levels_in_use};
use super::snapshots::Held;
use super::verify::{bounds, check_range, collect_scan};
use super::write::{Owned, write_some};
use super::{History, KEYS, key};

const ALL: Owned = Owned {
    writer: 0,
    writers: 1,
};

/// What a seeded run did.
#[derive(Debug, Default)]
pub struct Figures {
    /// Operations written.
    pub writes: u64,
    /// Snapshot re-reads.
    pub rereads: u64,
    /// Reopens.
    pub reopens: u64,
    /// Most levels below L0 in use at once.
    pub deepest: usize,
}

fn options(rng: &mut Mix) -> bloomlsm::Options {
    let sync = if rng.chance(0.5) {
        SyncMode::Never
    } else {
        SyncMode::Always
    };
    let deletion = [None, Some(0.3), None, Some(0.6), Some(0.15)][rng.below(5) as usize];
    let mut o = deep_options(kind(rng), sync, deletion, false);
    o.filter_policy = policy(rng);
    // Each open its own narrow shape: more L0 tables overlapping, static
    // or dynamic level budgets, more frozen memtables.
    o.memtable_bytes = 1024 + rng.below(3072) as usize;
    // Now and then tables of one or two keys each: hundreds per level.
    o.target_file_bytes = if rng.chance(0.25) {
        64 + rng.below(192)
    } else {
        512 + rng.below(1536)
    };
    o.block_size = [64, 128, 256][rng.below(3) as usize];
    o.l0_compaction_trigger = 2 + rng.below(4) as usize;
    o.dynamic_level_bytes = rng.chance(0.7);
    o.max_immutable_memtables = 1 + rng.below(3) as usize;
    // About half the opens keep one table file open, with no draw of their
    // own (every seed's history stays as it was).
    o.max_open_files = (o.l0_compaction_trigger % 2 == 1).then_some(1);
    o
}

/// Closes `db` (held snapshots then fail with `Closed`), checks a
/// read-only open, and opens again read-write with other options.
fn reopen(db: Db, held: &mut Vec<Held>, history: &History, rng: &mut Mix) -> Db {
    let dir = db.path().to_path_buf();
    db.close().unwrap();
    for h in held.drain(..) {
        let after = h.snapshot().get(&key(0));
        assert!(
            matches!(after, Err(Error::Closed)),
            "snapshot read after close: {after:?}"
        );
    }
    let ro = Db::open_read_only(&dir, options(rng)).unwrap();
    super::verify::verify_exact(&ro, history, "read-only open");
    ro.close().unwrap();
    let db = Db::open(&dir, options(rng)).unwrap();
    super::verify::verify_exact(&db, history, "reopen");
    db
}

/// Runs `ops` operations of the case of `seed`; panics at the first wrong
/// answer (the caller names the seed and operation).
pub fn run_seed(seed: u64, ops: u64, at: &mut u64) -> Figures {
    let mut rng = Mix::new(seed);
    let dir = scratch_dir();
    let mut db = Db::open(dir.path(), options(&mut rng)).unwrap();
    let history = History::new(1);
    let mut held: Vec<Held> = Vec::new();
    let mut figures = Figures::default();
    let fail = |e: String| -> ! { panic!("{e}") };
    for op in 0..ops {
        *at = op;
        match rng.below(1000) {
            0..=449 => figures.writes += write_some(&db, &history, &mut rng, ALL) as u64,
            450..=599 => {
                let k = rng.below(KEYS);
                let got = db.get(&key(k)).unwrap();
                let v = history.acked(k);
                history
                    .check(k, got.as_deref(), v, v, "get")
                    .unwrap_or_else(|e| fail(e));
            }
            600..=679 => {
                let from = rng.below(KEYS);
                let to = (from + 1 + rng.below(400)).min(KEYS);
                let got = collect_scan(
                    db.scan(bounds(&mut rng, from, to)).unwrap(),
                    from,
                    to,
                    "scan",
                )
                .unwrap_or_else(|e| fail(e));
                let acked = history.acked_range(from, to);
                check_range(&history, &got, from, &acked, &acked, "scan")
                    .unwrap_or_else(|e| fail(e));
            }
            680..=739 if held.len() < 3 => {
                let h = Held::take(&db, &history, &mut rng, &held, Instant::now());
                held.push(h.unwrap_or_else(|e| fail(e)));
            }
            680..=839 if !held.is_empty() => {
                let i = rng.below(held.len() as u64) as usize;
                held[i].reread(&mut rng).unwrap_or_else(|e| fail(e));
                figures.rereads += 1;
            }
            840..=879 if !held.is_empty() => {
                let i = rng.below(held.len() as u64) as usize;
                held.remove(i).reread(&mut rng).unwrap_or_else(|e| fail(e));
            }
            880..=929 => db.flush().unwrap(),
            930..=969 => db.rebuild_filters(policy(&mut rng)).unwrap(),
            970..=989 => db.wait_for_background_work().unwrap(),
            990..=994 => {
                db = reopen(db, &mut held, &history, &mut rng);
                figures.reopens += 1;
            }
            _ => {}
        }
        figures.deepest = figures.deepest.max(sorted_levels_in_use(&db));
    }
    for h in &held {
        h.reread(&mut rng).unwrap_or_else(|e| fail(e));
    }
    super::verify::verify_exact(&db, &history, "end");
    reopen(db, &mut held, &history, &mut rng).close().unwrap();
    figures
}
