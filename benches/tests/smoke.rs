//! Runs the benchmark binary on tiny sizes and checks its reports: every
//! engine and workload in the JSON, the kernel's I/O figures, reader
//! threads, direct I/O, a bound on open table files, scale mode, and
//! plots that name their workloads.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str], out: &Path) -> Value {
    let status = Command::new(env!("CARGO_BIN_EXE_bloomlsm-bench"))
        .args(args)
        .arg("--out")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success(), "{args:?}");
    let name = if args.contains(&"--scale") {
        "scale.json"
    } else {
        "report.json"
    };
    serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap()
}

fn find<'a>(ms: &'a [Value], engine: &str, workload: &str, threads: u64) -> &'a Value {
    ms.iter()
        .find(|m| m["engine"] == engine && m["workload"] == workload && m["threads"] == threads)
        .unwrap_or_else(|| panic!("{engine}/{workload} x{threads} missing"))
}

fn f(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {v}"))
}

#[test]
fn quick_run_reports_every_engine_workload_and_thread_count() {
    let out = tempfile::tempdir().unwrap();
    let json = bench(
        &[
            "--quick",
            "--block-cache-bytes",
            "65536",
            "--threads",
            "1,2",
        ],
        out.path(),
    );
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
            let m = find(ms, engine, workload, 1);
            assert!(f(m, "ops_per_sec") > 0.0, "{engine}/{workload}");
            assert!(m["ops"].as_u64().unwrap() > 0);
            assert!(f(m, "device_bytes_per_op") >= 0.0);
            // Each operation costs CPU; the machine's steal is a share.
            assert!(f(m, "cpu_us_per_op") > 0.0, "{engine}/{workload}: {m}");
            assert!((0.0..=1.0).contains(&f(m, "steal_share")), "{m}");
        }
        // Gets read blocks with system calls: at least one per block read.
        let r = find(ms, engine, "readrandom", 1);
        assert!(f(r, "read_syscalls_per_op") >= f(r, "block_reads_per_op") * 0.99);
        for workload in ["readrandom", "readmissing"] {
            let m = find(ms, engine, workload, 2);
            assert_eq!(m["ops"], find(ms, engine, workload, 1)["ops"]);
        }
    }
    let fpr = |engine: &str| f(find(ms, engine, "readmissing", 1), "observed_fpr");
    assert!(fpr("bloomlsm") > 0.0 && fpr("bloomlsm") < 0.03);
    assert!(fpr("rocksdb") > 0.0 && fpr("rocksdb") < 0.03);
    let reads = |engine: &str| f(find(ms, engine, "readmissing", 1), "block_reads_per_op");
    println!(
        "reads per absent get: with filters {}, without {}",
        reads("bloomlsm"),
        reads("bloomlsm-nofilter")
    );
    assert!(reads("bloomlsm") < reads("bloomlsm-nofilter") / 10.0);
    let facts = json["facts"].as_array().unwrap();
    for fact in facts {
        assert!(f(fact, "write_amplification") >= 1.0, "{fact}");
        assert!(f(fact, "space_amplification") > 0.5, "{fact}");
        assert!(f(fact, "index_bytes_per_key") > 0.0, "{fact}");
    }
    let crawler = find(ms, "bloomlsm", "crawler", 1);
    let notes: Vec<(String, f64)> = serde_json::from_value(crawler["notes"].clone()).unwrap();
    let note = |k: &str| notes.iter().find(|(n, _)| n == k).unwrap().1;
    // The measured exact set holds at least the URLs' own bytes.
    assert!(note("exact_set_bytes") >= note("url_bytes"), "{notes:?}");
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("| readrandom | bloomlsm |"), "{md}");
    assert!(md.contains("2 threads ops/s"), "{md}");
    assert!(
        md.contains("CPU us/op at 2") && md.contains("steal at 2"),
        "{md}"
    );
    // The plot names its workloads and reads in K / M, not 1600000.0.
    let svg = std::fs::read_to_string(out.path().join("throughput.svg")).unwrap();
    // The SVG backend writes each text's content on a line of its own.
    let texts: Vec<&str> = svg.lines().map(str::trim).collect();
    for text in ["readmissing", "2 threads", "readmissing x2"] {
        assert!(texts.contains(&text), "{text} not in throughput.svg");
    }
    assert!(texts.iter().any(|t| t.ends_with('K')), "no K units");
    assert!(texts.iter().any(|t| t.starts_with("Ratio to RocksDB")));
    assert!(!texts.iter().any(|t| t.ends_with("00000.0")));
}

