//! Filters save reads: absent keys cost about FPR x lookups block reads,
//! and keys outside the range cost none.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm_filter::{Filter, FilterKind, KeyHash};
use bloomlsm_sstable::{BlockSource, FilterVerdict, Outcome};
use common::{open, options, simple_model, write_table};

#[test]
fn absent_keys_read_about_fpr_blocks() {
    let n = 20_000;
    let model = simple_model(n);
    for kind in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        write_table(&path, &model, options(Some(kind), 4096));
        let table = open(&path, false);
        let filter = table.filter().unwrap();
        assert_eq!(filter.len(), n, "the filter holds every distinct key once");

        // Present keys: never a false negative.
        for (key, _) in model.keys() {
            let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
            assert!(matches!(l.outcome, Outcome::Found { .. }));
            assert_eq!(l.verdict(), FilterVerdict::TruePositive);
        }

        // Absent keys inside the range: block reads are the false positives.
        let lookups = 200_000u64;
        let mut reads = 0u64;
        for i in 0..lookups {
            let key = format!("key{:08}x{i}", i % (n - 1));
            let l = table
                .get(key.as_bytes(), KeyHash::of(key.as_bytes()), u64::MAX >> 8)
                .unwrap();
            match l.verdict() {
                FilterVerdict::Negative => assert_eq!(l.block, None),
                FilterVerdict::FalsePositive => {
                    assert_eq!(l.block, Some(BlockSource::File));
                    reads += 1;
                }
                other => panic!("unexpected verdict {other:?}"),
            }
        }
        // Binomial bound: within 5 sigma of lookups x the filter's model FPR,
        // plus 10% for the gap between model and this particular filter.
        let p = filter.theoretical_fpr();
        let mean = lookups as f64 * p;
        let allowed = 5.0 * (mean * (1.0 - p)).sqrt() + 0.10 * mean;
        println!(
            "{kind}: {reads} block reads for {lookups} absent gets (expected {mean:.0} +- {allowed:.0})"
        );
        assert!((reads as f64 - mean).abs() <= allowed);

        // Outside the key range: nothing at all.
        for key in [&b"a"[..], b"zzz", b"key"] {
            let l = table.get(key, KeyHash::of(key), u64::MAX >> 8).unwrap();
            assert_eq!(l.outcome, Outcome::OutOfRange);
            assert_eq!(l.block, None);
        }
    }
}

#[test]
fn without_a_filter_every_in_range_get_reads_a_block() {
    let model = simple_model(2_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(None, 4096));
    let table = open(&path, true);
    let mut file_reads = 0;
    for i in 0..1_000 {
        let key = format!("key{i:08}x");
        let l = table
            .get(key.as_bytes(), KeyHash::of(key.as_bytes()), u64::MAX >> 8)
            .unwrap();
        assert_eq!(l.verdict(), FilterVerdict::NoFilter);
        assert!(l.block.is_some());
        file_reads += usize::from(l.block == Some(BlockSource::File));
    }
    // The cache serves repeats: at most one file read per data block.
    assert!(file_reads <= table.data_block_count());
}
