//! The `bloomlsm` command against real stores and table files, including
//! missing and corrupt ones.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .output()
        .unwrap()
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = cli(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn store_with_table() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for i in 0..5000 {
        db.put(format!("key{i:05}").as_bytes(), b"value").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap();
    (dir, table)
}

#[test]
fn inspect_reports_filter_three_ways() {
    let (_dir, table) = store_with_table();
    let v = ok_json(&["inspect", table.to_str().unwrap(), "--probes", "200000"]);
    let f = &v["filter"];
    assert_eq!(f["items"], 5000);
    assert_eq!(v["properties"]["distinct_keys"], 5000);
    let formula = f["fpr_formula"].as_f64().unwrap();
    let measured = f["fpr_measured"].as_f64().unwrap();
    let from_fill = f["fpr_from_fill"].as_f64().unwrap();
    assert!(
        (measured - formula).abs() < 0.004,
        "{measured} vs {formula}"
    );
    assert!((from_fill - formula).abs() < 0.004);
    let text = cli(&["inspect", table.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("fill_ratio"));
}

#[test]
fn get_put_delete_scan_trace_stats() {
    let (dir, _) = store_with_table();
    let d = dir.path().to_str().unwrap();
    ok_json(&["put", d, "hello", "world"]);
    assert_eq!(ok_json(&["get", d, "hello"])["value"], "world");
    ok_json(&["delete", d, "hello"]);
    assert!(ok_json(&["get", d, "hello"])["value"].is_null());
    let scan = ok_json(&["scan", d, "--from", "key00010", "--to", "key00013"]);
    assert_eq!(scan.as_array().unwrap().len(), 3);
    let trace = ok_json(&["trace", d, "key00042"]);
    assert_eq!(trace["value"], "value");
    assert!(!trace["trace"]["steps"].as_array().unwrap().is_empty());
    let stats = ok_json(&["stats", d, "--absent-gets", "2000"]);
    assert!(stats["reads_saved"].as_u64().unwrap() > 1900);
    assert!(stats["observed_fpr"].as_f64().unwrap() < 0.03);
}

#[test]
fn size_reproduces_the_crawler() {
    let v = ok_json(&[
        "size",
        "--items",
        "1000000000",
        "--bits-per-key",
        "10",
        "--key-bytes",
        "64",
    ]);
    assert_eq!(v["filter_bytes"], 1_250_000_000u64);
    assert_eq!(v["k"], 7);
    assert_eq!(v["exact_set_bytes"], 64_000_000_000u64);
    assert!((v["false_positive_rate"].as_f64().unwrap() - 0.0082).abs() < 0.0002);
    let by_fpr = ok_json(&["size", "--items", "1000", "--fpr", "0.01"]);
    assert!((by_fpr["bits_per_key"].as_f64().unwrap() - 9.585).abs() < 0.01);
}

#[test]
fn errors_are_one_line_and_non_zero() {
    let (dir, table) = store_with_table();
    for args in [
        vec!["inspect", "/nonexistent/table.sst"],
        vec!["stats", "/nonexistent/dir"],
        vec!["get", "/nonexistent/dir", "k"],
        vec!["size", "--items", "10"],
        vec!["size", "--items", "10", "--fpr", "2"],
    ] {
        let out = cli(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
    // A corrupt table: a clear error, no panic.
    let mut bytes = std::fs::read(&table).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    std::fs::write(&table, bytes).unwrap();
    let out = cli(&["inspect", table.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("footer"));
    drop(dir);
}