#[test]
fn direct_io_reads_reach_the_device_on_both_engines() {
    let out = tempfile::tempdir().unwrap();
    // The stores under /var/tmp, a disk file system (tmpfs takes O_DIRECT
    // since Linux 6.6 but never reads a device).
    let stores = tempfile::tempdir_in("/var/tmp").unwrap();
    let json = bench(
        &[
            "--dir",
            stores.path().to_str().unwrap(),
            "--quick",
            "--direct-io",
            "--block-cache-bytes",
            "65536",
            "--engines",
            "bloomlsm,rocksdb",
        ],
        out.path(),
    );
    let ms = json["measurements"].as_array().unwrap();
    for engine in ["bloomlsm", "rocksdb"] {
        let m = find(ms, engine, "readrandom", 1);
        // The store was just written, so the page cache holds it: only
        // direct reads show up as bytes from storage, at least 512 bytes
        // (a sector) per block read.
        assert!(
            f(m, "device_bytes_per_op") >= 512.0 * f(m, "block_reads_per_op") * 0.9,
            "{engine}: {m}"
        );
        assert!(f(m, "block_reads_per_op") > 0.5, "{engine}: {m}");
    }
}

/// `--max-open-files` reaches both engines (the report's configuration)
/// and, on stores of several narrow tables held to two open files, every
/// workload runs and reads its blocks.
#[test]
fn a_bound_on_open_table_files_runs_on_both_engines() {
    let out = tempfile::tempdir().unwrap();
    let json = bench(
        &[
            "--quick",
            "--max-open-files",
            "2",
            "--memtable-bytes",
            "262144",
            "--block-cache-bytes",
            "65536",
            "--engines",
            "bloomlsm,rocksdb",
        ],
        out.path(),
    );
    assert_eq!(
        json["config"]["mirror"]["max_open_files"], 2,
        "{}",
        json["config"]
    );
    let ms = json["measurements"].as_array().unwrap();
    for engine in ["bloomlsm", "rocksdb"] {
        let m = find(ms, engine, "readrandom", 1);
        assert!(f(m, "block_reads_per_op") > 0.5, "{engine}: {m}");
        assert!(f(m, "ops_per_sec") > 0.0, "{engine}: {m}");
    }
}

#[test]
fn scale_mode_reports_each_size_on_each_engine() {
    let out = tempfile::tempdir().unwrap();
    let json = bench(
        &[
            "--scale",
            "3000,6000",
            "--ops",
            "2000",
            "--engines",
            "bloomlsm,rocksdb",
        ],
        out.path(),
    );
    let points = json["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    for engine in ["bloomlsm", "rocksdb"] {
        for keys in [3000u64, 6000] {
            let p = points
                .iter()
                .find(|p| p["engine"] == engine && p["keys"] == keys)
                .unwrap();
            assert!(f(&p["readmissing"], "ops_per_sec") > 0.0);
            assert_eq!(
                p["crawler"]["notes"][0][1].as_f64().unwrap(),
                keys as f64 * 0.6
            );
            assert!(p["memory_after_reads"]["rss_bytes"].as_u64().unwrap() > 0);
            assert!(f(&p["facts"], "filter_bytes_per_key") > 1.0);
        }
    }
    assert!(out.path().join("scale.md").exists());
    let svg = std::fs::read_to_string(out.path().join("scale.svg")).unwrap();
    assert!(
        svg.contains("Write amplification"),
        "scale.svg lacks its panels"
    );
}
