//! Runs the benchmark binary with --quick and checks its JSON report.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

#[test]
fn quick_run_reports_every_engine_and_workload() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_bloomlsm-bench"))
        .args(["--quick", "--block-cache-bytes", "65536", "--out"])
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    let ms = json["measurements"].as_array().unwrap();
    for engine in [
        "bloomlsm",
        "bloomlsm-optimized",
        "bloomlsm-nofilter",
        "rocksdb",
    ] {
        for workload in [
            "fill",
            "readrandom",
            "readmissing",
            "mixed",
            "scan",
            "crawler",
        ] {
            let m = ms
                .iter()
                .find(|m| m["engine"] == engine && m["workload"] == workload)
                .unwrap_or_else(|| panic!("{engine}/{workload} missing"));
            assert!(
                m["ops_per_sec"].as_f64().unwrap() > 0.0,
                "{engine}/{workload}"
            );
            assert!(m["ops"].as_u64().unwrap() > 0);
        }
    }
    let fpr = |engine: &str| {
        ms.iter()
            .find(|m| m["engine"] == engine && m["workload"] == "readmissing")
            .unwrap()["observed_fpr"]
            .as_f64()
            .unwrap()
    };
    assert!(fpr("bloomlsm") > 0.0 && fpr("bloomlsm") < 0.03);
    assert!(fpr("rocksdb") > 0.0 && fpr("rocksdb") < 0.03);
    let reads = |engine: &str| {
        ms.iter()
            .find(|m| m["engine"] == engine && m["workload"] == "readmissing")
            .unwrap()["block_reads_per_op"]
            .as_f64()
            .unwrap()
    };
    println!(
        "reads per absent get: with filters {}, without {}",
        reads("bloomlsm"),
        reads("bloomlsm-nofilter")
    );
    assert!(reads("bloomlsm") < reads("bloomlsm-nofilter") / 10.0);
    assert!(out.path().join("report.md").exists());
    assert!(out.path().join("throughput.svg").exists());
}
