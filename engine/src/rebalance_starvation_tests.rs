//! Background rebalancing during a sustained load. A deep store of narrow
//! tables is loaded under `Optimized` at 10 bits per key, then reopened at
//! 5: every level's budget moved, so every existing table's filter is
//! over its target and due for a rebalancing rebuild. Then writes go on.
//!
//! The load is paced by a test-only pause point after each compaction
//! pick (`DbInner::pick_pause`), not by sleeps: the compaction thread,
//! stopped at a pick, goes on only once a new L0 table is in the tree
//! (with `l0_compaction_trigger` 1, that table makes the next compaction
//! due as soon as this one is installed), and the writer writes one more
//! memtable only once that one is flushed and the compaction thread waits
//! at a pick for the next. So every memtable of the load lets the
//! compaction thread make one pass from a pick to the next (two if the
//! memtable rotated twice), and a compaction is always due: the stream
//! of compactions a sustained load makes, without the scheduler's luck.
//! What a pass does besides its compaction is what is measured.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::budget_test_shapes::{mix, narrow_options, spread_key as key};
use crate::filter_budget::rebalance_pick;
use crate::inner::DbInner;
use crate::rebalance::BACKGROUND_TOLERANCE;
use crate::{Db, FilterKind, Options};

/// Memtables written after the first (which sets the pace up).
const CHUNKS: u64 = 40;
/// Bounds every wait of the pacing; reaching one is a test failure.
const PATIENCE: Duration = Duration::from_secs(60);

