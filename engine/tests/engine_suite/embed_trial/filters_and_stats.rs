//! Filter kinds and policies, rebuilds, and the statistics a user reads
//! about them: the same after a reopen, counters that add up.

use super::*;

#[test]
fn every_filter_kind_and_policy_reads_back_and_rebuild_switches_policy() {
    let kinds = [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ];
    let policies = [
        FilterPolicy::Uniform { bits_per_key: 0.0 },
        FilterPolicy::Uniform { bits_per_key: 7.5 },
        FilterPolicy::PerLevel(vec![14.0, 10.0, 6.0]),
        FilterPolicy::Optimized { bits_per_key: 10.0 },
    ];
    for kind in kinds {
        for policy in &policies {
            let dir = tempfile::tempdir().unwrap();
            let options = Options {
                filter_kind: kind,
                filter_policy: policy.clone(),
                memtable_bytes: 16 << 10,
                l1_bytes: 64 << 10,
                target_file_bytes: 16 << 10,
                sync: SyncMode::Always,
                ..Options::default()
            };
            let db = Db::open(dir.path(), options.clone()).unwrap();
            for i in 0..2000u32 {
                db.put(format!("k{i:05}").as_bytes(), &i.to_le_bytes())
                    .unwrap();
            }
            db.wait_for_background_work().unwrap();
            let check = |db: &Db| {
                for i in 0..2000u32 {
                    let got = db.get(format!("k{i:05}").as_bytes()).unwrap();
                    assert_eq!(
                        got,
                        Some(i.to_le_bytes().to_vec()),
                        "{kind:?} {policy:?} {i}"
                    );
                    assert_eq!(db.get(format!("k{i:05}x").as_bytes()).unwrap(), None);
                }
            };
            check(&db);
            let stats = db.stats();
            assert_eq!(
                stats.total.entries,
                stats.levels.iter().map(|l| l.entries).sum::<u64>()
            );
            let new = FilterPolicy::Uniform { bits_per_key: 12.0 };
            db.rebuild_filters(new.clone()).unwrap();
            assert_eq!(db.options().filter_policy, new);
            check(&db);
            db.close().unwrap();
            let db = Db::open(dir.path(), options).unwrap();
            check(&db);
            db.close().unwrap();
        }
    }
}

#[test]
fn stats_describe_the_same_tables_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 8 << 10,
        l1_bytes: 32 << 10,
        target_file_bytes: 8 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{:05}", (i * 7919) % 3000).as_bytes(), &[1; 40])
            .unwrap();
        if i % 3 == 0 {
            db.delete(format!("k{:05}", (i * 31) % 3000).as_bytes())
                .unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let before = db.stats();
    let scanned_before = all(&db);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let after = db.stats();
    assert_eq!(after.gets, 0);
    assert_eq!(
        before
            .levels
            .iter()
            .map(|l| (l.tables, l.entries, l.tombstones, l.file_bytes))
            .collect::<Vec<_>>(),
        after
            .levels
            .iter()
            .map(|l| (l.tables, l.entries, l.tombstones, l.file_bytes))
            .collect::<Vec<_>>(),
    );
    assert_eq!(before.total.filter_bytes, after.total.filter_bytes);
    assert_eq!(all(&db), scanned_before);
    db.get(b"k00001").unwrap();
    db.get(b"nope").unwrap();
    assert_eq!(db.stats().gets, 2);
    db.close().unwrap();
}

/// After filters rebuilt in place, a reopen (read-write and read-only)
/// describes the same tables: sizes, unused bytes, filter memory, bits per
/// key and the formula's rate, level by level.
#[test]
fn stats_after_rebuild_and_reopen_describe_the_same_filters() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 16 << 10,
        l1_bytes: 64 << 10,
        target_file_bytes: 32 << 10,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..4000u32 {
        db.put(format!("k{:05}", (i * 7919) % 4000).as_bytes(), &[9; 20])
            .unwrap();
    }
    db.flush().unwrap();
    db.rebuild_filters(FilterPolicy::PerLevel(vec![4.0, 6.0, 16.0]))
        .unwrap();
    let figures = |s: &bloomlsm::Stats| {
        s.levels
            .iter()
            .chain([&s.total])
            .map(|l| {
                format!(
                    "t{} e{} x{} f{} u{} fb{} bpk{:.4} fpr{:.6} bad{}",
                    l.tables,
                    l.entries,
                    l.tombstones,
                    l.file_bytes,
                    l.unused_bytes,
                    l.filter_bytes,
                    l.bits_per_key,
                    l.theoretical_fpr,
                    l.tables_without_usable_filter
                )
            })
            .collect::<Vec<_>>()
    };
    let before = figures(&db.stats());
    assert!(db.stats().total.unused_bytes > 0, "{before:?}");
    db.close().unwrap();
    let ro = Db::open_read_only(dir.path(), options.clone()).unwrap();
    assert_eq!(figures(&ro.stats()), before, "read-only");
    ro.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(figures(&db.stats()), before, "read-write");
    db.close().unwrap();
}

