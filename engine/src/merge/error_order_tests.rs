//! A merge whose sources fail part way (model test). Invariant: what the
//! merge returns is a prefix of the merge of everything the sources hold
//! (failed reads included) up to the first failed source's last intact
//! entry, all of it (the entry in hand when its successor's read failed
//! included), nothing past it, and then the error.
//! So the pairs a scan returns are a prefix of the pairs it would return
//! without the failures: no key a failed source hides (a newer version,
//! a tombstone) comes back.
#![allow(clippy::unwrap_used)]

use std::cmp::Ordering;
use std::ops::Bound;

use bloomlsm_sstable::{Entry, EntryKind, compare_keys};
use proptest::prelude::*;

use super::{MergingIter, Source, VisibleIter};
use crate::error::{Error, Result};

fn order(a: &Entry, b: &Entry) -> Ordering {
    compare_keys(&a.user_key, a.seq, &b.user_key, b.seq)
}

/// A source: its entries in table order, and how many are read before a
/// read fails (`None`: none fails).
type Model = (Vec<Entry>, Option<usize>);

fn source(entries: Vec<Entry>, fails_after: Option<usize>) -> Source {
    let good = fails_after.unwrap_or(entries.len());
    let mut items: Vec<Result<Entry>> = entries.into_iter().take(good).map(Ok).collect();
    if fails_after.is_some() {
        items.push(Err(Error::Io {
            path: "failed-source".into(),
            source: std::io::Error::other("injected"),
        }));
    }
    Box::new(items.into_iter())
}

/// Sources over keys a..d with distinct sequence numbers, each sorted.
fn models() -> impl Strategy<Value = Vec<Model>> {
    let entry = (0u8..4, any::<bool>());
    proptest::collection::vec(
        (
            proptest::collection::vec(entry, 0..8),
            proptest::option::of(0usize..9),
        ),
        1..5,
    )
    .prop_map(|raw| {
        let mut seq = 1;
        raw.into_iter()
            .map(|(entries, fails_after)| {
                let mut entries: Vec<Entry> = entries
                    .into_iter()
                    .map(|(k, put)| {
                        seq += 1;
                        Entry {
                            user_key: vec![b'a' + k],
                            seq,
                            kind: if put {
                                EntryKind::Put
                            } else {
                                EntryKind::Delete
                            },
                            value: seq.to_le_bytes().to_vec(),
                        }
                    })
                    .collect();
                entries.sort_by(order);
                let fails_after = fails_after.map(|n| n.min(entries.len()));
                (entries, fails_after)
            })
            .collect()
    })
}

fn sources(models: &[Model]) -> Vec<Source> {
    models.iter().map(|(e, f)| source(e.clone(), *f)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn a_failed_source_ends_the_merge_before_any_later_entry(models in models(), snapshot in 0u64..40) {
        let mut all: Vec<Entry> = models.iter().flat_map(|(e, _)| e.clone()).collect();
        all.sort_by(order);
        let failing = models.iter().any(|(_, f)| f.is_some());

        // The merge: a prefix of `all`, never past a failed source's last
        // intact entry, and its error last when a source fails.
        let out: Vec<Result<Entry>> = MergingIter::new(sources(&models)).collect();
        let (ok, err): (Vec<_>, Vec<_>) = out.into_iter().partition(|r| r.is_ok());
        let ok: Vec<Entry> = ok.into_iter().map(|r| r.unwrap()).collect();
        prop_assert_eq!(err.len(), usize::from(failing));
        prop_assert_eq!(&ok[..], &all[..ok.len()]);
        // Exactly: every entry up to the first failed source's last intact
        // one (none when a source fails at its first read).
        let mut cut: Option<Option<&Entry>> = None;
        for (entries, fails_after) in &models {
            if let Some(n) = *fails_after {
                let last = n.checked_sub(1).map(|i| &entries[i]);
                cut = Some(match (cut, last) {
                    (None, last) => last,
                    (Some(None), _) | (_, None) => None,
                    (Some(Some(a)), Some(b)) => Some(if order(a, b) == Ordering::Less { a } else { b }),
                });
            }
        }
        let expected = match cut {
            None => all.len(),
            Some(None) => 0,
            Some(Some(last)) => all.iter().take_while(|e| order(e, last) != Ordering::Greater).count(),
        };
        prop_assert_eq!(ok.len(), expected);

        // A scan: its pairs are a prefix of the pairs without failures.
        let full: Vec<(Vec<u8>, Vec<u8>)> = VisibleIter::new(
            all.into_iter().map(Ok),
            snapshot,
            (Bound::Unbounded, Bound::Unbounded),
        )
        .map(|r| r.unwrap())
        .collect();
        let mut scanned = Vec::new();
        let mut scan_failed = false;
        for r in VisibleIter::new(
            MergingIter::new(sources(&models)),
            snapshot,
            (Bound::Unbounded, Bound::Unbounded),
        ) {
            match r {
                Ok(pair) => scanned.push(pair),
                Err(_) => scan_failed = true,
            }
        }
        prop_assert_eq!(&scanned[..], &full[..scanned.len()]);
        if !failing {
            prop_assert!(!scan_failed);
            prop_assert_eq!(scanned.len(), full.len());
        }
    }
}
