//! Reads made at one point in time (a snapshot's, or one scan's) see a
//! consistent cut of the writes: each writer's writes follow one another,
//! so the store at any sequence holds a prefix of each writer's writes,
//! and never part of a batch (a version a batch overwrote within itself
//! is never seen).

use super::History;

impl History {
    /// The writes of `k`'s writer after which `k` is at version `v`: from
    /// the write that made `v` up to (not including) the one that made
    /// `v + 1` (`u64::MAX` when none has begun).
    fn writes_at(&self, k: u64, v: u64) -> (u64, u64) {
        let log = self.log[k as usize].read().unwrap();
        let from = if v == 0 {
            0
        } else {
            log[(v - 1) as usize].write
        };
        let to = log.get(v as usize).map_or(u64::MAX, |next| next.write);
        (from, to)
    }

    /// Checks that `reads` (each key once: the version read, or `None` for
    /// absent), all made at one point in time, fit one prefix of each
    /// writer's writes.
    pub fn check_cut(&self, reads: &[(u64, Option<u64>)], what: &str) -> Result<(), String> {
        for w in 0..self.writers {
            let mine = || reads.iter().filter(move |(k, _)| k % self.writers == w);
            // The prefix holds writes lo.. and none from hi on.
            let (mut lo, mut hi, mut why_lo, mut why_hi) = (0, u64::MAX, None, None);
            for &(k, read) in mine() {
                if let Some(v) = read {
                    let (from, to) = self.writes_at(k, v);
                    if from > lo {
                        (lo, why_lo) = (from, Some((k, v)));
                    }
                    if to < hi {
                        (hi, why_hi) = (to, Some((k, v)));
                    }
                }
            }
            if lo >= hi {
                let (k1, v1) = why_lo.unwrap_or_default();
                let (k2, v2) = why_hi.unwrap_or_default();
                return Err(format!(
                    "{what}: writer {w}'s write {lo} is seen (key {k1} at version {v1}) and \
                     its write {hi} is not (key {k2} at version {v2}, which write {hi} \
                     overwrote): not one point in time, or part of a batch"
                ));
            }
            for &(k, read) in mine() {
                if read.is_some() {
                    continue;
                }
                let started = self.started(k);
                let fits = (0..=started).any(|v| {
                    let (from, to) = self.writes_at(k, v);
                    self.is_delete(k, v) && from < to && from < hi && to > lo
                });
                if !fits {
                    return Err(format!(
                        "{what}: key {k} absent, but writer {w}'s writes {lo}..{hi} seen by \
                         the other reads leave it present"
                    ));
                }
            }
        }
        Ok(())
    }
}