/// The read counters add up as their docs define them.
#[test]
fn read_counters_add_up() {
    for bits in [10.0, 0.0] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_bytes: 8 << 10,
            l1_bytes: 16 << 10,
            target_file_bytes: 8 << 10,
            background_work: false,
            ..Options::default().with_bits_per_key(bits)
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for round in 0..2u32 {
            for i in 0..2000u32 {
                db.put(
                    format!("k{:05}", (i * 7919) % 2000).as_bytes(),
                    &round.to_le_bytes(),
                )
                .unwrap();
            }
        }
        db.flush().unwrap();
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..500u32 {
            assert!(
                db.get(format!("k{:05}", i * 4).as_bytes())
                    .unwrap()
                    .is_some()
            );
            assert!(
                db.get(format!("k{:05}x", i * 4).as_bytes())
                    .unwrap()
                    .is_none()
            );
        }
        let s = db.stats();
        let t = &s.total;
        assert_eq!(s.gets, 1000);
        assert_eq!(s.memtable_hits, 0);
        assert_eq!(
            t.table_probes,
            t.filter_negatives
                + t.filter_true_positives
                + t.filter_false_positives
                + t.probes_without_filter,
            "bits {bits}: {t:?}"
        );
        if bits > 0.0 {
            assert_eq!(t.filter_true_positives, 500, "{t:?}");
            assert_eq!(t.probes_without_filter, 0);
            assert!(t.filter_bytes > 0);
        } else {
            assert_eq!(t.filter_bytes, 0);
            assert_eq!(t.probes_without_filter, t.table_probes);
            assert_eq!(
                t.filter_negatives + t.filter_true_positives + t.filter_false_positives,
                0
            );
        }
        assert!(t.data_blocks_read + t.block_cache_hits >= 500);
        assert!((s.data_blocks_read_per_get - t.data_blocks_read as f64 / 1000.0).abs() < 1e-9);
        let sum = |f: fn(&bloomlsm::LevelStats) -> u64| s.levels.iter().map(f).sum::<u64>();
        assert_eq!(sum(|l| l.table_probes), t.table_probes);
        assert_eq!(sum(|l| l.data_blocks_read), t.data_blocks_read);
        assert_eq!(sum(|l| l.entries), t.entries);
        db.close().unwrap();
    }
}

/// `Stats::write_stalls` counts writes delayed or stopped: never more than
/// the writes made.
#[test]
fn write_stalls_count_writes_not_waits() {
    assert_eq!(
        write_stalls_of(false),
        0,
        "inline work leaves nothing to wait for"
    );
    // Background work here almost always makes writes wait (L0 stops at
    // one table); a run whose background thread kept up tests nothing, so
    // one of a few runs must have stalled, and every run counts at most
    // one stall a write.
    let stalled = (0..5).map(|_| write_stalls_of(true)).find(|&s| s > 0);
    assert!(stalled.is_some(), "no run of five stalled a write");
}

/// The stalls 400 writes counted (asserted at most one a write).
fn write_stalls_of(background_work: bool) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 512,
        max_immutable_memtables: 1,
        l0_compaction_trigger: 1,
        l0_slowdown_trigger: 1,
        l0_stop_trigger: 1,
        l1_bytes: 1 << 10,
        level_size_ratio: 2,
        target_file_bytes: 1 << 10,
        num_levels: 12,
        sync: SyncMode::Always,
        background_work,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let writes = 400u64;
    for i in 0..writes {
        db.put(format!("k{:05}", (i * 7919) % 1000).as_bytes(), &[1; 200])
            .unwrap();
    }
    let stalls = db.stats().write_stalls;
    eprintln!("background {background_work}: {writes} writes, {stalls} stalls");
    assert!(
        stalls <= writes,
        "background {background_work}: {writes} writes, {stalls} stalls"
    );
    db.close().unwrap();
    stalls
}

/// The store-wide write counters agree with the per-level ones their docs
/// tie them to, on a deep store with cleanups, deletion compactions and
/// rebalanced filters, before and after a reopen.
#[test]
fn write_counters_agree_with_the_levels() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 2 << 10,
        l1_bytes: 4 << 10,
        level_size_ratio: 2,
        target_file_bytes: 2 << 10,
        num_levels: 12,
        filter_policy: FilterPolicy::Optimized { bits_per_key: 10.0 },
        deletion_compaction_ratio: Some(0.3),
        ..Options::default()
    };
    let check = |db: &Db, what: &str| {
        db.wait_for_background_work().unwrap();
        let s = db.stats();
        let into =
            |r: std::ops::Range<usize>| s.levels[r].iter().map(|l| l.writes_into).sum::<u64>();
        assert_eq!(s.flushes, s.levels[0].writes_into, "{what}");
        assert_eq!(s.compactions, into(1..s.levels.len()), "{what}");
        assert_eq!(s.bytes_written, s.total.bytes_written, "{what}");
        assert_eq!(
            s.bytes_compacted_read, s.total.bytes_compacted_read,
            "{what}"
        );
        assert!(s.bottom_cleanups <= s.compactions, "{what}");
        assert!(
            s.deletion_compactions <= s.compactions + s.trivial_moves,
            "{what}"
        );
        assert!(
            s.filters_built >= s.flushes + s.compactions,
            "{what}: {s:?}"
        );
        s
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..4000u32 {
        db.put(format!("k{:05}", (i * 7919) % 4000).as_bytes(), &[5; 30])
            .unwrap();
    }
    let mut b = WriteBatch::new();
    for i in 1000..2500u32 {
        b.delete(format!("k{i:05}").as_bytes());
    }
    db.write(b).unwrap();
    let s = check(&db, "loaded");
    assert!(s.compactions > 0 && s.flushes > 0);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    check(&db, "reopened");
    db.close().unwrap();
}
