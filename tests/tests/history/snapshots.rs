//! A snapshot held across flushes, compactions and filter rebuilds: what it
//! read when taken (gets of scattered keys and one range scan), checked
//! against the histories, and re-read later, which must give exactly the
//! same answers (repeatable read).

use std::collections::HashMap;
use std::time::Instant;

use bloomlsm::{Db, Snapshot};

use super::rng::Mix;
use super::verify::{bounds, check_range, collect_scan, reads_of};
use super::{History, KEYS, key};

/// A snapshot and what it answered when taken.
pub struct Held {
    snapshot: Snapshot,
    keys: Vec<u64>,
    gets: Vec<Option<Vec<u8>>>,
    range: (u64, u64),
    scan: Vec<Option<Vec<u8>>>,
    /// The smallest version each key read can be.
    pub floors: HashMap<u64, u64>,
    /// When to release it.
    pub until: Instant,
}

impl Held {
    /// Takes a snapshot and checks its first reading. `older` are live
    /// snapshots taken before: this one sees no key older than they did.
    pub fn take(
        db: &Db,
        history: &History,
        rng: &mut Mix,
        older: &[Held],
        until: Instant,
    ) -> Result<Self, String> {
        let keys: Vec<u64> = (0..32).map(|_| rng.below(KEYS)).collect();
        let from = rng.below(KEYS);
        let to = (from + 1 + rng.below(300)).min(KEYS);
        let floor = |k: u64, acked: u64| {
            older
                .iter()
                .filter_map(|h| h.floors.get(&k))
                .fold(acked, |a, &b| a.max(b))
        };
        let lo_keys: Vec<u64> = keys.iter().map(|&k| floor(k, history.acked(k))).collect();
        let lo_range: Vec<u64> = (from..to).map(|k| floor(k, history.acked(k))).collect();
        let snapshot = db.snapshot();
        let hi_keys: Vec<u64> = keys.iter().map(|&k| history.started(k)).collect();
        let hi_range = history.started_range(from, to);
        let what = format!("snapshot at {}", snapshot.sequence());

        let gets: Vec<Option<Vec<u8>>> = keys
            .iter()
            .map(|&k| snapshot.get(&key(k)).unwrap())
            .collect();
        let scan = collect_scan(
            snapshot.scan(bounds(rng, from, to)).unwrap(),
            from,
            to,
            &what,
        )?;
        let mut floors = HashMap::new();
        let mut reads = Vec::new();
        for (i, (&k, got)) in keys.iter().zip(&gets).enumerate() {
            let v = history.check(
                k,
                got.as_deref(),
                lo_keys[i],
                hi_keys[i],
                &format!("{what} get"),
            )?;
            floors.insert(k, v);
            reads.push((k, got.as_ref().map(|_| v)));
            if (from..to).contains(&k) && scan[(k - from) as usize] != *got {
                return Err(format!("{what}: key {k}: its get and its scan disagree"));
            }
        }
        let versions = check_range(
            history,
            &scan,
            from,
            &lo_range,
            &hi_range,
            &format!("{what} scan"),
        )?;
        reads.extend(reads_of(from, &scan, &versions));
        history.check_cut(&reads, &what)?;
        for (i, v) in versions.into_iter().enumerate() {
            floors.insert(from + i as u64, v);
        }
        Ok(Self {
            snapshot,
            keys,
            gets,
            range: (from, to),
            scan,
            floors,
            until,
        })
    }

    /// Reads everything again: the same answers, or an error saying what changed.
    pub fn reread(&self, rng: &mut Mix) -> Result<(), String> {
        let what = format!("snapshot at {} re-read", self.snapshot.sequence());
        for (&k, was) in self.keys.iter().zip(&self.gets) {
            let now = self.snapshot.get(&key(k)).unwrap();
            if now != *was {
                return Err(format!(
                    "{what}: key {k} read {:?}, first {:?}",
                    now.as_deref().map(String::from_utf8_lossy),
                    was.as_deref().map(String::from_utf8_lossy)
                ));
            }
        }
        let (from, to) = self.range;
        let now = collect_scan(
            self.snapshot.scan(bounds(rng, from, to)).unwrap(),
            from,
            to,
            &what,
        )?;
        if let Some(i) = (0..now.len()).find(|&i| now[i] != self.scan[i]) {
            return Err(format!(
                "{what}: scan of {from}..{to} gives key {} {:?}, first {:?}",
                from + i as u64,
                now[i].as_deref().map(String::from_utf8_lossy),
                self.scan[i].as_deref().map(String::from_utf8_lossy)
            ));
        }
        Ok(())
    }

    /// The snapshot itself.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}
