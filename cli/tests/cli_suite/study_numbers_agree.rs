//! The study commands print the library's numbers: `trace` gives, step by
//! step, what `Db::get_traced` gives on a store opened the same way (read
//! only, cold cache), with the same reads saved and blocks read from
//! files; `stats --absent-gets` reports counts that add up (per level to
//! the totals; every probe of an absent key a read saved or a false
//! positive; data blocks read per get over the levels' block reads).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::process::Command;

use bloomlsm::{BlockSource, Db, FilterVerdict, LookupTrace, Options, TraceResult, TraceSource};
use common::key;

/// Several levels of narrow tables and overlapping L0 tables, tombstones
/// over deeper values; closed.
fn deep_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let levels = common::deep_store(dir.path(), 1000);
    assert!(
        levels[0] >= 1 && levels.iter().filter(|&&t| t > 0).count() >= 3,
        "{levels:?}"
    );
    dir
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    // `get` and `trace` of a key not found exit 1; both print the answer.
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the library says, opened as the study commands open.
fn library_trace(dir: &Path, key: &str) -> (Option<Vec<u8>>, LookupTrace) {
    let options = Options {
        num_levels: bloomlsm::MAX_LEVELS,
        ..Options::default()
    };
    let db = Db::open_read_only(dir, options).unwrap();
    let got = db.get_traced(key.as_bytes()).unwrap();
    db.close().unwrap();
    got
}

fn verdict(v: FilterVerdict) -> &'static str {
    match v {
        FilterVerdict::NotAsked => "not asked (out of range)",
        FilterVerdict::NoFilter => "no filter",
        FilterVerdict::Negative => "negative",
        FilterVerdict::TruePositive => "true positive",
        FilterVerdict::FalsePositive => "false positive",
    }
}

#[test]
fn trace_prints_the_library_s_trace() {
    let dir = deep_store();
    let d = dir.path().to_str().unwrap();
    let mut keys: Vec<String> = (0..1000).step_by(7).map(key).collect();
    keys.extend((0..1000).step_by(13).map(|i| format!("{}~", key(i))));
    keys.extend(["a".to_string(), "z".to_string()]);
    for k in &keys {
        let v = json(&["trace", d, k]);
        let (value, trace) = library_trace(dir.path(), k);
        assert_eq!(
            v["value"].as_str().map(str::as_bytes),
            value.as_deref(),
            "{k}"
        );
        assert_eq!(v["reads_saved"], trace.reads_saved(), "{k}: {v}");
        assert_eq!(
            v["blocks_read_from_files"],
            trace.blocks_read_from_files(),
            "{k}: {v}"
        );
        assert_eq!(v["trace"]["snapshot_seq"], trace.snapshot_seq, "{k}");
        let steps = v["trace"]["steps"].as_array().unwrap();
        assert_eq!(steps.len(), trace.steps.len(), "{k}: {v}");
        for (cli, lib) in steps.iter().zip(&trace.steps) {
            if let TraceSource::Table { level, number } = lib.source {
                assert_eq!(cli["level"], level, "{k}");
                assert_eq!(cli["table"], format!("{number:06}.sst"), "{k}");
            }
            assert_eq!(cli["filter"].as_str(), lib.filter.map(verdict), "{k}");
            let block = lib.block.map(|b| match b {
                BlockSource::Cache => "cache",
                BlockSource::File => "file",
            });
            assert_eq!(cli["block"].as_str(), block, "{k}");
            let result = match lib.result {
                TraceResult::Missing => "missing",
                TraceResult::Value => "value",
                TraceResult::Deleted => "deleted",
            };
            assert_eq!(cli["result"], result, "{k}");
        }
    }
}

#[test]
fn stats_counts_add_up() {
    let dir = deep_store();
    let v = json(&[
        "stats",
        dir.path().to_str().unwrap(),
        "--absent-gets",
        "2000",
    ]);
    let u = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(u(&v["gets"]), 2000, "{v}");
    let levels = v["levels"].as_array().unwrap();
    let sum = |field: &str| levels.iter().map(|l| u(&l[field])).sum::<u64>();
    let (probes, saved, fp) = (
        u(&v["table_probes"]),
        u(&v["reads_saved"]),
        u(&v["false_positives"]),
    );
    assert_eq!(sum("table_probes"), probes, "{v}");
    assert_eq!(sum("reads_saved"), saved, "{v}");
    assert_eq!(sum("false_positives"), fp, "{v}");
    // Every table has a filter and every key asked is absent.
    assert_eq!(saved + fp, probes, "{v}");
    assert!(fp > 0 && saved > 0, "{v}");
    let fpr = v["observed_fpr"].as_f64().unwrap();
    assert!((fpr - fp as f64 / probes as f64).abs() < 1e-12, "{v}");
    let blocks = sum("data_blocks_read");
    assert!(blocks <= fp, "a block read per false positive at most: {v}");
    let per_get = v["data_blocks_read_per_get"].as_f64().unwrap();
    assert!((per_get - blocks as f64 / 2000.0).abs() < 1e-12, "{v}");
    for l in levels {
        let lp = u(&l["table_probes"]);
        let lf = u(&l["false_positives"]);
        if lp > 0 {
            let lfpr = l["observed_fpr"].as_f64().unwrap();
            assert!((lfpr - lf as f64 / lp as f64).abs() < 1e-12, "{l}");
        }
    }
}
