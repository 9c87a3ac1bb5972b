//! [`DbIter`]: the pairs of a scan.

use std::sync::Arc;

use crate::error::Result;
use crate::inner::DbInner;
use crate::merge::{MergingIter, VisibleIter};
use crate::version::SuperVersion;

/// Pairs of a scan, in key order. Holds the tables it reads alive; yields
/// [`Error::Closed`](crate::Error::Closed) once the store is closed.
pub struct DbIter {
    inner: VisibleIter<MergingIter>,
    _view: Arc<SuperVersion>,
    store: Arc<DbInner>,
    /// Set once the scan has ended (`None`) or reported `Closed`: every
    /// later `next` is `None`.
    done: bool,
}

impl DbIter {
    pub(crate) fn new(
        inner: VisibleIter<MergingIter>,
        view: Arc<SuperVersion>,
        store: Arc<DbInner>,
    ) -> Self {
        Self {
            inner,
            _view: view,
            store,
            done: false,
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
        if self.done {
            return None;
        }
        if let Err(e) = self.store.check_open() {
            self.done = true;
            return Some(Err(e));
        }
        let next = self.inner.next();
        // An iterator that has ended stays ended, a closed store or not.
        self.done = next.is_none();
        next
    }
}

/// Once `next` has returned `None` it always does (and so after the one
/// `Err(Closed)` a read past `close` gives).
impl std::iter::FusedIterator for DbIter {}
