//! Concurrent readers: the counters add up exactly to the sum of every
//! get's trace, per level and per word, and the blocks the traces say came
//! from files are exactly the point reads logged; more reader threads than
//! the counters have stripes. Then the same with a writer whose flushes
//! and compactions run in the background meanwhile (counters vs traces, and
//! the point reads of data regions vs the blocks from files), and with
//! `rebuild_filters` on another thread under `max_open_files` 2.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, FilterKind, FilterPolicy, LookupTrace, Options, TraceSource};

use common::scratch_dir;
use read_truth::{CountingFs, counts_of_trace, delta};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn options(background: bool) -> Options {
    Options {
        filter_kind: FilterKind::Blocked,
        filter_policy: FilterPolicy::Uniform { bits_per_key: 5.0 },
        block_cache_bytes: 16 << 10,
        target_file_bytes: 4 << 10,
        l1_bytes: 16 << 10,
        background_work: background,
        ..read_truth::narrow_tree_options()
    }
}

const N: u64 = 3000;
const THREADS: u64 = 20;

fn fill(db: &Db) {
    read_truth::write_rounds(db, key, N, 4, None, "");
}

/// Each thread's gets of present and absent keys, traced; their sum.
fn read_all(db: &Db, gets_per_thread: u64) -> Vec<LookupTrace> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    (0..gets_per_thread)
                        .map(|g| {
                            let i = (g * 7919 + t * 104_729) % N;
                            let k = if g % 2 == 0 {
                                key(i)
                            } else {
                                [key(i), b"~".to_vec()].concat()
                            };
                            db.get_traced(&k).unwrap().1
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

fn sum(traces: &[LookupTrace], levels: usize) -> Vec<read_truth::Counts> {
    let mut total = vec![read_truth::Counts::default(); levels];
    for t in traces {
        for (acc, c) in total.iter_mut().zip(counts_of_trace(t, levels)) {
            acc.probes += c.probes;
            acc.negatives += c.negatives;
            acc.true_positives += c.true_positives;
            acc.false_positives += c.false_positives;
            acc.no_filter += c.no_filter;
            acc.from_file += c.from_file;
            acc.from_cache += c.from_cache;
        }
    }
    total
}

fn memtable_hits(traces: &[LookupTrace]) -> u64 {
    traces
        .iter()
        .filter(|t| {
            t.steps.last().is_some_and(|s| {
                !matches!(s.source, TraceSource::Table { .. })
                    && s.result != bloomlsm::TraceResult::Missing
            })
        })
        .count() as u64
}

#[test]
fn readers_only_counters_equal_the_traces_and_the_reads() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let db = Db::open_with_fs(dir.path(), options(false), fs.clone()).unwrap();
    fill(&db);
    let before = db.stats();
    fs.take();
    let traces = read_all(&db, 2000);
    let reads = fs.take();
    let after = db.stats();
    let levels = after.levels.len();
    assert_eq!(after.gets - before.gets, traces.len() as u64);
    assert_eq!(delta(&before, &after), sum(&traces, levels));
    let from_file: usize = traces.iter().map(LookupTrace::blocks_read_from_files).sum();
    assert_eq!(
        reads.len(),
        from_file,
        "point reads logged vs blocks from files"
    );
    assert!(reads.iter().all(|r| !r.bulk));
    let s = sum(&traces, levels);
    assert!(s.iter().any(|c| c.from_cache > 0) && s.iter().any(|c| c.false_positives > 0));
    db.close().unwrap();
}

#[test]
fn readers_beside_background_work_counters_equal_the_traces() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let db = Db::open_with_fs(dir.path(), options(true), fs.clone()).unwrap();
    fill(&db);
    db.wait_for_background_work().unwrap();
    let before = db.stats();
    fs.take();
    let traces = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for r in 0..3u64 {
                for i in (0..N).filter(|i| i % 5 == r) {
                    db.put(&key(i), b"new").unwrap();
                }
            }
        });
        let traces = read_all(&db, 1500);
        writer.join().unwrap();
        traces
    });
    db.wait_for_background_work().unwrap();
    // Flushes and compactions read too: their passes are bulk reads, their
    // table opens read footers, indexes and filters. The gets' reads are
    // the point reads of data regions.
    let reads = fs.take();
    let get_reads = reads.iter().filter(|r| !r.bulk && r.in_data).count();
    let from_file: usize = traces.iter().map(LookupTrace::blocks_read_from_files).sum();
    assert_eq!(
        get_reads, from_file,
        "point reads of data vs blocks from files"
    );
    assert!(reads.iter().any(|r| r.bulk), "compactions ran meanwhile");
    let after = db.stats();
    let levels = after.levels.len();
    assert_eq!(after.gets - before.gets, traces.len() as u64);
    assert_eq!(
        after.memtable_hits - before.memtable_hits,
        memtable_hits(&traces)
    );
    assert_eq!(delta(&before, &after), sum(&traces, levels));
    db.close().unwrap();
}

/// Readers while another thread rebuilds every filter again and again (to
/// other bits per key, to none and back; in place or copied), with at most
/// two table files open: the counters still add up to the traces, and the
/// gets' point reads of data regions to the blocks from files (a
/// rebuild's pass is bulk reads; its table opens read only the footer and
/// the blocks after the data region). The answers are right throughout:
/// every key present before the rebuilds is found with its value.
#[test]
fn readers_beside_filter_rebuilds_counters_equal_the_traces() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let options = Options {
        max_open_files: Some(2),
        ..options(false)
    };
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    fill(&db);
    let before = db.stats();
    fs.take();
    let policies = [
        FilterPolicy::Uniform { bits_per_key: 9.0 },
        FilterPolicy::Uniform { bits_per_key: 0.0 },
        FilterPolicy::PerLevel(vec![2.0, 0.0, 12.0, 3.0]),
        FilterPolicy::Optimized { bits_per_key: 6.0 },
        FilterPolicy::Uniform { bits_per_key: 4.0 },
    ];
    let traces = std::thread::scope(|s| {
        let rebuilder = s.spawn(|| {
            for p in policies.iter().cycle().take(10) {
                db.rebuild_filters(p.clone()).unwrap();
            }
        });
        let traces = read_all(&db, 600);
        rebuilder.join().unwrap();
        traces
    });
    let reads = fs.take();
    let get_reads = reads.iter().filter(|r| !r.bulk && r.in_data).count();
    let from_file: usize = traces.iter().map(LookupTrace::blocks_read_from_files).sum();
    assert_eq!(
        get_reads, from_file,
        "point reads of data vs blocks from files"
    );
    let after = db.stats();
    let levels = after.levels.len();
    assert!(after.total.probes_without_filter > 0 || after.total.filter_negatives > 0);
    assert_eq!(after.gets - before.gets, traces.len() as u64);
    assert_eq!(delta(&before, &after), sum(&traces, levels));
    for i in (0..N).step_by(3) {
        assert!(db.get(&key(i)).unwrap().is_some(), "{i}");
    }
    db.close().unwrap();
}
