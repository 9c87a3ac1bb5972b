//! K-way merge of cursors into one cursor in table order, without copying
//! an entry: the merged cursor lends the entry of whichever input is
//! smallest.

use std::cmp::Ordering;

use bloomlsm_sstable::{EntryKind, compare_keys};

use crate::cursor::EntryCursor;
use crate::error::Result;

/// Merges cursors that are each in table order. Entries with the same user
/// key and sequence (which a store never writes twice) come out in input
/// order.
pub(crate) struct MergingCursor<'a> {
    inputs: Vec<Box<dyn EntryCursor + 'a>>,
    /// A binary min-heap of the indexes of the inputs still on an entry,
    /// ordered by `less`; `heap[0]` is the input under the cursor.
    heap: Vec<usize>,
    started: bool,
}

impl<'a> MergingCursor<'a> {
    pub(crate) fn new(inputs: Vec<Box<dyn EntryCursor + 'a>>) -> Self {
        Self {
            heap: Vec::with_capacity(inputs.len()),
            inputs,
            started: false,
        }
    }

    /// Input `a`'s entry sorts before input `b`'s (ties by input order).
    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.inputs[a], &self.inputs[b]);
        match compare_keys(x.user_key(), x.seq(), y.user_key(), y.seq()) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a < b,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut smallest = i;
            if l < self.heap.len() && self.less(self.heap[l], self.heap[smallest]) {
                smallest = l;
            }
            if r < self.heap.len() && self.less(self.heap[r], self.heap[smallest]) {
                smallest = r;
            }
            if smallest == i {
                return;
            }
            self.heap.swap(i, smallest);
            i = smallest;
        }
    }

    fn top(&self) -> Option<&(dyn EntryCursor + 'a)> {
        self.heap.first().map(|&i| self.inputs[i].as_ref())
    }
}

impl EntryCursor for MergingCursor<'_> {
    fn advance(&mut self) -> Result<bool> {
        if !self.started {
            self.started = true;
            for i in 0..self.inputs.len() {
                if self.inputs[i].advance()? {
                    self.heap.push(i);
                }
            }
            for i in (0..self.heap.len() / 2).rev() {
                self.sift_down(i);
            }
            return Ok(!self.heap.is_empty());
        }
        let Some(&top) = self.heap.first() else {
            return Ok(false);
        };
        if !self.inputs[top].advance()? {
            self.heap.swap_remove(0);
        }
        self.sift_down(0);
        Ok(!self.heap.is_empty())
    }
    fn user_key(&self) -> &[u8] {
        self.top().map_or(&[], |c| c.user_key())
    }
    fn seq(&self) -> u64 {
        self.top().map_or(0, |c| c.seq())
    }
    fn kind(&self) -> EntryKind {
        self.top().map_or(EntryKind::Delete, |c| c.kind())
    }
    fn value(&self) -> &[u8] {
        self.top().map_or(&[], |c| c.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::tests::VecCursor;
    use proptest::prelude::*;

    proptest! {
        /// The merge of random sorted inputs is their sorted union, in
        /// table order.
        #[test]
        fn merge_is_the_sorted_union(inputs in proptest::collection::vec(
            proptest::collection::btree_set((0u8..20, 0u64..50), 0..30), 0..6)) {
            let mut expected: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut cursors: Vec<Box<dyn EntryCursor>> = Vec::new();
            // Sequence numbers are unique across inputs, as in a store.
            for (n, set) in inputs.iter().enumerate() {
                let mut entries: Vec<(Vec<u8>, u64)> = set
                    .iter()
                    .map(|&(k, s)| (vec![k], s * 8 + n as u64))
                    .collect();
                entries.sort_by(|a, b| compare_keys(&a.0, a.1, &b.0, b.1));
                expected.extend(entries.iter().cloned());
                cursors.push(Box::new(VecCursor::puts(entries)));
            }
            expected.sort_by(|a, b| compare_keys(&a.0, a.1, &b.0, b.1));
            let mut m = MergingCursor::new(cursors);
            let mut got = Vec::new();
            while m.advance().unwrap() {
                got.push((m.user_key().to_vec(), m.seq()));
            }
            prop_assert!(!m.advance().unwrap());
            prop_assert_eq!(got, expected);
        }
    }
}
