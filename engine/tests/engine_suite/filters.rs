//! The read path and filters of a whole store: no false negatives across
//! flush, compaction and reopen; filters rebuilt (never edited) by
//! compaction; reads saved as the FPR predicts.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, FilterKind, Options, Stats};
use bloomlsm_filter::Filter;
use common::{absent, all_present, fill, key};

fn options(bits: f64, kind: FilterKind) -> Options {
    let mut o = Options {
        memtable_bytes: 64 << 10,
        l1_bytes: 256 << 10,
        target_file_bytes: 64 << 10,
        block_cache_bytes: 0,
        ..Options::default().with_bits_per_key(bits)
    };
    o.filter_kind = kind;
    o
}

#[test]
fn no_false_negatives_across_flush_compaction_and_reopen() {
    let n = 20_000;
    for (bits, kind) in [
        (10.0, FilterKind::Blocked),
        (10.0, FilterKind::Standard),
        (0.0, FilterKind::Blocked),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(bits, kind)).unwrap();
        fill(&db, n);
        all_present(&db, n);
        db.flush().unwrap();
        all_present(&db, n);
        db.compact().unwrap();
        all_present(&db, n);
        db.close().unwrap();
        let db = Db::open(dir.path(), options(bits, kind)).unwrap();
        all_present(&db, n);
        for i in 0..1000 {
            assert_eq!(db.get(&absent(i)).unwrap(), None);
        }
        println!("{kind} at {bits} bits/key: {n} keys found after flush, compaction and reopen");
    }
}

fn absent_reads(db: &Db, lookups: u64) -> (Stats, Stats) {
    let before = db.stats();
    for i in 0..lookups {
        assert_eq!(db.get(&absent(i * 7919 % 20_000)).unwrap(), None);
    }
    (before, db.stats())
}

#[test]
fn reads_saved_match_the_filters_fpr() {
    let n = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(10.0, FilterKind::Blocked)).unwrap();
    fill(&db, n);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let lookups = 20_000u64;
    let (before, after) = absent_reads(&db, lookups);
    let probes = after.total.table_probes - before.total.table_probes;
    let reads = after.total.data_blocks_read - before.total.data_blocks_read;
    let fps = after.total.filter_false_positives - before.total.filter_false_positives;
    assert_eq!(
        reads, fps,
        "with no cache, every false positive is one block read"
    );
    // Expected reads: sum over probes of the probed tables' FPR. Bound: 5
    // sigma of a binomial with that mean, plus 15% for the model's error.
    let expected = probes as f64 * after.total.theoretical_fpr;
    let allowed = 5.0 * expected.sqrt() + 0.15 * expected + 3.0;
    println!(
        "{reads} block reads for {lookups} absent gets over {probes} table probes (expected {expected:.1} +- {allowed:.1})"
    );
    assert!((reads as f64 - expected).abs() <= allowed);
    assert!(after.total.observed_fpr < 0.03);

    // Filters off: about one block read per table probed.
    let dir2 = tempfile::tempdir().unwrap();
    let db2 = Db::open(dir2.path(), options(0.0, FilterKind::Blocked)).unwrap();
    fill(&db2, n);
    db2.flush().unwrap();
    db2.wait_for_background_work().unwrap();
    let (b, a) = absent_reads(&db2, lookups);
    let probes = a.total.table_probes - b.total.table_probes;
    let reads = a.total.data_blocks_read - b.total.data_blocks_read;
    println!("filters off: {reads} block reads over {probes} table probes");
    assert_eq!(reads, probes);
}

#[test]
fn compaction_rebuilds_filters_from_exactly_their_keys() {
    let n = 10_000;
    let dir = tempfile::tempdir().unwrap();
    // No background compaction until the manual one: L0 may grow (in
    // tables, and in bytes: L0 is also compacted once it holds l1_bytes).
    let opts = Options {
        l1_bytes: 1 << 40,
        l0_compaction_trigger: 1000,
        l0_slowdown_trigger: 1000,
        l0_stop_trigger: 1000,
        ..options(10.0, FilterKind::Standard)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    fill(&db, n);
    db.flush().unwrap();
    // Delete half the keys, then measure how often the deleted keys pass
    // the filters before compaction (they are still in the old filters).
    for i in (0..n).step_by(2) {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    let probe_deleted = |db: &Db| {
        let before = db.stats();
        for i in (0..n).step_by(2) {
            assert_eq!(db.get(&key(i)).unwrap(), None);
        }
        let after = db.stats();
        (after.total.filter_true_positives + after.total.filter_false_positives)
            - (before.total.filter_true_positives + before.total.filter_false_positives)
    };
    let passes_before = probe_deleted(&db);
    db.compact().unwrap();
    let passes_after = probe_deleted(&db);
    println!(
        "deleted keys passing a filter: {passes_before} before compaction, {passes_after} after"
    );
    assert!(
        passes_before >= n / 2,
        "tombstones and old puts are in the filters before compaction"
    );
    assert!(
        passes_after < passes_before / 20,
        "dropped keys must leave the rebuilt filters"
    );
    all_present_odd(&db, n);
    // Each table's filter holds exactly its distinct keys.
    let stats = db.stats();
    assert!(stats.filters_built > 0);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sst") {
            let t = bloomlsm_sstable::Table::open_path(&path, 0, None).unwrap();
            assert_eq!(t.filter().unwrap().len(), t.properties().distinct_keys);
            assert_eq!(
                t.properties().tombstones,
                0,
                "bottom-level compaction drops tombstones"
            );
        }
    }
}

fn all_present_odd(db: &Db, n: u64) {
    for i in (1..n).step_by(2) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(format!("v{i}").into_bytes()));
    }
}

#[test]
fn traced_get_lists_every_table_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(10.0, FilterKind::Blocked)).unwrap();
    fill(&db, 5_000);
    db.flush().unwrap();
    let (value, trace) = db.get_traced(&key(42)).unwrap();
    assert_eq!(value, Some(b"v42".to_vec()));
    assert!(
        trace
            .steps
            .iter()
            .any(|s| matches!(s.source, bloomlsm::TraceSource::Table { .. }))
    );
    let (value, trace) = db.get_traced(&absent(42)).unwrap();
    assert_eq!(value, None);
    assert!(trace.steps.len() >= 2);
    assert_eq!(
        trace.key_hash,
        bloomlsm_filter::KeyHash::of(&absent(42)).raw()
    );
}
