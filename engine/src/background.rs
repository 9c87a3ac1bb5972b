//! The two background threads (flushes never wait behind a long
//! compaction), and the same work run inline when `background_work` is off.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::inner::DbInner;
use crate::options::CorruptFilterPolicy;
use crate::rebalance::BACKGROUND_TOLERANCE;

/// Most rounds of flushes, compactions and filter rebalancing
/// `settle_background_work` runs before it returns: a bound, so a tree
/// whose compactions and filter sizes kept moving each other could never
/// hang a wait.
const SETTLE_ROUNDS: usize = 64;

/// Which background thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Worker {
    Flush,
    Compaction,
}

impl Worker {
    pub(crate) const ALL: [(Worker, &'static str); 2] = [
        (Worker::Flush, "bloomlsm-flush"),
        (Worker::Compaction, "bloomlsm-compact"),
    ];
}

impl DbInner {
    /// Wakes both background threads.
    pub(crate) fn schedule_work(&self) {
        let mut bg = self.bg.lock();
        bg.flush_pending = true;
        bg.compaction_pending = true;
        self.bg_cv.notify_all();
    }

    /// A background thread's life: wait for work, do it, repeat until
    /// shutdown. A failure stops writes (reads go on).
    pub(crate) fn background_loop(self: Arc<Self>, worker: Worker) {
        loop {
            {
                let mut bg = self.bg.lock();
                loop {
                    if bg.shutdown {
                        return;
                    }
                    let pending = match worker {
                        Worker::Flush => &mut bg.flush_pending,
                        Worker::Compaction => &mut bg.compaction_pending,
                    };
                    if *pending {
                        *pending = false;
                        break;
                    }
                    self.bg_cv.wait(&mut bg);
                }
            }
            if self.write_error.lock().is_some() {
                continue;
            }
            // A panic (a bug) ends this round as an error: writes stop
            // and the thread lives on, idle, until shutdown, so writers
            // get `WritesStopped` instead of waiting for good on a flush or
            // compaction no thread would run, and the close joins it.
            let work = std::panic::AssertUnwindSafe(|| match worker {
                Worker::Flush => self.flush_all_immutable().map(|()| {
                    // New L0 tables may call for a compaction.
                    self.bg.lock().compaction_pending = true;
                    self.bg_cv.notify_all();
                }),
                Worker::Compaction => self.compaction_cycle().map(|more| {
                    // One rebalancing rebuild per cycle: compactions and
                    // shutdown are looked at between any two.
                    if more {
                        self.bg.lock().compaction_pending = true;
                    }
                }),
            });
            let result = std::panic::catch_unwind(work)
                .unwrap_or_else(|payload| Err(crate::Error::panicked(payload.as_ref())));
            let _ = self.stopping_writes_on_error("background work", || result);
            self.stall_cv.notify_all();
        }
    }

    /// One cycle of the compaction thread: rebuilds damaged filters (when
    /// asked to), compacts, and rebuilds at most one filter whose level's
    /// budget moved; returns whether it did (more may be due: the thread
    /// then runs another cycle).
    ///
    /// While writes go on, some level may need a compaction after every
    /// compaction, so "compact until none is needed, then rebalance" would
    /// postpone a due rebuild for as long as the writes last. So the
    /// rebuild is looked for after each compaction, and a rebuild ends the
    /// cycle (the compactions still needed run in the next one), unless L0
    /// is at its slowdown trigger: writes are being delayed, and
    /// compactions go first until L0 is under it again. Without a due
    /// rebuild (the step finds none, or its memo says the tree has not
    /// changed since it last found none) compactions go on in this cycle.
    pub(crate) fn compaction_cycle(&self) -> Result<bool> {
        self.rebuild_damaged_filters_if_asked()?;
        while self.compact_once()? {
            if self.shutting_down() {
                return Ok(false);
            }
            if !self.l0_slows_writes() && self.rebalance_filters_step(BACKGROUND_TOLERANCE)? {
                return Ok(true);
            }
        }
        if self.shutting_down() {
            return Ok(false);
        }
        self.rebalance_filters_step(BACKGROUND_TOLERANCE)
    }

    /// Rebuilds damaged filters when `Options::on_corrupt_filter` asks.
    fn rebuild_damaged_filters_if_asked(&self) -> Result<()> {
        if self.options.on_corrupt_filter == CorruptFilterPolicy::Rebuild {
            self.rebuild_damaged_filters()?;
        }
        Ok(())
    }

