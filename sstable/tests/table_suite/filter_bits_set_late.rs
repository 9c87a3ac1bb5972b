//! A table writer may change the filter's bits per key once it knows the
//! table's keys (`TableBuilder::set_filter_bits_per_key`): the filter is
//! built at the bits last set, the properties record them, every key is
//! still found, and 0 writes no filter block at all.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm_filter::{Filter, FilterKind, KeyHash, planning};
use bloomlsm_sstable::{FilterVerdict, Outcome, TableBuilder};
use common::{open, options, simple_model};

fn write(path: &std::path::Path, kind: FilterKind, n: u64, late_bits: f64) {
    let file = std::fs::File::create(path).unwrap();
    let mut b = TableBuilder::new(
        std::io::BufWriter::new(file),
        path,
        options(Some(kind), 4096),
    );
    for ((key, seq), (entry, value)) in &simple_model(n) {
        b.add(key, seq.0, *entry, value).unwrap();
    }
    assert_eq!(b.distinct_keys(), n);
    b.set_filter_bits_per_key(late_bits);
    b.finish().unwrap();
}

#[test]
fn the_filter_is_built_at_the_bits_set_last() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ] {
        for (n, bits) in [(20u64, 3.5), (700, 6.25), (5000, 14.0)] {
            let path = dir.path().join(format!("{kind}-{n}.sst"));
            write(&path, kind, n, bits);
            let table = open(&path, false);
            let p = table.properties();
            assert_eq!(p.bits_per_key, bits, "{kind} {n}");
            let f = table.filter().unwrap();
            assert_eq!(
                f.memory_bytes() as u64,
                planning::planned_memory_bytes(kind, n, bits),
                "{kind} {n} keys at {bits}"
            );
            for (key, _) in simple_model(n).keys() {
                let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
                assert_eq!(l.verdict(), FilterVerdict::TruePositive, "{kind} {n}");
            }
        }
    }
}

#[test]
fn zero_bits_set_late_writes_no_filter_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write(&path, FilterKind::Ribbon, 300, 0.0);
    let table = open(&path, false);
    let p = table.properties();
    assert_eq!(
        (p.filter_kind, p.filter_bytes, p.bits_per_key),
        (None, 0, 0.0)
    );
    assert!(table.filter().is_none());
    for (key, _) in simple_model(300).keys() {
        let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
        assert_eq!(l.verdict(), FilterVerdict::NoFilter, "{key:?}");
        assert!(matches!(l.outcome, Outcome::Found { .. }), "{key:?}");
    }
}
