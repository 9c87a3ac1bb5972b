//! Power loss at every operation of filter rebuilds that append to the
//! tables' own files and copy others, with unsynced bytes persisted out of
//! order (`UnsyncedFate::Pages`), renames and unlinks kept or undone by
//! seeded choices, and the reopen under `CorruptFilterPolicy::Fail` with
//! direct reads: a manifest that named a table whose filter, properties or
//! footer were not all durable would be refused here (the default,
//! `Ignore`, would read around a torn filter and hide it). After each
//! crash: the open succeeds with every filter in use, holds every
//! acknowledged write and nothing but a prefix, leaves no orphan, and a
//! rebuild over whatever the crash left followed by another open keeps
//! the answers.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::path::Path;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{CorruptFilterPolicy, Db, FilterKind, FilterPolicy, Options};
use bloomlsm_tests::crash_workload::synced_inline_options;
use bloomlsm_tests::rebuild_workload::{RebuildRun, run_with_rebuilds};
use bloomlsm_tests::{close_with_no_orphan_table, contents, recovered_history, scratch_dir};

const WRITES: u64 = 1_200;

/// A filter rebuild after every `REBUILD_EVERY` writes.
const REBUILD_EVERY: u64 = 150;

/// Tables of a few KiB over L0..L2; Ribbon filters (their blocks are
/// not a whole number of pages, so a page lost mid-filter is likely).
fn options() -> Options {
    Options {
        memtable_bytes: 12 << 10,
        l1_bytes: 12 << 10,
        level_size_ratio: 4,
        target_file_bytes: 4 << 10,
        filter_kind: FilterKind::Ribbon,
        ..synced_inline_options()
    }
}

/// Alternates policies whose filters differ in size, so a rebuild both
/// appends (unused bytes within the bound) and, a few rounds on, copies.
fn policy(round: u64) -> FilterPolicy {
    match round % 3 {
        0 => FilterPolicy::Uniform { bits_per_key: 8.0 },
        1 => FilterPolicy::Optimized { bits_per_key: 6.0 },
        _ => FilterPolicy::PerLevel(vec![12.0, 3.0, 5.0]),
    }
}

/// The reopen: strict about filters, reading around nothing.
fn strict(direct: bool) -> Options {
    Options {
        on_corrupt_filter: CorruptFilterPolicy::Fail,
        use_direct_reads: direct,
        ..options()
    }
}

fn run_until_crash(dir: &Path, fs: &FaultFs) -> RebuildRun {
    run_with_rebuilds(dir, fs, options(), WRITES, REBUILD_EVERY, policy)
}

fn reopen_strictly(dir: &Path, direct: bool, acked: u64, what: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, strict(direct))
        .unwrap_or_else(|e| panic!("{what}: the strict reopen refused the store: {e}"));
    assert_eq!(
        db.stats().total.tables_without_usable_filter,
        0,
        "{what}: a table without its filter"
    );
    let recovered = recovered_history(&db, WRITES);
    assert!(
        (acked..=acked + 1).contains(&recovered),
        "{what}: {acked} writes acknowledged, {recovered} recovered"
    );
    let got = contents(&db);
    close_with_no_orphan_table(db, dir, what);
    got
}

#[test]
fn every_crash_point_of_in_place_rebuilds_under_out_of_order_pages_opens_strictly() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs);
    assert_eq!(full.acked, WRITES);
    assert!(
        full.appended >= 5 && full.copied >= 1,
        "{} tables appended to, {} copied",
        full.appended,
        full.copied
    );
    let direct = {
        let probe = dir.path().join("probe");
        std::fs::write(&probe, [0u8; 4096]).unwrap();
        let ok = bloomlsm::fs::direct::DirectFile::open(&probe).is_ok();
        std::fs::remove_file(&probe).unwrap();
        ok
    };
    let crash_points: Vec<u64> = full.rebuilds.iter().flat_map(|r| r.clone()).collect();
    for &crash_at in &crash_points {
        let what = format!("crash at {crash_at}");
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(crash_at));
        fs.set_rename_fate(RenameFate::Seeded(crash_at));
        fs.set_revival(Revival::Seeded(crash_at));
        fs.fail_from_op(crash_at);
        let acked = run_until_crash(dir.path(), &fs).acked;
        fs.simulate_power_loss().unwrap();
        let got = reopen_strictly(dir.path(), direct && crash_at % 2 == 0, acked, &what);

        let db = Db::open(dir.path(), strict(false)).unwrap();
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 7.0 })
            .unwrap_or_else(|e| panic!("{what}: rebuild after the reopen failed: {e}"));
        assert_eq!(contents(&db), got, "{what}: after a rebuild");
        drop(db);
        let db = Db::open(dir.path(), strict(direct)).unwrap();
        assert_eq!(db.stats().total.tables_without_usable_filter, 0, "{what}");
        assert_eq!(contents(&db), got, "{what}: reopened after the rebuild");
    }
    println!(
        "{} crash points in {} rebuilds ({} appends, {} copies)",
        crash_points.len(),
        full.rebuilds.len(),
        full.appended,
        full.copied
    );
}
