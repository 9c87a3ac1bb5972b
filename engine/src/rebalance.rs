//! Moving filter budgets: each write's filters are planned against the
//! live tree (and the claims of the other writes in flight), and, when a
//! level's budget moves, the filters of its existing tables are rebuilt in
//! the background, one table per background cycle, through the same
//! rebuild and install as `Db::rebuild_filters` (a rebuilt table keeps its
//! level and sequence range, so it keeps its place in L0).

use std::sync::atomic::Ordering;

use crate::counters::Counters;
use crate::error::Result;
use crate::filter_budget::{
    ClaimGuard, HEADROOM_BITS, Plan, PlannedWrite, Tolerance, plan_write, rebalance_pick,
};
use crate::inner::DbInner;

/// A background cycle rebuilds a filter only this far off its target:
/// budgets move a little with every write, and each rebuild reads its whole
/// table (to hash its keys) and leaves the replaced filter's bytes unused
/// in the file (copying the table once they pass an eighth of it).
pub(crate) const BACKGROUND_TOLERANCE: Tolerance = Tolerance {
    over: 0.5,
    under: 1.0,
};

/// `Db::wait_for_background_work` brings every filter this close to its
/// target (the tree stands still meanwhile, so this ends). `over` is
/// covered by the optimum's headroom (`HEADROOM_BITS`).
pub(crate) const SETTLED_TOLERANCE: Tolerance = Tolerance {
    over: HEADROOM_BITS,
    under: 0.1,
};

impl DbInner {
    /// Bits per key for `write`, and its claim on the filter budget, held
    /// until the guard drops: drop it after the write's install (or its
    /// failure).
    pub(crate) fn plan_filters(&self, write: PlannedWrite<'_>) -> (Plan, ClaimGuard<'_>) {
        let policy = self.filter_policy.read().clone();
        let kind = self.options.filter_kind;
        self.filter_claims.plan(|claimed| {
            let sv = self.current.load_full();
            plan_write(&policy, kind, &sv.version.levels, write, claimed)
        })
    }

    /// Rebuilds the filter of the one table furthest from its level's
    /// budget by more than `tolerance`; returns whether it
    /// rebuilt one. Filters over budget are lowered before any is raised,
    /// and a raise never takes the store past uniform's memory. Takes the
    /// compaction lock (rebuilds remove tables).
    pub(crate) fn rebalance_filters_step(&self, tolerance: Tolerance) -> Result<bool> {
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let installs = self.installs.load(Ordering::Acquire);
        if tolerance == BACKGROUND_TOLERANCE
            && self.rebalanced_at.load(Ordering::Acquire) == installs
        {
            return Ok(false);
        }
        let policy = self.filter_policy.read().clone();
        let kind = self.options.filter_kind;
        let mut chosen = None;
        let (plan, _claim) = self.filter_claims.plan(|claimed| {
            let sv = self.current.load_full();
            match rebalance_pick(&policy, kind, &sv.version.levels, claimed, tolerance) {
                Some((table, plan)) => {
                    chosen = Some(table);
                    plan
                }
                None => Plan::unbounded(0.0),
            }
        });
        let Some(table) = chosen else {
            if tolerance == BACKGROUND_TOLERANCE {
                self.rebalanced_at.store(installs, Ordering::Release);
            }
            return Ok(false);
        };
        self.rebuild_tables_locked(&[(table, plan.bits_per_key)])?;
        Counters::add(&self.counters.filters_rebalanced, 1);
        Ok(true)
    }

    /// Rebalances until every filter is within [`SETTLED_TOLERANCE`]
    /// of its target, or a bound of rebuilds is reached (each pass moves
    /// one table; a tree of n tables settles in about n, as lowering comes
    /// first and raising only spends what is free).
    pub(crate) fn settle_filters(&self) -> Result<()> {
        let tables = self.current.load().version.levels.iter().flatten().count();
        for _ in 0..(3 * tables + 8) {
            if !self.rebalance_filters_step(SETTLED_TOLERANCE)? {
                break;
            }
        }
        Ok(())
    }
}