    /// `Db::close` (or drop) asked the background threads to stop.
    pub(crate) fn shutting_down(&self) -> bool {
        self.bg.lock().shutdown
    }

    /// Whether L0 holds `l0_slowdown_trigger` tables: each write is delayed
    /// (or stopped, further up), and compactions take priority over
    /// rebalancing rebuilds.
    fn l0_slows_writes(&self) -> bool {
        self.current.load().version.levels[0].len() >= self.options.l0_slowdown_trigger
    }

    /// The inline counterpart of [`Self::compaction_cycle`] (each write's
    /// work without background threads, and `Db::wait_for_background_work`):
    /// rebuilds damaged filters (when asked to), compacts while any level
    /// needs it and `go_on()` says so after each compaction (writers on
    /// other threads can keep a compaction due after every one, so the
    /// callers stop once a write came in: `no_write_since_now`), then
    /// rebuilds at most one filter whose level's budget moved; returns
    /// whether it did.
    fn compact_and_repair_while(&self, go_on: impl Fn() -> bool) -> Result<bool> {
        self.rebuild_damaged_filters_if_asked()?;
        self.compact_while(go_on)?;
        self.rebalance_filters_step(BACKGROUND_TOLERANCE)
    }

    /// The oldest live snapshot was released: if that makes a table due for
    /// a bottommost cleanup, wakes the compaction thread. Inline (without
    /// background threads) the cleanup runs with the next write's work or
    /// `Db::wait_for_background_work`: a snapshot's drop never does I/O.
    pub(crate) fn oldest_snapshot_released(&self) {
        if !self.options.background_work || self.check_writable().is_err() {
            return;
        }
        let installs = self.installs.load(Ordering::Acquire);
        let sv = self.current.load_full();
        if self
            .pick_bottom_cleanup(installs, &sv.version.levels)
            .is_some()
        {
            let mut bg = self.bg.lock();
            bg.compaction_pending = true;
            self.bg_cv.notify_all();
        }
    }

    /// Flushes and compactions inline (when `background_work` is off),
    /// bounded however other threads write: one flush of the memtables
    /// frozen when it begins, then compactions while they are due and no
    /// write came in during the last one. A write from another thread
    /// runs its own work after it, so nothing due is left behind
    /// (`inline_work_tests.rs`).
    pub(crate) fn do_background_work(&self) -> Result<()> {
        self.flush_frozen_now()?;
        self.compact_and_repair_while(self.no_write_since_now())
            .map(|_| ())
    }

    /// A `go_on` for the work loops: true while no write has become
    /// visible since the previous call (the first call compares with the
    /// moment this was made).
    fn no_write_since_now(&self) -> impl Fn() -> bool + '_ {
        let seen = std::cell::Cell::new(self.last_visible.load(Ordering::Acquire));
        move || {
            let now = self.last_visible.load(Ordering::Acquire);
            seen.replace(now) == now
        }
    }

    /// Flushes, compacts and rebalances filters until nothing is left to
    /// do (`Db::wait_for_background_work`). Level budgets count file
    /// sizes, filters included, so settling the filters (under
    /// `Optimized`) can put a level over its budget again, and the
    /// compactions that follow move the filters' targets: rounds go on
    /// until one installs nothing (at most [`SETTLE_ROUNDS`]; a few in
    /// practice, `engine/tests/engine_suite/settle_fixpoint.rs`).
    ///
    /// Writes from other threads meanwhile can leave a flush or a
    /// compaction due after every one, so a round that flushed and
    /// compacted until none was due never ended while they went on
    /// (`engine/tests/engine_suite/wait_under_writes.rs`). So each of those loops goes
    /// on after a step only if no write came in during it: while writes
    /// keep coming every round is bounded, and the rounds bound the wait;
    /// a stray write cuts short only the step it landed in.
    pub(crate) fn settle_background_work(&self) -> Result<()> {
        let no_write_since = self.no_write_since_now();
        for _ in 0..SETTLE_ROUNDS {
            let installs = self.installs.load(Ordering::Acquire);
            self.flush_immutable_while(&no_write_since)?;
            self.compact_and_repair_while(&no_write_since)?;
            self.settle_filters()?;
            if self.installs.load(Ordering::Acquire) == installs {
                return Ok(());
            }
        }
        Ok(())
    }
}
