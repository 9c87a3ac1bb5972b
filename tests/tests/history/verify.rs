//! Reading ranges through scans and checking them against the histories.

use std::ops::Bound;

use bloomlsm::{Db, DbIter};

use super::rng::Mix;
use super::{History, KEYS, key, key_index};

/// What a scan of keys `from..to` returned so far, one entry per key of
/// the range (`None`: not returned).
pub struct Collected {
    from: u64,
    to: u64,
    previous: Option<u64>,
    /// The value returned for each key of the range.
    pub got: Vec<Option<Vec<u8>>>,
}

impl Collected {
    /// Nothing returned yet.
    pub fn new(from: u64, to: u64) -> Self {
        Self {
            from,
            to,
            previous: None,
            got: vec![None; (to - from) as usize],
        }
    }

    /// Records the next pair; fails on a key out of the range, out of
    /// order or returned twice.
    pub fn push(
        &mut self,
        item: bloomlsm::Result<(Vec<u8>, Vec<u8>)>,
        what: &str,
    ) -> Result<(), String> {
        let (from, to, previous) = (self.from, self.to, self.previous);
        let (k, v) = item.map_err(|e| format!("{what}: scan failed: {e}"))?;
        let k = key_index(&k)?;
        if previous.is_some_and(|p| p >= k) {
            return Err(format!(
                "{what}: scan of {from}..{to} gave key {k} after key {previous:?} \
                 (out of order or twice)"
            ));
        }
        if !(from..to).contains(&k) {
            return Err(format!("{what}: scan of {from}..{to} gave key {k}"));
        }
        self.got[(k - from) as usize] = Some(v);
        self.previous = Some(k);
        Ok(())
    }
}

/// What a scan of keys `from..to` returned, one entry per key of the
/// range (`None`: not returned). Fails on a key out of the range, out of
/// order or returned twice. Yields the thread every few pairs, so the
/// iterator stays open while flushes and compactions install.
pub fn collect_scan(
    iter: DbIter,
    from: u64,
    to: u64,
    what: &str,
) -> Result<Vec<Option<Vec<u8>>>, String> {
    let mut collected = Collected::new(from, to);
    for (n, item) in iter.enumerate() {
        collected.push(item, what)?;
        if n % 16 == 15 {
            std::thread::yield_now();
        }
    }
    Ok(collected.got)
}

/// Checks each key of `from..` in `got` against its window `lo[i]..=hi[i]`;
/// returns the smallest version each read can be.
pub fn check_range(
    history: &History,
    got: &[Option<Vec<u8>>],
    from: u64,
    lo: &[u64],
    hi: &[u64],
    what: &str,
) -> Result<Vec<u64>, String> {
    got.iter()
        .enumerate()
        .map(|(i, g)| history.check(from + i as u64, g.as_deref(), lo[i], hi[i], what))
        .collect()
}

/// The reads of keys `from..` in `got`, with the versions `check_range`
/// found (exact for values), for [`History::check_cut`].
pub fn reads_of(from: u64, got: &[Option<Vec<u8>>], versions: &[u64]) -> Vec<(u64, Option<u64>)> {
    got.iter()
        .zip(versions)
        .enumerate()
        .map(|(i, (g, &v))| (from + i as u64, g.as_ref().map(|_| v)))
        .collect()
}

/// The store holds exactly each key's last acknowledged version: a get of
/// every key and a full scan.
pub fn verify_exact(db: &Db, history: &History, what: &str) {
    for k in 0..KEYS {
        let want = history.state(k, history.acked(k));
        let got = db.get(&key(k)).unwrap();
        assert!(
            got == want,
            "{what}: key {k} reads {:?}, last acknowledged version {} is {:?}",
            got.as_deref().map(String::from_utf8_lossy),
            history.acked(k),
            want.as_deref().map(String::from_utf8_lossy),
        );
    }
    let scanned = collect_scan(db.scan::<&[u8], _>(..).unwrap(), 0, KEYS, what)
        .unwrap_or_else(|e| panic!("{e}"));
    for (k, got) in scanned.iter().enumerate() {
        let k = k as u64;
        let want = history.state(k, history.acked(k));
        assert!(
            *got == want,
            "{what}: full scan gives key {k} {:?}, last acknowledged version {} is {:?}",
            got.as_deref().map(String::from_utf8_lossy),
            history.acked(k),
            want.as_deref().map(String::from_utf8_lossy),
        );
    }
}

/// Bounds selecting exactly the keys `from..to`, in one of several forms
/// (included or excluded ends, an end between two keys, unbounded at the
/// ends of the key space), so scans start and stop every way.
pub fn bounds(rng: &mut Mix, from: u64, to: u64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let start = match rng.below(3) {
        0 if from == 0 => Bound::Unbounded,
        1 if from > 0 => Bound::Excluded(key(from - 1)),
        2 if from > 0 => Bound::Excluded([key(from - 1), vec![0]].concat()),
        _ => Bound::Included(key(from)),
    };
    let end = match rng.below(4) {
        0 if to == KEYS => Bound::Unbounded,
        1 => Bound::Included(key(to - 1)),
        2 => Bound::Excluded([key(to - 1), vec![0]].concat()),
        3 => Bound::Included([key(to - 1), vec![0]].concat()),
        _ => Bound::Excluded(key(to)),
    };
    (start, end)
}
