//! A reader thread beside the run's writer while background work runs:
//! it reads the held snapshots (whose answers are fixed, so each is
//! checked exactly against what the snapshot saw) and the live store
//! (whose answers move, so only what cannot move is checked: never-written
//! keys are absent, a scan is in key order and holds only writable keys,
//! each value is its own key's). Flushes, compactions, filter rebuilds
//! and rebalancing run meanwhile on the store's threads and the writer's.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::keys::{KEYS, UNIVERSE, belongs, beside, key, writable};
use crate::common::{Model, Rng};

use bloomlsm::{Db, Snapshot};

/// A snapshot with what it saw, and the step it was taken at.
pub struct Held {
    pub snapshot: Snapshot,
    pub model: Model,
    pub taken: u64,
}

/// What the writer shares with the reader.
#[derive(Default)]
pub struct Shared {
    pub snapshots: Mutex<Vec<Arc<Held>>>,
    pub stop: AtomicBool,
    /// Reads checked, for the report.
    pub reads: AtomicU64,
}

/// Whether `k` lies within `(lo, hi)`.
pub fn within(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(b) => k >= b.as_slice(),
        Bound::Excluded(b) => k > b.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(b) => k <= b.as_slice(),
        Bound::Excluded(b) => k < b.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// The pairs of `model` within `(lo, hi)`.
pub fn expected(
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| within(k, lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Random scan bounds over the run's key space (a bound may be a key,
/// one beside a key, or a never-written number; the range may be empty
/// or inverted).
pub fn bounds(rng: &mut Rng) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let bound = |rng: &mut Rng| {
        let i = rng.below(UNIVERSE);
        let k = if rng.below(3) == 0 { beside(i) } else { key(i) };
        match rng.below(5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(k),
            _ => Bound::Excluded(k),
        }
    };
    let (a, b) = (bound(rng), bound(rng));
    let inner = |x: &Bound<Vec<u8>>| match x {
        Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    };
    // Mostly in order; an inverted range now and then must yield nothing.
    match (inner(&a), inner(&b)) {
        (Some(x), Some(y)) if x > y && rng.below(4) != 0 => (b, a),
        _ => (a, b),
    }
}

/// Runs until `shared.stop`: reads of the held snapshots and the live
/// store, panicking (the failure report) on a wrong answer.
pub fn read_loop(db: Arc<Db>, shared: Arc<Shared>, seed: u64) {
    let mut rng = Rng(seed ^ 0x00ea_de25);
    while !shared.stop.load(Ordering::Acquire) {
        let held = {
            let snaps = shared.snapshots.lock();
            (!snaps.is_empty()).then(|| Arc::clone(&snaps[rng.below(snaps.len() as u64) as usize]))
        };
        match (held, rng.below(4)) {
            (Some(h), 0 | 1) => {
                let i = rng.below(UNIVERSE);
                let k = if rng.below(4) == 0 { beside(i) } else { key(i) };
                let got = h.snapshot.get(&k).unwrap();
                assert_eq!(
                    got.as_ref(),
                    h.model.get(&k),
                    "reader: get {:?} at the snapshot of step {}",
                    String::from_utf8_lossy(&k),
                    h.taken
                );
            }
            (Some(h), 2) => {
                let (lo, hi) = bounds(&mut rng);
                let got = collected(h.snapshot.scan((lo.clone(), hi.clone())));
                assert!(
                    got == expected(&h.model, &lo, &hi),
                    "reader: scan {lo:?}..{hi:?} at the snapshot of step {}",
                    h.taken
                );
            }
            _ => live_read(&db, &mut rng),
        }
        shared.reads.fetch_add(1, Ordering::Relaxed);
        // Leave the writer and the store's threads the cores.
        std::thread::yield_now();
    }
}

/// A read of the live store, checked for what no write can change.
fn live_read(db: &Db, rng: &mut Rng) {
    if rng.below(2) == 0 {
        let i = rng.below(UNIVERSE);
        let k = if i >= KEYS || rng.below(2) == 0 {
            beside(i)
        } else {
            key(i)
        };
        let got = db.get(&k).unwrap();
        if k.ends_with(b"!") || i >= KEYS {
            assert_eq!(
                got,
                None,
                "reader: never-written {:?}",
                String::from_utf8_lossy(&k)
            );
        } else if let Some(v) = got {
            assert!(
                belongs(&k, &v),
                "reader: {:?} = {:?}",
                String::from_utf8_lossy(&k),
                String::from_utf8_lossy(&v)
            );
        }
        return;
    }
    let (lo, hi) = bounds(rng);
    let mut last: Option<Vec<u8>> = None;
    for r in db.scan((lo.clone(), hi.clone())).unwrap().take(64) {
        let (k, v) = r.unwrap();
        assert!(
            last.as_ref().is_none_or(|l| *l < k),
            "reader: scan {lo:?}..{hi:?} out of order at {:?}",
            String::from_utf8_lossy(&k)
        );
        assert!(
            within(&k, &lo, &hi)
                && if v.is_empty() {
                    writable(&k)
                } else {
                    belongs(&k, &v)
                },
            "reader: scan {lo:?}..{hi:?}: {:?} = {:?}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        );
        last = Some(k);
    }
}

/// Every pair a scan (of the store or a snapshot) yields, in order; a
/// failed scan or step fails the test.
pub(super) fn collected<T, E: std::fmt::Debug>(
    scan: Result<impl Iterator<Item = Result<T, E>>, E>,
) -> Vec<T> {
    scan.unwrap().map(|r| r.unwrap()).collect()
}