/// A deep store of narrow tables (as `mixed_kind_tests.rs`): 2 KiB
/// memtables, 1 KiB tables, a 2 KiB L1 and a size ratio of 3 over 7
/// levels. L0 compacts at one table, so each flush makes a compaction due.
fn options(bits_per_key: f64, background_work: bool, l0_slowdown_trigger: usize) -> Options {
    Options {
        l0_compaction_trigger: 1,
        l0_slowdown_trigger,
        l0_stop_trigger: 64,
        ..narrow_options(FilterKind::Ribbon, bits_per_key, background_work)
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("v{i}-{:x}", mix(i ^ 0x5eed)).into_bytes()
}

const LOADED: u64 = 6_000;

/// Loads `LOADED` keys inline at 10 bits per key (overwriting every third),
/// settles, and leaves a few writes in the WAL (an L0 table at the next
/// open), so the next open starts with a compaction due.
fn deep_store(dir: &std::path::Path) {
    let db = Db::open(dir, options(10.0, false, 8)).unwrap();
    for i in 0..LOADED {
        db.put(&key(i), &value(i)).unwrap();
    }
    for i in (0..LOADED).step_by(3) {
        db.put(&key(i), &value(i + 1)).unwrap();
    }
    db.wait_for_background_work().unwrap();
    for i in LOADED..LOADED + 5 {
        db.put(&key(i), &value(i)).unwrap();
    }
    let s = db.stats();
    println!(
        "loaded: tables per level {:?}, bits per key {:?}",
        s.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
        s.levels
            .iter()
            .map(|l| (l.bits_per_key * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    db.close().unwrap();
}

/// Whether some table's filter is off its target by more than the
/// background's tolerance: a rebalancing rebuild is due.
fn rebuild_due(inner: &DbInner) -> bool {
    let policy = inner.filter_policy.read().clone();
    let sv = inner.current.load_full();
    rebalance_pick(
        &policy,
        inner.options.filter_kind,
        &sv.version.levels,
        0,
        BACKGROUND_TOLERANCE,
    )
    .is_some()
}

fn l0_numbers(inner: &DbInner) -> Vec<u64> {
    inner.current.load().version.levels[0]
        .iter()
        .map(|t| t.meta.number)
        .collect()
}

#[derive(Default)]
struct PaceState {
    /// L0's tables at the pick where the compaction thread waits now.
    waiting_on: Option<HashSet<u64>>,
    /// The load is over: picks no longer wait.
    done: bool,
    timed_out: bool,
}

#[derive(Default)]
struct Pacer {
    state: Mutex<PaceState>,
    cv: Condvar,
}

impl Pacer {
    /// Stops the compaction thread at each pick until the tree holds an L0
    /// table it did not hold at the pick (so a compaction is due again
    /// once this one is installed), or L0 stops writes, or the load ends.
    fn arm(self: &Arc<Self>, db: &Db) {
        let pacer = Arc::clone(self);
        let inner: Weak<DbInner> = Arc::downgrade(&db.inner);
        db.inner.pick_pause.set(Some(Arc::new(move || {
            let Some(inner) = inner.upgrade() else {
                return;
            };
            let before: HashSet<u64> = l0_numbers(&inner).into_iter().collect();
            let deadline = Instant::now() + PATIENCE;
            let mut st = pacer.state.lock();
            st.waiting_on = Some(before.clone());
            while !st.done {
                let now = l0_numbers(&inner);
                if now.iter().any(|n| !before.contains(n))
                    || now.len() >= inner.options.l0_stop_trigger
                {
                    break;
                }
                if Instant::now() > deadline {
                    st.timed_out = true;
                    break;
                }
                pacer.cv.wait_for(&mut st, Duration::from_millis(1));
            }
            st.waiting_on = None;
        })));
    }

    /// Waits until the memtables written are flushed and the compaction
    /// thread waits at a pick for an L0 table newer than all of them
    /// (returns `true`), or L0 is empty (no compaction is due from it: the
    /// pace is not set up yet; returns `false`).
    fn wait_for_the_next_memtable(&self, db: &Db) -> bool {
        let deadline = Instant::now() + PATIENCE;
        let mut st = self.state.lock();
        loop {
            let sv = db.inner.current.load_full();
            if sv.imm.is_empty() {
                let l0 = l0_numbers(&db.inner);
                if l0.is_empty() {
                    return false;
                }
                if let Some(at_pick) = &st.waiting_on
                    && l0.iter().all(|n| at_pick.contains(n))
                {
                    return true;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the compaction thread never waited for the next memtable"
            );
            self.cv.wait_for(&mut st, Duration::from_millis(1));
        }
    }

    fn finish(&self) {
        let mut st = self.state.lock();
        st.done = true;
        self.cv.notify_all();
        assert!(!st.timed_out, "a pick waited {PATIENCE:?} for a flush");
    }
}

/// Writes until the memtable rotates (its flush is the next L0 table);
/// returns the next key.
fn write_a_memtable(db: &Db, mut next: u64) -> u64 {
    let wal = db.inner.current.load().mem.wal_number;
    while db.inner.current.load().mem.wal_number == wal {
        // Two new keys, one overwrite of the loaded ones.
        let i = if next.is_multiple_of(3) {
            next % LOADED
        } else {
            next
        };
        db.put(&key(i), &value(i + next)).unwrap();
        next += 1;
    }
    next
}

/// What the measured part of the load did.
#[derive(Debug)]
struct Load {
    rebalanced: u64,
    compactions: u64,
    flushes: u64,
}

fn counts(db: &Db) -> (u64, u64, u64) {
    let s = db.stats();
    (
        s.filters_rebalanced,
        s.compactions + s.trivial_moves,
        s.flushes,
    )
}

/// Reopens the deep store at 5 bits per key and writes `CHUNKS + 1`
/// memtables (paced as the module says on background threads); returns
/// the counts over the last `CHUNKS`, and the store.
fn load(dir: &std::path::Path, background_work: bool, l0_slowdown_trigger: usize) -> (Load, Db) {
    let db = Db::open(dir, options(5.0, background_work, l0_slowdown_trigger)).unwrap();
    let pacer = Arc::new(Pacer::default());
    if background_work {
        pacer.arm(&db);
    }
    let mut next = LOADED + 5;
    // Memtables until the pace is set up: from then on the compaction
    // thread waits at a pick whenever the writer starts a memtable.
    loop {
        next = write_a_memtable(&db, next);
        if !background_work || pacer.wait_for_the_next_memtable(&db) {
            break;
        }
    }
    let (r0, c0, f0) = counts(&db);
    assert!(
        rebuild_due(&db.inner),
        "no rebuild due: the test lost its point"
    );
    for _ in 0..CHUNKS {
        next = write_a_memtable(&db, next);
        if background_work {
            assert!(pacer.wait_for_the_next_memtable(&db), "L0 emptied");
        }
    }
    // The compaction thread is stopped at a pick: nothing is in flight.
    let (r1, c1, f1) = counts(&db);
    let due = rebuild_due(&db.inner);
    pacer.finish();
    let load = Load {
        rebalanced: r1 - r0,
        compactions: c1 - c0,
        flushes: f1 - f0,
    };
    let s = db.stats();
    println!(
        "background_work {background_work}, slowdown at {l0_slowdown_trigger}: {load:?}; \
         a rebuild still due: {due}; tables per level {:?}",
        s.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
    );
    if background_work {
        assert!(due, "every due rebuild was done: the test lost its point");
    }
    (load, db)
}

/// Inline, each write's work ends with a rebalancing step: the load
/// rebuilds filters all along.
#[test]
fn inline_a_sustained_load_rebalances_filters() {
    let dir = crate::scratch_dirs::scratch_dir();
    deep_store(dir.path());
    let (load, db) = load(dir.path(), false, 8);
    assert!(
        load.rebalanced >= CHUNKS,
        "inline: {} filters rebalanced over {CHUNKS} memtables",
        load.rebalanced
    );
    db.close().unwrap();
}

/// On the background threads, a compaction always due must not postpone
/// a due rebuild indefinitely: with L0 under its slowdown trigger, each
/// pass of the compaction thread (one compaction here) is followed by
/// one rebuild.
#[test]
fn background_rebalancing_is_not_starved_by_a_stream_of_compactions() {
    let dir = crate::scratch_dirs::scratch_dir();
    deep_store(dir.path());
    let (load, db) = load(dir.path(), true, 8);
    assert!(
        load.compactions >= CHUNKS && load.flushes >= CHUNKS,
        "the load made {} compactions and {} flushes over {CHUNKS} memtables",
        load.compactions,
        load.flushes
    );
    assert!(
        load.rebalanced >= CHUNKS,
        "background: {} filters rebalanced over {CHUNKS} memtables and {} compactions \
         while rebuilds were due",
        load.rebalanced,
        load.compactions
    );
    // `wait_for_background_work` still settles every filter (the
    // compaction thread rebalances meanwhile too).
    db.wait_for_background_work().unwrap();
    assert!(!rebuild_due(&db.inner), "a rebuild due after the settle");
    db.close().unwrap();
}

/// Compactions keep priority while L0 is at its slowdown trigger (writes
/// are being delayed): no rebuild runs between them. Once the load stops,
/// the compactions end and the rebuilds due run on the background
/// thread.
#[test]
fn compactions_keep_priority_over_rebalancing_while_l0_slows_writes() {
    let dir = crate::scratch_dirs::scratch_dir();
    deep_store(dir.path());
    let (load, db) = load(dir.path(), true, 1);
    assert!(load.compactions >= CHUNKS, "{load:?}");
    assert_eq!(
        load.rebalanced, 0,
        "a rebuild ran while L0 was at its slowdown trigger"
    );
    let before = db.stats().filters_rebalanced;
    let deadline = Instant::now() + PATIENCE;
    while db.stats().filters_rebalanced == before {
        assert!(
            Instant::now() < deadline,
            "no rebuild on the background thread after the load"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    db.close().unwrap();
}
