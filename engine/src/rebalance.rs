//! Moving filter budgets: each write's filters are planned against the
//! live tree (and the claims of the other writes in flight), and, when a
//! level's budget moves, the filters of its existing tables are rebuilt in
//! the background, one table per background cycle, through the same
//! rebuild and install as `Db::rebuild_filters` (a rebuilt table keeps its
//! level and sequence range, so it keeps its place in L0).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::counters::Counters;
use crate::error::Result;
use crate::filter_budget::{
    ClaimGuard, HEADROOM_BITS, Plan, PlannedWrite, Rebuild, Tolerance, install_excess_bytes,
    lowering_pick, plan_write, rebalance_pick, tree_past_uniform_bytes,
};
use crate::inner::DbInner;
use crate::rebuild::RebuildJob;
use crate::version::TableHandle;
use crate::{FilterKind, FilterPolicy};

/// What one step of a room-making loop did (`DbInner::lower_one`).
enum Lowered {
    /// Lowered one filter.
    One,
    /// No bytes needed, or no filter left to lower.
    Nothing,
    /// The store began to shut down while bytes were still needed.
    ShuttingDown,
}

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
        let rebuilt = self.rebalance_one_locked(|claimed, levels| {
            rebalance_pick(&policy, kind, levels, claimed, tolerance)
        })?;
        if !rebuilt && tolerance == BACKGROUND_TOLERANCE {
            self.rebalanced_at.store(installs, Ordering::Release);
        }
        Ok(rebuilt)
    }

    /// Plans `write` (as `plan_filters`), first lowering filters (none of
    /// `write`'s removed tables) while its install would take the tree
    /// past uniform's bytes (`Plan::past_uniform_bytes`): first those over
    /// their target, most bits freed first, then those above their uniform
    /// share, toward it (`lowering_pick`). When narrow tables whose filters
    /// left part of their share unused merge into one whose share is
    /// smaller (whole blocks fewer, or a cheaper kind), the tables that
    /// were over their share on the strength of that unused share would be
    /// over uniform once it is gone, and no plan of the write itself can
    /// give it back (40 narrow Ribbon tables compacted after a reopen as
    /// Standard took a tree at uniform to 1.156 x,
    /// `filter_allowance_tests.rs`). Each such rebuild only frees bytes, so
    /// this ends; once no filter that stays is above its share, the tables
    /// that stay are within uniform. The plan that ends the loop is the
    /// one returned, claimed in the same step: a flush (which never takes
    /// the compaction lock) planned after the last lowering sees the
    /// removed tables live and spends the room the lowerings made, and a
    /// plan taken after a separate check went past uniform by that much
    /// (four flushes: 1.051 x, `filter_allowance_tests.rs`).
    /// `None` once the store shuts down (`Db::close` waits for this
    /// thread, and each lowering reads a whole table): the write is given
    /// up, as a plan still past uniform would take the tree there.
    /// REQUIRES: the compaction lock is held and the removed tables are
    /// live.
    pub(crate) fn lower_and_plan_filters(
        &self,
        write: PlannedWrite<'_>,
    ) -> Result<Option<(Plan, ClaimGuard<'_>)>> {
        let policy = self.filter_policy.read().clone();
        let kind = self.options.filter_kind;
        for _ in 0..self.lowerings_bound() {
            let (plan, claim) = self.plan_filters(write);
            if plan.past_uniform_bytes == 0 {
                return Ok(Some((plan, claim)));
            }
            drop(claim);
            let lowered = self.lower_one(&policy, kind, write.removed, |claimed, levels| {
                plan_write(&policy, kind, levels, write, claimed).past_uniform_bytes
            })?;
            match lowered {
                Lowered::One => {}
                Lowered::Nothing => break,
                Lowered::ShuttingDown => return Ok(None),
            }
            #[cfg(test)]
            self.lowered_pause.pause();
        }
        Ok(Some(self.plan_filters(write)))
    }

    /// Claims, once `write`'s tables `added` are written and before their
    /// install, what that install adds to the tree's excess over uniform
    /// beyond `plan`'s claim, counted from the filters written
    /// (`install_excess_bytes`), and, while that takes the tree (with the
    /// claims) past uniform, lowers filters (none of `write`'s removed
    /// tables) as `lower_and_plan_filters` does, by at most that much: an
    /// excess that is not this write's doing is rebalancing's. The plan
    /// prices the write as one filter over all its keys and, below its
    /// own share, has its tables give back the share its removed tables'
    /// filters left unused; narrow tables already at the smallest filter
    /// (one block, their whole share) give nothing back, so such an
    /// install raised the excess by that unused share with a claim of 0,
    /// and compaction after compaction took the tree past 1.02 x uniform
    /// (`filter_allowance_tests.rs`). Drop the returned claim after the
    /// install. `None` once the store shuts down while lowerings are due
    /// (as `lower_and_plan_filters`): the tables are not to be installed.
    /// REQUIRES: the compaction lock is held and the removed tables are
    /// live.
    pub(crate) fn claim_written(
        &self,
        write: PlannedWrite<'_>,
        plan: &Plan,
        added: &[Arc<TableHandle>],
    ) -> Result<Option<ClaimGuard<'_>>> {
        let policy = self.filter_policy.read().clone();
        let kind = self.options.filter_kind;
        let adds = install_excess_bytes(&policy, kind, added, write.removed);
        let extra = u64::try_from(adds)
            .unwrap_or(0)
            .saturating_sub(plan.claim_bytes);
        let claim = self.filter_claims.claim(extra);
        if extra == 0 {
            return Ok(Some(claim));
        }
        for _ in 0..self.lowerings_bound() {
            let lowered = self.lower_one(&policy, kind, write.removed, |claimed, levels| {
                tree_past_uniform_bytes(&policy, kind, levels, claimed).min(extra)
            })?;
            match lowered {
                Lowered::One => {}
                Lowered::Nothing => break,
                Lowered::ShuttingDown => return Ok(None),
            }
        }
        Ok(Some(claim))
    }

    /// How many filters a room-making loop lowers at most: every live
    /// table twice (over its target, to it; then above its share, toward
    /// it). Each lowering frees bytes, so the loops end before this
    /// unless lowerings keep meeting new tables.
    fn lowerings_bound(&self) -> usize {
        2 * self.current.load().version.levels.iter().flatten().count() + 1
    }

    /// One step of a room-making loop: lowers the filter `lowering_pick`
    /// chooses (none of `removed`; claiming nothing) to free `need` bytes,
    /// as the live tree and the claims stand when it picks.
    /// REQUIRES: the compaction lock is held.
    fn lower_one(
        &self,
        policy: &FilterPolicy,
        kind: FilterKind,
        removed: &[Arc<TableHandle>],
        need: impl FnOnce(u64, &[Vec<Arc<TableHandle>>]) -> u64,
    ) -> Result<Lowered> {
        let mut shutting_down = false;
        let rebuilt = self.rebalance_one_locked(|claimed, levels| {
            let need = need(claimed, levels);
            if need == 0 {
                return None;
            }
            shutting_down = self.shutting_down();
            if shutting_down {
                return None;
            }
            lowering_pick(
                policy,
                kind,
                levels,
                claimed,
                SETTLED_TOLERANCE.over,
                need,
                removed,
            )
        })?;
        Ok(match (shutting_down, rebuilt) {
            (true, _) => Lowered::ShuttingDown,
            (false, true) => Lowered::One,
            (false, false) => Lowered::Nothing,
        })
    }

    /// Rebuilds the filter `pick` chooses from the live tree and the
    /// claims of the writes in flight, with its claim held until the
    /// install; returns whether it rebuilt one.
    /// REQUIRES: the compaction lock is held.
    fn rebalance_one_locked(
        &self,
        pick: impl FnOnce(u64, &[Vec<Arc<TableHandle>>]) -> Option<Rebuild>,
    ) -> Result<bool> {
        let mut chosen = None;
        let (plan, _claim) = self.filter_claims.plan(|claimed| {
            let sv = self.current.load_full();
            match pick(claimed, &sv.version.levels) {
                Some(r) => {
                    let plan = r.plan;
                    chosen = Some(r);
                    plan
                }
                None => Plan::unbounded(0.0),
            }
        });
        let Some(r) = chosen else {
            return Ok(false);
        };
        self.rebuild_tables_locked(&[RebuildJob {
            table: r.table,
            bits_per_key: plan.bits_per_key,
            kind: r.kind,
        }])?;
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
