//! A table whose filter read failed at its open (`FilterLoadError::Read`):
//! lookups retry the read on a schedule counted in lookups (the first
//! lookup that finds the filter missing, then after 2, 4, 8, ... more,
//! `table/filter_slot.rs`), load the filter when a retry reads it, and
//! give up for good when a retry finds the block damaged. The memory the
//! table counts for its filter is the same before and after the retry.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{FilterLoadError, FilterStatus, Outcome, RandomAccessFile, Table};

use common::{options, simple_model, write_table};

/// What reads of the filter block do.
const FAIL: u8 = 0;
const GARBLE: u8 = 1;
const PASS: u8 = 2;
const PANIC: u8 = 3;

/// A table file whose reads at `filter_at` fail, come back with a byte
/// flipped, pass, or panic, as `mode` says; counted.
#[derive(Debug)]
struct FilterFaults {
    file: std::fs::File,
    filter_at: u64,
    mode: AtomicU8,
    filter_reads: AtomicU64,
}

impl RandomAccessFile for FilterFaults {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if offset != self.filter_at {
            return RandomAccessFile::read_exact_at(&self.file, buf, offset);
        }
        self.filter_reads.fetch_add(1, Ordering::Relaxed);
        match self.mode.load(Ordering::Relaxed) {
            FAIL => Err(io::Error::from_raw_os_error(EIO)),
            PANIC => panic!("a bug under the filter read"),
            mode => {
                RandomAccessFile::read_exact_at(&self.file, buf, offset)?;
                if mode == GARBLE {
                    buf[buf.len() / 2] ^= 0x5a;
                }
                Ok(())
            }
        }
    }

    fn len(&self) -> io::Result<u64> {
        RandomAccessFile::len(&self.file)
    }
}

/// EIO, as a failing disk returns it.
const EIO: i32 = 5;

const KEYS: u64 = 500;

/// A table of `KEYS` keys with a `kind` filter, opened with its filter read
/// failing.
fn table(dir: &std::path::Path, kind: FilterKind) -> (Table, Arc<FilterFaults>) {
    let path = dir.join("t.sst");
    write_table(&path, &simple_model(KEYS), options(Some(kind), 256));
    let probe = Table::open_path(&path, 1, None).unwrap();
    let filter_at = probe.footer().filter.offset;
    let loaded_bytes = probe.filter_memory_bytes();
    assert!(loaded_bytes > 0);
    let file = Arc::new(FilterFaults {
        file: std::fs::File::open(&path).unwrap(),
        filter_at,
        mode: AtomicU8::new(FAIL),
        filter_reads: AtomicU64::new(0),
    });
    let table = Table::open(Arc::clone(&file) as _, &path, 1, None).unwrap();
    assert!(matches!(
        table.filter_status(),
        FilterStatus::Unusable(FilterLoadError::Read { .. })
    ));
    assert!(table.filter().is_none() && table.filter_awaits_retry());
    // Counted at the bytes it will take.
    assert_eq!(table.filter_memory_bytes(), loaded_bytes);
    assert_eq!(table.filter_kind(), Some(kind));
    (table, file)
}

/// An absent key within the table's range.
fn absent_get(table: &Table, i: u64) -> Outcome {
    let key = format!("key{:08}~", i % (KEYS - 1)).into_bytes();
    table
        .get(&key, KeyHash::of(&key), u64::MAX)
        .unwrap()
        .outcome
}

#[test]
fn retries_double_their_spacing_and_load_the_filter_once_a_read_works() {
    for kind in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (table, file) = table(dir.path(), kind);
        let bytes = table.filter_memory_bytes();
        // Lookups 1, 3, 7, 15, 31 and 63 of 100 retry (each failing).
        for i in 0..100 {
            assert!(matches!(absent_get(&table, i), Outcome::NotFound { .. }));
        }
        assert_eq!(table.filter_retries(), 6, "{kind:?}");
        assert_eq!(file.filter_reads.load(Ordering::Relaxed), 7, "{kind:?}");
        // The next is due at lookup 127: the lookups before it read nothing.
        file.mode.store(PASS, Ordering::Relaxed);
        for i in 100..126 {
            absent_get(&table, i);
        }
        assert!(table.filter().is_none(), "{kind:?}");
        let outcome = absent_get(&table, 126);
        assert!(table.filter().is_some(), "{kind:?}");
        assert!(matches!(table.filter_status(), FilterStatus::Loaded));
        assert!(!table.filter_awaits_retry());
        assert_eq!(table.filter_memory_bytes(), bytes, "{kind:?}");
        assert_eq!(table.filter_retries(), 7);
        // The lookup that loaded it asked it (an absent key: "no" but for
        // a false positive).
        assert!(
            matches!(outcome, Outcome::FilterNegative | Outcome::NotFound { .. }),
            "{outcome:?}"
        );
        // Every key it holds answers (no false negative), and no more reads.
        for i in 0..KEYS {
            let key = format!("key{i:08}").into_bytes();
            let got = table.get(&key, KeyHash::of(&key), u64::MAX).unwrap();
            assert!(
                matches!(got.outcome, Outcome::Found { .. }),
                "{kind:?} key {i}"
            );
        }
        assert_eq!(file.filter_reads.load(Ordering::Relaxed), 8, "{kind:?}");
    }
}

