//! An application developer's trial of the public API, used only as
//! README.md's "Using it" and the rustdoc describe it: every call a new
//! user would make, each result asserted, including the shapes that
//! break stores (narrow tables on many levels, heavy deletes, snapshots
//! held across flushes and compactions, reopen halfway).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod api;
mod deep;
mod filters_and_stats;
mod opening;
mod reads;

use crate::common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bloomlsm::{Db, Error, FilterKind, FilterPolicy, Options, Snapshot, SyncMode, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn in_range(model: &Model, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Vec<(Vec<u8>, Vec<u8>)> {
    if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
        (&range.0, &range.1)
        && s > e
    {
        return Vec::new(); // BTreeMap::range panics here; the store must not.
    }
    if let (Bound::Excluded(s), Bound::Excluded(e)) = (&range.0, &range.1)
        && s == e
    {
        return Vec::new();
    }
    model
        .range(range)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn scan_range(
    scan: impl FnOnce((Bound<Vec<u8>>, Bound<Vec<u8>>)) -> bloomlsm::Result<bloomlsm::DbIter>,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan(range).unwrap().map(|r| r.unwrap()).collect()
}

/// Minimal deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}
