//! Checks a table against the model it was written from: every get and
//! `get_in_range` of every probe at every snapshot the caller names (the
//! newest version at or below it, `key_in_table` on a miss exactly when a
//! newer version exists), and every seek (what follows the probe).

use std::cmp::Reverse;
use std::sync::Arc;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::{EntryKind, Outcome, Table, TableIter};
use proptest::prelude::*;

use super::Model;

/// `layout` names the table in failures.
pub fn check_against_model<S: IntoIterator<Item = u64>>(
    layout: &str,
    table: &Arc<Table>,
    model: &Model,
    probes: Vec<Vec<u8>>,
    snapshots: impl Fn(&[u8]) -> S,
) -> Result<(), TestCaseError> {
    for key in probes {
        let hash = KeyHash::of(&key);
        let has_any = model
            .range((key.clone(), Reverse(u64::MAX))..)
            .next()
            .is_some_and(|((k, _), _)| *k == key);
        let in_range =
            key.as_slice() >= table.smallest_key() && key.as_slice() <= table.largest_key();
        for snapshot in snapshots(&key) {
            let want = model
                .range((key.clone(), Reverse(snapshot))..)
                .next()
                .filter(|((k, _), _)| *k == key)
                .map(|((_, s), (kind, v))| (s.0, (*kind == EntryKind::Put).then(|| v.clone())));
            let mut lookups = vec![("get", table.get(&key, hash, snapshot).unwrap())];
            if in_range {
                let l = table.get_in_range(&key, hash, snapshot).unwrap();
                lookups.push(("get_in_range", l));
            }
            for (how, lookup) in lookups {
                match (&lookup.outcome, &want) {
                    (Outcome::Found { seq, value }, Some((s, v))) => prop_assert_eq!(
                        (seq, value),
                        (s, v),
                        "{} {} {:?} at {}",
                        layout,
                        how,
                        key,
                        snapshot
                    ),
                    (Outcome::NotFound { key_in_table }, None) => prop_assert_eq!(
                        *key_in_table,
                        has_any,
                        "{} {} {:?} at {}: newer versions",
                        layout,
                        how,
                        key,
                        snapshot
                    ),
                    (Outcome::FilterNegative | Outcome::OutOfRange, None) => {
                        prop_assert!(!has_any, "{} {} {:?} ruled out", layout, how, key);
                    }
                    (got, want) => prop_assert!(
                        false,
                        "{} {} {:?} at {}: got {:?}, model {:?}",
                        layout,
                        how,
                        key,
                        snapshot,
                        got,
                        want
                    ),
                }
            }
        }
        let mut it = TableIter::new(Arc::clone(table), false);
        it.seek(&key).unwrap();
        let got: Vec<(Vec<u8>, u64)> = it
            .map(|e| e.unwrap())
            .map(|e| (e.user_key, e.seq))
            .collect();
        let want: Vec<(Vec<u8>, u64)> = model
            .keys()
            .filter(|(k, _)| k.as_slice() >= key.as_slice())
            .map(|(k, s)| (k.clone(), s.0))
            .collect();
        prop_assert_eq!(got, want, "{} seek {:?}", layout, key);
    }
    Ok(())
}
