//! Power loss twice across filter rebuilds: a crash at an operation of
//! rebuilds that append filters to the tables' own files (or copy them),
//! a power loss, then a second session over what it left (a table file
//! longer than its manifest record, an appended filter past the recorded
//! size, a manifest rename kept or undone, unlinks revived) that opens
//! with another `max_open_files` and read mode, rebuilds every filter at
//! another policy (appending again at the recorded size, over the first
//! crash's bytes) and writes on, and a crash at every operation of that
//! session under out-of-order pages, seeded renames and revived unlinks.
//! After the second power loss a strict reopen (`CorruptFilterPolicy::Fail`,
//! with yet another file bound and read mode) must find every filter
//! usable, every write the sessions acknowledged and a prefix of the
//! history, no orphan, and no false negative: a get of every key the scan
//! shows returns its value, and a get of every deleted key returns nothing.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{CorruptFilterPolicy, Db, FilterKind, FilterPolicy, Options};
use bloomlsm_tests::crash_workload::synced_inline_options;
use bloomlsm_tests::rebuild_workload::run_with_rebuilds;
use bloomlsm_tests::{
    apply_history_write, close_with_no_orphan_table, contents, copy_store_dir, history_write,
    recovered_history, scratch_dir,
};

const WRITES: u64 = 900;

/// A filter rebuild before every `REBUILD_EVERY`-th write.
const REBUILD_EVERY: u64 = 150;

/// Writes of the second session, after its rebuild.
const MORE: u64 = 12;

