//! Reading ranges through scans and checking them against the histories.

use bloomlsm::{Db, DbIter};

use super::{History, KEYS, key, key_index};

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
    let mut got = vec![None; (to - from) as usize];
    let mut previous: Option<u64> = None;
    for (n, item) in iter.enumerate() {
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
        got[(k - from) as usize] = Some(v);
        previous = Some(k);
        if n % 16 == 15 {
            std::thread::yield_now();
        }
    }
    Ok(got)
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
