//! The threads of the timed stress: writers, readers of the live store,
//! snapshot holders, and a maintainer rebuilding filters and flushing.
//! Each runs until `stop` and returns what it did, or the first wrong
//! answer it saw.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bloomlsm::Db;

use super::History;
use super::rng::Mix;
use super::shape::{policy, sorted_levels_in_use};
use super::snapshots::Held;
use super::verify::{Collected, bounds, check_range, collect_scan, reads_of};
use super::write::{Owned, write_some};
use super::{KEYS, key};

/// Writes until `stop`; returns the operations written.
pub fn writer(db: &Db, history: &History, mut rng: Mix, owned: Owned, stop: &AtomicBool) -> u64 {
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        ops += write_some(db, history, &mut rng, owned) as u64;
    }
    ops
}

/// Gets and range scans of the live store until `stop`: each key read is
/// at a version no older than the last acknowledged before the read began
/// nor than what this thread read before, and no newer than one begun.
/// A reader also keeps one scan open across many of its other reads (so
/// across flushes, compactions and filter rebuilds), a few pairs at a time.
pub fn reader(db: &Db, history: &History, mut rng: Mix, stop: &AtomicBool) -> Result<u64, String> {
    let mut floor = vec![0u64; KEYS as usize];
    let mut reads = 0;
    let mut slow: Option<SlowScan> = None;
    while !stop.load(Ordering::Relaxed) {
        let scan = match slow.take() {
            Some(scan) => scan,
            None => SlowScan::start(db, history, &mut rng, &floor),
        };
        slow = scan.step(history, &mut floor)?;
        if rng.chance(0.7) {
            let k = rng.below(KEYS);
            let lo = history.acked(k).max(floor[k as usize]);
            let got = db.get(&key(k)).unwrap();
            let hi = history.started(k);
            floor[k as usize] = history.check(k, got.as_deref(), lo, hi, "get")?;
        } else {
            let from = rng.below(KEYS);
            let to = (from + 1 + rng.below(400)).min(KEYS);
            let lo: Vec<u64> = (from..to)
                .map(|k| history.acked(k).max(floor[k as usize]))
                .collect();
            let got = collect_scan(
                db.scan(bounds(&mut rng, from, to)).unwrap(),
                from,
                to,
                "scan",
            )?;
            let hi = history.started_range(from, to);
            let versions = check_range(history, &got, from, &lo, &hi, "scan")?;
            history.check_cut(&reads_of(from, &got, &versions), "scan")?;
            floor[from as usize..to as usize].copy_from_slice(&versions);
        }
        reads += 1;
    }
    Ok(reads)
}

/// Holds up to three snapshots at a time, each for 50 to 800 ms, re-reading
/// one after another; flushes (and settles) now and then so they outlive
/// memtables.
/// Returns the re-reads made.
pub fn snapshot_holder(
    db: &Db,
    history: &History,
    mut rng: Mix,
    stop: &AtomicBool,
) -> Result<u64, String> {
    let mut held: Vec<Held> = Vec::new();
    let mut rereads = 0;
    while !stop.load(Ordering::Relaxed) {
        if held.len() < 3 && (held.is_empty() || rng.chance(0.2)) {
            let until = Instant::now() + Duration::from_millis(50 + rng.below(750));
            let h = Held::take(db, history, &mut rng, &held, until)?;
            held.push(h);
        }
        let i = rng.below(held.len() as u64) as usize;
        held[i].reread(&mut rng)?;
        rereads += 1;
        if rng.chance(0.05) {
            db.flush().unwrap();
        } else if rng.chance(0.01) {
            // Settles (rebalancing filters, cleaning the bottom) while the
            // maintainer may be settling or rebuilding too.
            db.wait_for_background_work().unwrap();
        }
        let now = Instant::now();
        held.retain(|h| h.until > now);
    }
    for h in &held {
        h.reread(&mut rng)?;
    }
    Ok(rereads)
}

/// Rebuilds every filter at changing policies and flushes until `stop`,
/// settling the background work now and then (racing the writers: it
/// rebalances filters under `Optimized`). Returns the most levels below
/// L0 seen in use at once and the rebuilds made.
pub fn maintainer(db: &Db, mut rng: Mix, stop: &AtomicBool) -> (usize, u64) {
    let mut deepest = 0;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        db.rebuild_filters(policy(&mut rng)).unwrap();
        deepest = deepest.max(sorted_levels_in_use(db));
        db.flush().unwrap();
        if n % 5 == 4 {
            db.wait_for_background_work().unwrap();
        }
        deepest = deepest.max(sorted_levels_in_use(db));
        n += 1;
    }
    (deepest, n)
}

/// A live scan kept open across other reads.
struct SlowScan {
    iter: bloomlsm::DbIter,
    collected: Collected,
    from: u64,
    /// Per key, the floor when the scan began.
    lo: Vec<u64>,
}

impl SlowScan {
    fn start(db: &Db, history: &History, rng: &mut Mix, floor: &[u64]) -> Self {
        let from = rng.below(KEYS);
        let to = (from + 1 + rng.below(KEYS / 2)).min(KEYS);
        let lo = (from..to)
            .map(|k| history.acked(k).max(floor[k as usize]))
            .collect();
        Self {
            iter: db.scan(bounds(rng, from, to)).unwrap(),
            collected: Collected::new(from, to),
            from,
            lo,
        }
    }

    /// Reads up to 4 more pairs; at the end checks the whole range and
    /// returns `None`.
    fn step(mut self, history: &History, floor: &mut [u64]) -> Result<Option<Self>, String> {
        for _ in 0..4 {
            match self.iter.next() {
                Some(item) => self.collected.push(item, "slow scan")?,
                None => {
                    let to = self.from + self.lo.len() as u64;
                    let hi = history.started_range(self.from, to);
                    let got = &self.collected.got;
                    let versions =
                        check_range(history, got, self.from, &self.lo, &hi, "slow scan")?;
                    history.check_cut(&reads_of(self.from, got, &versions), "slow scan")?;
                    // It read as of its start: other reads since may know more.
                    for (f, v) in floor[self.from as usize..to as usize]
                        .iter_mut()
                        .zip(versions)
                    {
                        *f = (*f).max(v);
                    }
                    return Ok(None);
                }
            }
        }
        Ok(Some(self))
    }
}
