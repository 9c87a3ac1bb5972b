//! Filter rebuilds: a table's data blocks copied unchanged under a new
//! number with a new filter, swapped in place of the old table. A rebuilt
//! table keeps its level and sequence range, so it keeps its place in L0.

use std::sync::Arc;

use bloomlsm_sstable::FilterStatus;

use crate::error::Result;
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::options::{FilterPolicy, table_bits_per_key};
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

    /// Rebuilds the live tables `select` picks at `policy`; returns the new
    /// tables. REQUIRES: the compaction lock is held.
    fn rebuild_locked(
        &self,
        policy: &FilterPolicy,
        select: impl Fn(&TableHandle) -> bool,
    ) -> Result<Vec<Arc<TableHandle>>> {
        let sv = Arc::clone(&self.current.read());
        let chosen: Vec<Arc<TableHandle>> = sv
            .version
            .levels
            .iter()
            .flatten()
            .filter(|t| select(t))
            .cloned()
            .collect();
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        let mut added = Vec::with_capacity(chosen.len());
        for old in &chosen {
            let bits =
                table_bits_per_key(policy, &self.options, &sv.version.levels, old.meta.level);
            match self.tables.rebuild(old, bits, &self.counters) {
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
        // A failed install may still have renamed a manifest naming the new
        // tables into place: they are never deleted here (the next open
        // removes whichever tables its manifest does not name).
        self.install(VersionEdit {
            added: &added,
            removed: &chosen,
            flushed: None,
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
