//! Filter rebuilds: a table's data blocks copied unchanged under a new
//! number with a new filter, swapped in place of the old table. A rebuilt
//! table keeps its level and sequence range, so it keeps its place in L0.

use std::sync::Arc;

use bloomlsm_sstable::FilterStatus;

use crate::error::Result;
use crate::filter_budget::table_targets;
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::options::FilterPolicy;
use crate::version::TableHandle;

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
        let first = self.rebuild_locked(&policy, |_| true)?;
        let _flush = self.flush_lock.lock();
        let old = std::mem::replace(&mut *self.filter_policy.write(), policy.clone());
        let second = self.rebuild_locked(&policy, |t| {
            !first.iter().any(|done| done.meta.number == t.meta.number)
        });
        if let Err(e) = second {
            *self.filter_policy.write() = old;
            return Err(e);
        }
        Ok(())
    }

    /// Rebuilds (with the live policy) the filters of tables whose filter
    /// block was found damaged (`CorruptFilterPolicy::Rebuild`).
    pub(crate) fn rebuild_damaged_filters(&self) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let policy = self.filter_policy.read().clone();
        self.rebuild_locked(&policy, |t| {
            matches!(t.table.filter_status(), FilterStatus::Unusable(_))
        })?;
        Ok(())
    }

    /// Rebuilds the live tables `select` picks at `policy` (under
    /// `Optimized`, each at its run's share of the tree as it is); returns
    /// the new tables. REQUIRES: the compaction lock is held.
    fn rebuild_locked(
        &self,
        policy: &FilterPolicy,
        select: impl Fn(&TableHandle) -> bool,
    ) -> Result<Vec<Arc<TableHandle>>> {
        let sv = self.current.load_full();
        let jobs: Vec<(Arc<TableHandle>, f64)> =
            table_targets(policy, self.options.filter_kind, &sv.version.levels)
                .into_iter()
                .filter(|(t, _)| select(t))
                .collect();
        self.rebuild_tables_locked(&jobs)
    }

    /// Rebuilds each live table of `jobs` at its bits per key and installs
    /// the copies in place of the originals in one edit; returns the new
    /// tables. On failure nothing is installed and the copies are deleted.
    /// REQUIRES: the compaction lock is held and every table is live.
    pub(crate) fn rebuild_tables_locked(
        &self,
        jobs: &[(Arc<TableHandle>, f64)],
    ) -> Result<Vec<Arc<TableHandle>>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut added = Vec::with_capacity(jobs.len());
        for (old, bits) in jobs {
            match self.tables.rebuild(old, *bits, &self.counters) {
                Ok(t) => added.push(t),
                Err(e) => {
                    discard(&added);
                    return Err(e);
                }
            }
        }
        if let Err(e) = self.tables.sync_dir() {
            discard(&added);
            return Err(e);
        }
        #[cfg(test)]
        self.rebuild_pause.pause();
        let removed: Vec<Arc<TableHandle>> = jobs.iter().map(|(t, _)| Arc::clone(t)).collect();
        // A failed install may still have renamed a manifest naming the new
        // tables into place: they are never deleted here (the next open
        // removes whichever tables its manifest does not name).
        self.install(VersionEdit {
            added: &added,
            removed: &removed,
            flushed: &[],
        })?;
        Ok(added)
    }
}

/// Deletes tables that were written and never offered to an install.
fn discard(tables: &[Arc<TableHandle>]) {
    for t in tables {
        t.mark_obsolete();
    }
}
