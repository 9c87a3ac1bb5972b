//! Shared by the partial-write sweeps: a workload of puts and deletes that
//! keeps putting, deleting and putting again the same few keys (so their
//! versions and tombstones lie in several levels of a deep tree of narrow
//! tables), a log of what each write returned, and the check that a store
//! holds what that log allows.
#![allow(dead_code)] // Each test binary uses part of it.

use std::collections::BTreeMap;

use bloomlsm::{Db, Options, SyncMode};
use bloomlsm_tests::crash_workload::{Write, small_table_options};

/// A store's contents, or a model of them.
pub type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

/// Distinct keys of the workload: few, so each is written many times.
pub const KEYS: u64 = 401;

/// Write `i`: key `(37 i) mod KEYS`; every fourth write deletes it, the
/// others put a value naming `i`.
pub fn write(i: usize) -> Write {
    let k = format!("key{:03}", (i as u64 * 37) % KEYS).into_bytes();
    if i % 4 == 3 {
        (k, None)
    } else {
        (
            k,
            Some(format!("v{i:05}-{}", "x".repeat(i % 40)).into_bytes()),
        )
    }
}

/// Writes `from..to` of [`write`].
pub fn writes(from: usize, to: usize) -> Vec<Write> {
    (from..to).map(write).collect()
}

/// A deep tree of narrow tables: 2 KiB memtables, 4 KiB tables (large
/// enough that a filter rebuild appends to a table's own file rather than
/// copying it) of 256-byte blocks, a 1 KiB L1 and a size ratio of 2 (a
/// few hundred writes reach four levels), L0 compacted at 2 tables, work
/// done inline so that a crash point names the same operation every run.
pub fn deep_options(sync: SyncMode) -> Options {
    Options {
        sync,
        memtable_bytes: 2048,
        target_file_bytes: 4096,
        block_size: 256,
        l1_bytes: 1024,
        level_size_ratio: 2,
        ..small_table_options()
    }
}

/// What each write of a session returned, in order.
#[derive(Default, Clone)]
pub struct Log {
    /// The write and whether it returned `Ok`.
    pub entries: Vec<(Write, bool)>,
}

impl Log {
    /// Applies `w` to `db` and logs what it returned.
    pub fn apply(&mut self, db: &Db, w: &Write) -> bool {
        let ok = match &w.1 {
            Some(v) => db.put(&w.0, v),
            None => db.delete(&w.0),
        }
        .is_ok();
        self.entries.push((w.clone(), ok));
        ok
    }

    /// Entries up to and including the last acknowledged one.
    pub fn through_last_ack(&self) -> usize {
        self.entries
            .iter()
            .rposition(|(_, ok)| *ok)
            .map_or(0, |i| i + 1)
    }

    /// The store after the first `n` entries applied over `base`: every
    /// acknowledged write, and the first failed one only when `failed`
    /// (a write that failed after its record reached the WAL, at its
    /// fsync, may be recovered; a later one was never logged, since a
    /// failed WAL append or fsync stops writes).
    pub fn model(&self, base: &Contents, n: usize, failed: bool) -> Contents {
        let mut m = base.clone();
        let first_failed = self.entries.iter().position(|(_, ok)| !*ok);
        for (i, ((k, v), ok)) in self.entries.iter().take(n).enumerate() {
            if *ok || (failed && Some(i) == first_failed) {
                match v {
                    Some(v) => m.insert(k.clone(), v.clone()),
                    None => m.remove(k),
                };
            }
        }
        m
    }

    /// The model `got` equals: the first `n >= durable` entries over
    /// `base`, the first failed write with them or not (`true` when only
    /// with it). `None` if none (an acknowledged write lost, an older
    /// version or a deleted key back, a refused write applied).
    pub fn matching(
        &self,
        base: &Contents,
        got: &Contents,
        durable: usize,
    ) -> Option<(Contents, bool)> {
        (durable..=self.entries.len())
            .rev()
            .flat_map(|n| [(n, false), (n, true)])
            .map(|(n, failed)| (self.model(base, n, failed), failed))
            .find(|(m, _)| m == got)
    }
}

/// The store's contents by a full scan, after checking that a get of
/// every key the workload writes agrees with it (no filter false
/// negative, no older version found by a get that the scan hides).
pub fn checked_contents(db: &Db, what: &str) -> Contents {
    let got = bloomlsm_tests::contents(db);
    for k in 0..KEYS {
        let key = format!("key{k:03}").into_bytes();
        assert_eq!(
            db.get(&key)
                .unwrap_or_else(|e| panic!("{what}: get failed: {e}")),
            got.get(&key).cloned(),
            "{what}: get and scan disagree on {}",
            String::from_utf8_lossy(&key)
        );
    }
    got
}