#[test]
fn a_retry_that_finds_the_block_damaged_gives_up_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let (table, file) = table(dir.path(), FilterKind::Blocked);
    file.mode.store(GARBLE, Ordering::Relaxed);
    absent_get(&table, 0);
    assert!(
        matches!(
            table.filter_status(),
            FilterStatus::Unusable(FilterLoadError::Block { .. })
        ),
        "{:?}",
        table.filter_status()
    );
    assert!(!table.filter_awaits_retry());
    assert_eq!(table.filter_memory_bytes(), 0);
    assert_eq!(table.filter_kind(), None);
    file.mode.store(PASS, Ordering::Relaxed);
    for i in 0..1000 {
        assert!(matches!(absent_get(&table, i), Outcome::NotFound { .. }));
    }
    assert_eq!(file.filter_reads.load(Ordering::Relaxed), 2);
    assert!(table.filter().is_none());
}

/// Four threads look up keys while the filter read fails, then, healed,
/// until one of their retries loads it: every present key is found and
/// every absent one is not, before, during and after the retry that loads
/// the filter (a lookup sees no filter or the whole one), and the retries
/// stay within the schedule's bound for the lookups made.
#[test]
fn racing_lookups_never_miss_a_key_across_the_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (table, file) = table(dir.path(), FilterKind::Ribbon);
    let lookups = AtomicU64::new(0);
    for healed in [false, true] {
        file.mode
            .store(if healed { PASS } else { FAIL }, Ordering::Relaxed);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (table, lookups) = (&table, &lookups);
                s.spawn(move || {
                    for n in 0..2000u64 {
                        if healed && n > 0 && table.filter().is_some() {
                            break;
                        }
                        let i = (n * 7 + t * 13) % KEYS;
                        let key = format!("key{i:08}").into_bytes();
                        let got = table.get(&key, KeyHash::of(&key), u64::MAX).unwrap();
                        assert!(matches!(got.outcome, Outcome::Found { .. }), "key {i}");
                        assert!(
                            !matches!(absent_get(table, i), Outcome::Found { .. }),
                            "absent {i}"
                        );
                        lookups.fetch_add(2, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(table.filter().is_some(), healed);
    }
    let lookups = lookups.load(Ordering::Relaxed);
    let bound = u64::from(lookups.ilog2()) + 1;
    let retries = table.filter_retries();
    assert!(
        (2..=bound).contains(&retries),
        "{retries} retries in {lookups} lookups"
    );
    assert_eq!(file.filter_reads.load(Ordering::Relaxed), retries + 1);
}

/// A retry whose read panics (a bug below it) unwinds into its lookup, but
/// leaves the retry open: a later lookup, on the schedule, retries and
/// loads the filter. Before, the panicking lookup kept its claim on the
/// retry, and the table never retried again.
#[test]
fn a_retry_that_panics_leaves_the_next_retry_to_a_later_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let (table, file) = table(dir.path(), FilterKind::Blocked);
    file.mode.store(PANIC, Ordering::Relaxed);
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        absent_get(&table, 0);
    }));
    assert!(unwound.is_err(), "the read was to panic");
    assert!(table.filter_awaits_retry());
    file.mode.store(PASS, Ordering::Relaxed);
    for i in 1..100 {
        assert!(!matches!(absent_get(&table, i), Outcome::Found { .. }));
    }
    assert!(
        table.filter().is_some(),
        "no lookup retried after the panic"
    );
    assert!(matches!(table.filter_status(), FilterStatus::Loaded));
    for i in 0..KEYS {
        let key = format!("key{i:08}").into_bytes();
        let got = table.get(&key, KeyHash::of(&key), u64::MAX).unwrap();
        assert!(matches!(got.outcome, Outcome::Found { .. }), "key {i}");
    }
}
