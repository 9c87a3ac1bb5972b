//! Installing a new version: the one place that changes which tables are
//! live. Flushes, compactions and filter rebuilds all end here.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::compaction::FutileEdit;
use crate::error::{Error, Result};
use crate::fs::names;
use crate::inner::DbInner;
use crate::manifest::ManifestState;
use crate::memtable::MemTable;
use crate::version::{SuperVersion, TableHandle};

/// One change to the live tables.
#[derive(Default)]
pub(crate) struct VersionEdit<'a> {
    /// New tables (each knows its level).
    pub(crate) added: &'a [Arc<TableHandle>],
    /// Tables they replace; deleted once no reader holds them.
    pub(crate) removed: &'a [Arc<TableHandle>],
    /// The frozen memtables whose contents `added` now holds: they leave
    /// the view in the same swap, and their WALs are deleted.
    pub(crate) flushed: &'a [Arc<MemTable>],
    /// How the records of futile bottommost cleanups change besides
    /// `removed`'s leaving (`compaction/futile.rs`).
    pub(crate) futile: FutileEdit<'a>,
}

impl DbInner {
    /// Makes `edit` durable (manifest), then visible (one swap of the view),
    /// then retires what it replaced. Installs are serialized here; callers
    /// hold the flush or compaction lock that owns their inputs.
    pub(crate) fn install(&self, edit: VersionEdit<'_>) -> Result<()> {
        self.install_moving(edit, &[])
    }

    /// `install`, where the tables `moved_from` also leave their level
    /// while their files stay, named by handles in `edit.added` (a trivial
    /// move): they are never marked obsolete.
    pub(crate) fn install_moving(
        &self,
        edit: VersionEdit<'_>,
        moved_from: &[Arc<TableHandle>],
    ) -> Result<()> {
        let _install = self.install_lock.lock();
        // A panic in here (a bug) may come after the manifest write: the
        // manifest on disk then says what the view does not. So writes stop
        // before any lock is released (this one, and the flush or
        // compaction lock the caller holds): a job started from the view
        // in between could rebuild in place a table the manifest names at
        // its new size, cutting the file back under it
        // (`panic_window_tests.rs`).
        self.stopping_writes_on_panic("install", || self.install_locked(edit, moved_from))
    }

    /// [`Self::install_moving`]. REQUIRES: the install lock is held.
    fn install_locked(&self, edit: VersionEdit<'_>, moved_from: &[Arc<TableHandle>]) -> Result<()> {
        let sv = self.current.load_full();
        let leaving: Vec<Arc<TableHandle>> =
            edit.removed.iter().chain(moved_from).cloned().collect();
        let version = sv
            .version
            .edited(edit.added, &leaving)
            .map_err(|e| Error::Internal(e.to_string()))?;
        let flushed = |m: &Arc<MemTable>| edit.flushed.iter().any(|f| Arc::ptr_eq(f, m));
        // WALs below the oldest memtable still in memory are fully in tables.
        // A rotation meanwhile only adds newer memtables, so this minimum
        // can only be older than the true one: never a WAL too few.
        let oldest_needed = sv
            .imm
            .iter()
            .filter(|m| !flushed(m))
            .chain(std::iter::once(&sv.mem))
            .map(|m| m.wal_number)
            .min()
            .unwrap_or(sv.mem.wal_number);
        #[cfg(test)]
        self.before_manifest_pause.pause();
        let state = ManifestState {
            next_file_number: self.tables.next_file_number(),
            last_seq: self.last_visible.load(Ordering::Acquire),
            wal_number: oldest_needed,
            tables: version.all_metas(),
        };
        if let Err(e) = state.write(self.fs.as_ref(), &self.dir) {
            // The manifest on disk may now be the old or the new one: stop
            // building on a state that is not known to be durable.
            // Under the write lock: not between a write's check and its
            // rotation (`DbInner::stop_writes_outside_writes`).
            self.stop_writes_outside_writes("manifest write", &e);
            return Err(e);
        }
        #[cfg(test)]
        self.after_manifest_pause.pause();
        // Before the swap: a view holding the added tables is never read
        // beside records that do not know them yet.
        self.cleanup_futile
            .installed(edit.added, &leaving, edit.futile);
        self.replace_view(|current| SuperVersion {
            mem: Arc::clone(&current.mem),
            imm: current
                .imm
                .iter()
                .filter(|m| !flushed(m))
                .cloned()
                .collect(),
            version: Arc::new(version),
        });
        self.installs.fetch_add(1, Ordering::AcqRel);
        #[cfg(test)]
        self.install_hook.call(|| {
            let levels = self.current.load().version.levels.clone();
            let keys = crate::filter_budget::keys_per_level(&levels);
            (self.stats(), keys)
        });
        for t in edit.removed {
            t.mark_obsolete();
        }
        if !edit.flushed.is_empty() {
            // Their writes are in durable tables: the close need not fsync
            // these WALs, so their writers close now, not at the next
            // rotation (a quiet store would hold the unlinked files open,
            // their blocks still on disk, `tests/flushed_wal_closed.rs`).
            // `frozen_wals`, not `write`: a write in progress (a large
            // batch, an fsync) does not hold up the install.
            self.frozen_wals
                .lock()
                .retain(|(n, _)| !edit.flushed.iter().any(|m| m.wal_number == *n));
        }
        for mem in edit.flushed {
            // The manifest no longer needs it; a failure leaves an orphan
            // that the next open removes.
            let _ = self.fs.remove(&names::wal(&self.dir, mem.wal_number));
        }
        Ok(())
    }
}
