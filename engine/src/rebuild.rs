//! Filter rebuilds: a table's new filter appended to its own file, or its
//! data blocks copied unchanged under a new number with the new filter
//! (`TableFiles::rebuild` chooses), swapped in place of the old table. A
//! rebuilt table keeps its level and sequence range, so it keeps its place
//! in L0.

use std::sync::Arc;

use bloomlsm_sstable::{FilterLoadError, FilterStatus};

use crate::FilterKind;
use crate::compaction::FutileEdit;
use crate::error::Result;
use crate::filter_budget::{Plan, rebuild_targets};
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::options::FilterPolicy;
use crate::version::TableHandle;

/// A live table whose filter is rebuilt, at `bits_per_key` in `kind`:
/// the store's kind, or, for a rebalancing rebuild that lowers a filter
/// of another kind, that kind (`filter_budget::rebalance_pick`).
#[derive(Debug)]
pub(crate) struct RebuildJob {
    pub(crate) table: Arc<TableHandle>,
    pub(crate) bits_per_key: f64,
    pub(crate) kind: FilterKind,
}

impl DbInner {
    /// Rewrites every table's filter to `policy`, then makes it the policy
    /// future tables are written with. Tables flushed while the rebuild
    /// ran (under the old policy) are rebuilt in a second pass, after the
    /// switch; compactions wait for the whole of it, flushes for the switch
    /// and the second pass (so no flush that read the old policy installs
    /// after the second pass chose its tables). On failure the live policy
    /// is the old one again (tables already rebuilt keep their new filters,
    /// which answer for exactly their keys).
    pub(crate) fn rebuild_all_filters(&self, policy: FilterPolicy) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let first = self.rebuild_locked(&policy, false, |_| true)?;
        let _flush = self.flush_lock.lock();
        let old = std::mem::replace(&mut *self.filter_policy.write(), policy.clone());
        // Puts the old policy back unless the second pass succeeds: on its
        // error, and on a panic (caught by `stopping_writes_on_error`'s
        // caller, who must not see the new policy reported as live).
        let mut restore = RestorePolicy {
            slot: &self.filter_policy,
            old: Some(old),
        };
        self.rebuild_locked(&policy, true, |t| {
            !first.iter().any(|done| done.meta.number == t.meta.number)
        })?;
        restore.old = None;
        Ok(())
    }

    /// Rebuilds (with the live policy) the filters of tables whose filter
    /// block is unusable (`CorruptFilterPolicy::Rebuild`): found damaged,
    /// or whose read failed with an I/O error, which lookups also retry
    /// (whichever comes first restores the filter; a rebuild reads the
    /// data blocks, so a bad sector under the filter block heals). Not a
    /// filter whose latest read the allocator refused (`OutOfMemory`): a
    /// rebuild would need as much memory again, so it is left to the
    /// retries.
    pub(crate) fn rebuild_damaged_filters(&self) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let policy = self.filter_policy.read().clone();
        self.rebuild_locked(&policy, false, |t| match t.table.filter_status() {
            // The latest failure decides (the status keeps the open's):
            // a refusal at the open whose retry then met EIO is rebuilt.
            FilterStatus::Unusable(FilterLoadError::Read { .. }) => {
                !t.table.filter_read_refused_memory()
            }
            FilterStatus::Unusable(_) => true,
            FilterStatus::Loaded | FilterStatus::Absent => false,
        })?;
        Ok(())
    }

    /// Rebuilds the live tables `select` picks at `policy` (under
    /// `Optimized`, each at its run's share of the tree as it is, as far
    /// as uniform's bytes pay for it, `rebuild_targets`); returns the new
    /// tables. REQUIRES: the compaction lock is held, and the flush lock
    /// exactly when `flush_held`.
    fn rebuild_locked(
        &self,
        policy: &FilterPolicy,
        flush_held: bool,
        select: impl Fn(&TableHandle) -> bool,
    ) -> Result<Vec<Arc<TableHandle>>> {
        // Most calls (the damaged-filter check of each background cycle)
        // pick no table: they plan nothing and leave the claims alone.
        let live = self.current.load_full();
        if !live.version.levels.iter().flatten().any(|t| select(t)) {
            return Ok(Vec::new());
        }
        let kind = self.options.filter_kind;
        // The policy flushes are planned with meanwhile (the compaction
        // lock, held, is the one under which it changes).
        let live_policy = self.filter_policy.read().clone();
        let mut jobs = Vec::new();
        #[cfg(test)]
        self.rebuild_plan_pause.pause();
        // A flush holds the flush lock from its plan to its install, so
        // with it taken no flush is in flight: a rebuild at fixed bits
        // (`Uniform`, `PerLevel`) cannot give way to a flush's claim on a
        // share the rebuild then fills, and would take the tree past
        // uniform's bytes until the flushed table's own rebuild (1.046 x:
        // `rebuild_budget_tests`). Held for the plan only, not the writes:
        // flushes planned later see this rebuild's claim.
        let flush_in_flight = (!flush_held).then(|| self.flush_lock.lock());
        // The claim is held until the install: writes planned meanwhile
        // see the rebuilt tables' old filters, and must not spend the
        // bytes the new ones will take.
        let (_, _claim) = self.filter_claims.plan(|claimed| {
            let sv = self.current.load_full();
            let (targets, claim_bytes) = rebuild_targets(
                policy,
                &live_policy,
                kind,
                &sv.version.levels,
                &select,
                claimed,
            );
            jobs = targets
                .into_iter()
                .map(|(table, bits_per_key)| RebuildJob {
                    table,
                    bits_per_key,
                    kind,
                })
                .collect();
            Plan {
                claim_bytes,
                ..Plan::unbounded(0.0)
            }
        });
        drop(flush_in_flight);
        self.rebuild_tables_locked(&jobs)
    }

    /// Rebuilds each live table of `jobs` at its bits per key in its kind
    /// and installs the copies in place of the originals in one edit;
    /// returns the new tables. On failure nothing is installed and the copies are deleted.
    /// REQUIRES: the compaction lock is held and every table is live.
    pub(crate) fn rebuild_tables_locked(
        &self,
        jobs: &[RebuildJob],
    ) -> Result<Vec<Arc<TableHandle>>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut added = Vec::with_capacity(jobs.len());
        // Rebuilt as copies under new numbers: replaced, so deleted once no
        // reader holds them.
        let mut copied = Vec::new();
        let mut copies = Vec::new();
        // `(old, copy)` numbers: a copy holds the same entries, so it
        // keeps a futile cleanup's record (`compaction/futile.rs`).
        let mut renumbered = Vec::new();
        // Rebuilt in their own files: they leave the view, their files stay.
        let mut appended_to = Vec::new();
        for job in jobs {
            let old = &job.table;
            match self
                .tables
                .rebuild(old, job.bits_per_key, job.kind, &self.counters)
            {
                Ok(rebuilt) => {
                    if rebuilt.in_place {
                        appended_to.push(Arc::clone(old));
                    } else {
                        copied.push(Arc::clone(old));
                        renumbered.push((old.meta.number, rebuilt.table.meta.number));
                        copies.push(Arc::clone(&rebuilt.table));
                    }
                    added.push(rebuilt.table);
                }
                Err(e) => {
                    discard(&copies);
                    return Err(e);
                }
            }
        }
        if let Err(e) = self.tables.sync_dir() {
            discard(&copies);
            return Err(e);
        }
        #[cfg(test)]
        self.rebuild_pause.pause();
        // A failed install may still have renamed a manifest naming the new
        // tables into place: they are never deleted here (the next open
        // removes whichever tables its manifest does not name).
        self.install_moving(
            VersionEdit {
                added: &added,
                removed: &copied,
                flushed: &[],
                futile: FutileEdit {
                    written_under: None,
                    copied: &renumbered,
                },
            },
            &appended_to,
        )?;
        Ok(added)
    }
}

/// Sets `slot` back to `old` when dropped, unless `old` was taken.
struct RestorePolicy<'a> {
    slot: &'a parking_lot::RwLock<FilterPolicy>,
    old: Option<FilterPolicy>,
}

impl Drop for RestorePolicy<'_> {
    fn drop(&mut self) {
        if let Some(old) = self.old.take() {
            *self.slot.write() = old;
        }
    }
}

/// Deletes tables that were written and never offered to an install.
fn discard(tables: &[Arc<TableHandle>]) {
    for t in tables {
        t.mark_obsolete();
    }
}

#[cfg(test)]
mod panic_tests;