/// First crashes: every `STEP`-th operation of the rebuilds' windows.
/// `CRASHSWEEP_STEP=1` takes every one (about a minute in a debug build).
fn step() -> usize {
    std::env::var("CRASHSWEEP_STEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn options(max_open_files: Option<usize>, direct: bool) -> Options {
    Options {
        memtable_bytes: 12 << 10,
        l1_bytes: 12 << 10,
        level_size_ratio: 4,
        target_file_bytes: 4 << 10,
        filter_kind: FilterKind::Ribbon,
        max_open_files,
        use_direct_reads: direct,
        ..synced_inline_options()
    }
}

/// Policies whose filters differ in size: the first session's rebuilds
/// append (and, a few rounds on, copy); the second's appends at the
/// recorded size over what the first crash left past it.
fn policy(round: u64) -> FilterPolicy {
    match round % 3 {
        0 => FilterPolicy::Uniform { bits_per_key: 9.0 },
        1 => FilterPolicy::Optimized { bits_per_key: 6.0 },
        _ => FilterPolicy::PerLevel(vec![14.0, 4.0, 7.0]),
    }
}

fn direct_reads_work(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let ok = bloomlsm::fs::direct::DirectFile::open(&probe).is_ok();
    std::fs::remove_file(&probe).unwrap();
    ok
}

/// The second session: open (file bound and read mode by `variant`),
/// then new filters for every table, appended at the recorded sizes over
/// what the first crash left past them: on even variants by
/// `rebuild_filters` at another policy, on odd ones by rebalancing (the
/// store reopened under another `Optimized` budget, whose inline work
/// rebuilds filters after each write and `wait_for_background_work`
/// settles them all); then `MORE` writes of the history from `from` on.
/// Returns the writes acknowledged, and the filters rebalanced while the
/// store stayed healthy.
fn second_session(dir: &Path, fs: &FaultFs, variant: u64, direct: bool, from: u64) -> (u64, u64) {
    let bound = [Some(1), None, Some(3)][(variant % 3) as usize];
    let rebalance = variant % 2 == 1;
    let opts = Options {
        filter_policy: if rebalance {
            FilterPolicy::Optimized { bits_per_key: 13.0 }
        } else {
            Options::default().filter_policy
        },
        ..options(bound, direct && variant % 4 < 2)
    };
    let Ok(db) = Db::open_with_fs(dir, opts, Arc::new(fs.clone())) else {
        return (0, 0);
    };
    let rebuilt = if rebalance {
        db.wait_for_background_work()
    } else {
        db.rebuild_filters(policy(variant + 1))
    };
    let rebalanced = || db.stats().filters_rebalanced;
    if rebuilt.is_err() {
        return (0, rebalanced());
    }
    for i in 0..MORE {
        if apply_history_write(&db, from + i).is_err() {
            return (i, rebalanced());
        }
    }
    (MORE, rebalanced())
}

/// Opens `dir` strictly and checks it (see the module documentation);
/// returns the writes of the history it holds.
fn check(dir: &Path, bound: Option<usize>, direct: bool, at_least: u64, what: &str) -> u64 {
    let opts = Options {
        on_corrupt_filter: CorruptFilterPolicy::Fail,
        ..options(bound, direct)
    };
    let db = Db::open(dir, opts).unwrap_or_else(|e| panic!("{what}: strict reopen: {e}"));
    assert_eq!(
        db.stats().total.tables_without_usable_filter,
        0,
        "{what}: a table without its filter"
    );
    let recovered = recovered_history(&db, WRITES + MORE);
    assert!(
        (at_least..=at_least + 1).contains(&recovered),
        "{what}: {at_least} writes acknowledged, {recovered} recovered"
    );
    for (k, v) in contents(&db) {
        assert_eq!(
            db.get(&k).unwrap(),
            Some(v),
            "{what}: get misses a scanned key"
        );
    }
    for i in 0..recovered {
        if let (k, None) = history_write(i) {
            assert_eq!(db.get(&k).unwrap(), None, "{what}: a deleted key is back");
        }
    }
    close_with_no_orphan_table(db, dir, what);
    recovered
}

#[test]
fn a_second_crash_while_rebuilding_over_a_crashed_rebuild_keeps_every_filter_and_write() {
    let probe = scratch_dir();
    let direct = direct_reads_work(probe.path());
    let fs = FaultFs::new();
    let full = run_with_rebuilds(
        probe.path(),
        &fs,
        options(None, false),
        WRITES,
        REBUILD_EVERY,
        policy,
    );
    assert_eq!(full.acked, WRITES);
    assert!(
        full.appended >= 3,
        "{} appended, {} copied",
        full.appended,
        full.copied
    );
    let firsts: Vec<u64> = full
        .rebuilds
        .iter()
        .flat_map(|r| r.clone())
        .step_by(step())
        .collect();
    let mut seconds = 0;
    let mut rebalanced = 0;
    for &first in &firsts {
        let crashed = scratch_dir();
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(first));
        fs.set_rename_fate(RenameFate::Seeded(first));
        fs.set_revival(Revival::Seeded(first));
        fs.fail_from_op(first);
        let acked = run_with_rebuilds(
            crashed.path(),
            &fs,
            options(None, false),
            WRITES,
            REBUILD_EVERY,
            policy,
        )
        .acked;
        fs.simulate_power_loss().unwrap();
        let what = format!("first crash at {first}");
        // What the first crash left, as a strict open reads it (a copy:
        // the open removes orphans and writes a manifest).
        let r = check(
            copy_store_dir(crashed.path()).path(),
            Some(2),
            false,
            acked,
            &what,
        );
        // The second session's operations, run whole.
        let total = {
            let dir = copy_store_dir(crashed.path());
            let fs = FaultFs::new();
            let (more, filters) = second_session(dir.path(), &fs, first, direct, r);
            assert_eq!(more, MORE, "{what}: the second session failed");
            rebalanced += filters;
            fs.ops()
        };
        for second in 0..total {
            let dir = copy_store_dir(crashed.path());
            let fs = FaultFs::new();
            fs.set_unsynced_fate(UnsyncedFate::Pages(second ^ first));
            fs.set_rename_fate(RenameFate::Seeded(second));
            fs.set_revival(Revival::Seeded(first + second));
            fs.fail_from_op(second);
            let (more, _) = second_session(dir.path(), &fs, first, direct, r);
            fs.simulate_power_loss().unwrap();
            let what = format!("{what}, then at {second} of the {total} of the second session");
            let bound = [None, Some(1)][(second % 2) as usize];
            check(
                dir.path(),
                bound,
                direct && second % 3 == 0,
                r + more,
                &what,
            );
            seconds += 1;
        }
    }
    // About half the second sessions rebalance, most of them some filters.
    assert!(
        rebalanced as usize >= firsts.len() / 2,
        "{rebalanced} filters rebalanced in {} sessions",
        firsts.len()
    );
    println!(
        "{} first crashes ({} appends, {} copies in the whole run), {seconds} second crashes \
         ({rebalanced} filters rebalanced in the second sessions run whole): every strict \
         reopen holds every acknowledged write and every filter",
        firsts.len(),
        full.appended,
        full.copied
    );
}
