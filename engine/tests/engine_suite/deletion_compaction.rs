//! Deletion-triggered compaction (`Options::deletion_compaction_ratio`) on
//! the shape it exists for: a deep store of narrow tables whose load turns
//! into deletes of key ranges (the store shrinks, so no level goes over
//! its budget and the size-driven compactions leave the tombstones where
//! they land), with snapshots held across the deletes and a reopen.
//!
//! Every step is checked against a model (gets of present, deleted and
//! never-written keys, and a full scan, at every held snapshot too). Once
//! the snapshots are gone and the background work has settled (never a
//! full `compact()`), no table (L0's included) over deeper data holds
//! tombstones at the ratio or above (read from the files), the picks came
//! to an end, and gets of deleted keys read fewer data blocks than the
//! same load without the option.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::Options;
use common::Rng;
use common::live_tables::{LiveTable, live_tables};
use common::model_run::{ModelRun, deep_narrow_options};

const KEYS: u64 = 1_200;
const RATIO: f64 = 0.3;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn options(background_work: bool, ratio: Option<f64>) -> Options {
    Options {
        deletion_compaction_ratio: ratio,
        ..deep_narrow_options(background_work)
    }
}

/// Data blocks the gets of `deleted` (keys deleted and not written since)
/// read.
fn deleted_key_blocks(run: &ModelRun, deleted: &[u64]) -> usize {
    let mut blocks = 0;
    for &i in deleted {
        let (value, trace) = run.db().get_traced(&key(i)).unwrap();
        assert_eq!(value, None);
        blocks += trace.steps.iter().filter(|s| s.block.is_some()).count();
    }
    blocks
}

/// The load: every key written in a scattered order (twice for a third of
/// them) until the tree is deep, then ranges deleted in key order, a
/// quarter of them rewritten afterwards, snapshots taken and released
/// along the way, one reopen. Returns the settled run and the keys
/// deleted and not written since.
fn load(options: Options, seed: u64) -> (ModelRun, Vec<u64>) {
    let mut run = ModelRun::new(options, key, KEYS + 20);
    let mut deleted = Vec::new();
    let mut rng = Rng(seed);
    let mut order: Vec<u64> = (0..KEYS).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (n, &i) in order.iter().enumerate() {
        run.put(i);
        if i % 3 == 0 {
            run.put(order[n / 2]);
        }
    }
    run.check("loaded", false);
    // Ranges of 100 keys, each mostly deleted (every seventh kept).
    let ranges = [3, 8, 1, 10, 5, 0, 7];
    for (r, &range) in ranges.iter().enumerate() {
        for i in range * 100..(range + 1) * 100 {
            if i % 7 != 0 && run.model.contains_key(&key(i)) {
                run.delete(i);
                deleted.push(i);
            }
        }
        run.check("range deleted", false);
        if r % 2 == 0 {
            run.take_snapshot();
        }
        if r % 3 == 2 {
            run.snapshots.remove(0);
        }
        if r == 3 {
            run.reopen();
            run.check("reopened", true);
        }
        if r == 5 {
            // A few deleted keys come back (their tombstones are now
            // shadowed in turn).
            for &i in deleted.iter().step_by(4) {
                run.put(i);
            }
            deleted.retain(|i| !run.model.contains_key(&key(*i)));
            run.check("some written again", false);
        }
    }
    run.snapshots.clear();
    run.db().flush().unwrap();
    run.db().wait_for_background_work().unwrap();
    run.check("settled", true);
    (run, deleted)
}

/// Tables of any level whose key range meets a deeper table and whose
/// tombstones are at least `ratio` of their entries.
fn dense_over_deeper(tables: &[LiveTable], ratio: f64) -> Vec<String> {
    tables
        .iter()
        .filter(|t| t.tombstones > 0 && t.tombstones as f64 >= ratio * t.entries.len() as f64)
        .filter(|t| {
            tables
                .iter()
                .any(|d| d.level > t.level && d.smallest <= t.largest && d.largest >= t.smallest)
        })
        .map(|t| {
            format!(
                "L{} {}: {} of {} entries tombstones",
                t.level,
                t.number,
                t.tombstones,
                t.entries.len()
            )
        })
        .collect()
}

fn settles_with_no_dense_table_over_deeper_data(
    background_work: bool,
    seed: u64,
) -> (ModelRun, Vec<u64>) {
    let (mut run, deleted) = load(options(background_work, Some(RATIO)), seed);
    let s = run.db().stats();
    let deepest = s.levels.iter().rposition(|l| l.tables > 0).unwrap();
    assert!(deepest >= 4, "a deep store: deepest level L{deepest}");
    // Inline the picks come at fixed moments; on background threads the
    // scheduler may leave none due (the check of the files below holds
    // either way).
    assert!(
        background_work || s.deletion_compactions > 0,
        "no deletion-triggered compaction"
    );
    // The picks came to an end and stay ended.
    let picks = s.deletion_compactions;
    for _ in 0..3 {
        run.db().wait_for_background_work().unwrap();
    }
    assert_eq!(run.db().stats().deletion_compactions, picks, "picks go on");
    run.close();
    let dense = dense_over_deeper(&live_tables(run.dir.path()), RATIO);
    assert!(dense.is_empty(), "left over deeper data: {dense:#?}");
    run.open();
    run.check("reopened at the end", true);
    (run, deleted)
}

#[test]
fn deletes_reach_their_data_inline() {
    for seed in 1..=3 {
        let (mut on, deleted) = settles_with_no_dense_table_over_deeper_data(false, seed);
        let (mut off, deleted_off) = load(options(false, None), seed);
        // The same operations without the option: tombstones left where
        // they landed, over deeper data.
        off.close();
        let left = dense_over_deeper(&live_tables(off.dir.path()), RATIO);
        off.open();
        off.check("reopened", true);
        assert_eq!(deleted, deleted_off);
        let (blocks_on, blocks_off) = (
            deleted_key_blocks(&on, &deleted),
            deleted_key_blocks(&off, &deleted),
        );
        println!(
            "seed {seed}: {} deleted keys, data blocks read for them {blocks_off} without, \
             {blocks_on} with; {} dense tables over deeper data left without; \
             table bytes written {} without, {} with",
            deleted.len(),
            left.len(),
            off.bytes_written(),
            on.bytes_written(),
        );
        assert!(!left.is_empty(), "the load leaves nothing for the option");
        assert!(
            blocks_on * 2 <= blocks_off,
            "{blocks_on} blocks with the option, {blocks_off} without"
        );
        on.check("measured", true);
    }
}

#[test]
fn deletes_reach_their_data_on_background_threads() {
    for seed in 1..=3 {
        settles_with_no_dense_table_over_deeper_data(true, seed);
    }
}
