//! [`DbIter`]: the pairs of a scan.

use std::sync::Arc;

use crate::error::Result;
use crate::inner::DbInner;
use crate::merge::{MergingIter, VisibleIter};
use crate::version::SuperVersion;

/// Pairs of a scan, in key order. Holds the tables it reads alive until it
/// ends (or is dropped); yields [`Error::Closed`](crate::Error::Closed)
/// once the store is closed, and then ends.
pub struct DbIter {
    /// The merge and the view whose tables it reads; `None` once the scan
    /// has ended or reported `Closed`: every later `next` is `None`, and
    /// the tables (their files, deleted ones included) and memtables are
    /// let go then, not when the iterator drops.
    reading: Option<(VisibleIter<MergingIter>, Arc<SuperVersion>)>,
    store: Arc<DbInner>,
}

impl DbIter {
    pub(crate) fn new(
        inner: VisibleIter<MergingIter>,
        view: Arc<SuperVersion>,
        store: Arc<DbInner>,
    ) -> Self {
        Self {
            reading: Some((inner, view)),
            store,
        }
    }
}

impl std::fmt::Debug for DbIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter").finish_non_exhaustive()
    }
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (inner, _view) = self.reading.as_mut()?;
        if let Err(e) = self.store.check_open() {
            self.reading = None;
            return Some(Err(e));
        }
        let next = inner.next();
        // An iterator that has ended stays ended, a closed store or not.
        if next.is_none() {
            self.reading = None;
        }
        next
    }
}

/// Once `next` has returned `None` it always does (and so after the one
/// `Err(Closed)` a read past `close` gives).
impl std::iter::FusedIterator for DbIter {}
