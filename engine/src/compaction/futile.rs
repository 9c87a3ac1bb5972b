//! Bottommost cleanups that dropped nothing (`DbInner::cleanup_futile`):
//! their outputs are not picked for one again while the oldest live
//! snapshot they were written under is still the oldest, so cleanups
//! cannot loop (`cleanup.rs`).
//!
//! Invariant: every record names a live table. Records change only in an
//! install, under the install lock and before the view swap
//! ([`FutileCleanups::installed`]), so a view at least as new as an
//! install's sees its records, and a picker holding an older view (a
//! snapshot's release takes no compaction lock) cannot drop a record of a
//! table that view does not hold yet.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::version::TableHandle;

/// Table number -> the oldest live snapshot when a cleanup that dropped
/// nothing wrote it (`None`: no snapshot was live).
#[derive(Debug, Default)]
pub(crate) struct FutileCleanups(Mutex<HashMap<u64, Option<u64>>>);

/// What an install changes in the records besides its tables' leaving.
#[derive(Clone, Copy, Default)]
pub(crate) struct FutileEdit<'a> {
    /// The edit's added tables are the outputs of a cleanup that dropped
    /// nothing, under this oldest live snapshot.
    pub(crate) written_under: Option<Option<u64>>,
    /// `(old, new)`: the table numbered `new` is `old`'s entries copied
    /// unchanged (a filter rebuilt as a copy); `old`'s record goes to it.
    pub(crate) copied: &'a [(u64, u64)],
}

impl FutileCleanups {
    /// The numbers of tables not to clean up while `oldest_snapshot` is
    /// the oldest live snapshot.
    pub(crate) fn held_back(&self, oldest_snapshot: Option<u64>) -> HashSet<u64> {
        self.0
            .lock()
            .iter()
            .filter(|(_, under)| **under == oldest_snapshot)
            .map(|(n, _)| *n)
            .collect()
    }

    /// The install of `added` in place of `leaving` (trivial moves and
    /// in-place filter rebuilds included: their number is in both, and
    /// their record stays, the entries being the same). Linear in the
    /// edit. REQUIRES: the install lock is held, and the install's
    /// manifest is durable (the records follow the view, never ahead of
    /// an install that may still fail).
    pub(crate) fn installed(
        &self,
        added: &[Arc<TableHandle>],
        leaving: &[Arc<TableHandle>],
        edit: FutileEdit<'_>,
    ) {
        let mut records = self.0.lock();
        if records.is_empty() && edit.written_under.is_none() {
            return;
        }
        for &(old, new) in edit.copied {
            if let Some(under) = records.remove(&old) {
                records.insert(new, under);
            }
        }
        if !records.is_empty() {
            let staying: HashSet<u64> = added.iter().map(|t| t.meta.number).collect();
            for t in leaving {
                if !staying.contains(&t.meta.number) {
                    records.remove(&t.meta.number);
                }
            }
        }
        if let Some(under) = edit.written_under {
            records.extend(added.iter().map(|t| (t.meta.number, under)));
        }
    }

    /// Every record, by table number.
    #[cfg(test)]
    pub(crate) fn records(&self) -> Vec<(u64, Option<u64>)> {
        let mut records: Vec<_> = self.0.lock().iter().map(|(n, u)| (*n, *u)).collect();
        records.sort_unstable();
        records
    }
}
