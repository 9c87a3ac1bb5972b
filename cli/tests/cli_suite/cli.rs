//! The `bloomlsm` command against real stores and table files, including
//! missing and corrupt ones.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Output};

use bloomlsm_tests::table_files;

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
    bloomlsm_tests::store_with_one_table((0..5000).map(|i| format!("key{i:05}")))
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
    let gone = cli(&["--json", "get", d, "hello"]);
    assert_eq!(gone.status.code(), Some(1), "a deleted key is not found");
    let gone: serde_json::Value = serde_json::from_slice(&gone.stdout).unwrap();
    assert!(gone["value"].is_null());
    let scan = ok_json(&["scan", d, "--from", "key00010", "--to", "key00013"]);
    assert_eq!(scan.as_array().unwrap().len(), 3);
    let trace = ok_json(&["trace", d, "key00042"]);
    assert_eq!(trace["value"], "value");
    assert!(!trace["trace"]["steps"].as_array().unwrap().is_empty());
    let stats = ok_json(&["stats", d, "--absent-gets", "2000"]);
    assert!(stats["reads_saved"].as_u64().unwrap() > 1900);
    assert!(stats["observed_fpr"].as_f64().unwrap() < 0.03);
    // About 20 false positives in 2000 absent gets, each a block read from
    // the file the first time (the seeding scan must not warm the cache).
    assert!(stats["false_positives"].as_u64().unwrap() > 0);
    assert!(stats["data_blocks_read_per_get"].as_f64().unwrap() > 0.0);
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
        vec!["put", dir.path().to_str().unwrap(), "a", "1", "b"],
    ] {
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
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
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("footer"));
    drop(dir);
}

fn text_of(args: &[&str]) -> String {
    let out = cli(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Where each of `names` starts in `haystack`, asserting they appear in
/// that order.
fn assert_in_order(haystack: &str, names: &[&str]) {
    let mut last = 0;
    for name in names {
        let at = haystack[last..]
            .find(name)
            .map(|i| i + last)
            .unwrap_or_else(|| panic!("{name} missing after byte {last} in:\n{haystack}"));
        last = at + name.len();
    }
}

#[test]
fn get_of_a_missing_key_prints_not_found_and_exits_one() {
    let (dir, _) = store_with_table();
    let d = dir.path().to_str().unwrap();
    let out = cli(&["get", d, "no-such-key"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "key    no-such-key\nvalue  not found\n"
    );
    assert!(
        out.stderr.is_empty(),
        "not found is an answer, not an error"
    );
    let json = cli(&["--json", "get", d, "no-such-key"]);
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(v["value"].is_null());
    // A key that is there: exit 0 and its value.
    let found = cli(&["get", d, "key00007"]);
    assert_eq!(found.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&found.stdout),
        "key    key00007\nvalue  value\n"
    );
    // Tracing a missing key succeeds: the trace is the answer.
    let trace = cli(&["trace", d, "no-such-key"]);
    assert_eq!(trace.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&trace.stdout).contains("value                   not found"));
}

#[test]
fn help_documents_exit_status_and_put_batches() {
    let get = text_of(&["get", "--help"]);
    assert!(get.contains("not found"), "{get}");
    assert!(get.contains("exit status 1"), "{get}");
    assert!(get.contains("1  `get`: the key is not found"), "{get}");
    let put = text_of(&["put", "--help"]);
    assert!(put.contains("one small L0 table"), "{put}");
    assert!(text_of(&["--help"]).contains("Exit status"));
}

#[test]
fn put_writes_all_its_pairs_as_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let put = ok_json(&["put", d, "a", "1", "b", "2", "c", "3"]);
    assert_eq!(put["pairs"], 3);
    assert_eq!(put["smallest_key"], "a");
    assert_eq!(put["largest_key"], "c");
    // `get` reads the batch from the WAL and writes no table.
    for (key, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
        assert_eq!(ok_json(&["get", d, key])["value"], value);
    }
    assert_eq!(table_files(dir.path()), 0, "get opens read-only");
    // The next write's open turns the call's batch into exactly one table.
    ok_json(&["put", d, "d", "4"]);
    assert_eq!(table_files(dir.path()), 1);
    ok_json(&["get", d, "d"]);
    assert_eq!(table_files(dir.path()), 1, "get opens read-only");
    let deleted = text_of(&["delete", d, "b", "a"]);
    assert_eq!(table_files(dir.path()), 2, "one table per put call");
    assert_eq!(
        deleted,
        "tombstones_written  2\nsmallest_key        a\nlargest_key         b\n"
    );
    assert_eq!(cli(&["get", d, "a"]).status.code(), Some(1));
    assert_eq!(cli(&["get", d, "b"]).status.code(), Some(1));
    assert_eq!(ok_json(&["get", d, "c"])["value"], "3");
}

#[test]
fn fields_come_in_reading_order_in_text_and_json() {
    let (dir, table) = store_with_table();
    let t = table.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    // What was asked, the answer, the details; n, bits per key, k, m.
    let order = [
        "file",
        "filter",
        "status",
        "kind",
        "items",
        "bits_per_key",
        "k",
        "m_bits",
        "fill_ratio",
        "fpr_formula",
        "fpr_from_fill",
        "fpr_measured",
        "properties",
        "entries",
        "footer",
    ];
    let text = text_of(&["inspect", t, "--probes", "1000"]);
    assert!(text.starts_with("file "), "{text}");
    assert_in_order(&text, &order);
    let json = text_of(&["--json", "inspect", t, "--probes", "1000"]);
    let quoted: Vec<String> = order.iter().map(|n| format!("\"{n}\"")).collect();
    assert_in_order(
        &json,
        &quoted.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let size = text_of(&["--json", "size", "--items", "1000", "--fpr", "0.01"]);
    assert_in_order(
        &size,
        &[
            "\"items\"",
            "\"target_fpr\"",
            "\"bits_per_key\"",
            "\"k\"",
            "\"filter_bytes\"",
            "\"false_positive_rate\"",
            "\"exact_set_bytes\"",
        ],
    );
    let stats = text_of(&["stats", d, "--absent-gets", "10"]);
    assert!(stats.starts_with("store "), "{stats}");
    assert_in_order(
        &stats,
        &[
            "gets",
            "reads_saved",
            "observed_fpr",
            "levels:",
            "level  tables",
        ],
    );
    let trace = text_of(&["trace", d, "key00042"]);
    assert!(trace.starts_with("key "), "{trace}");
    assert_in_order(
        &trace,
        &[
            "value",
            "reads_saved",
            "trace:",
            "steps:",
            "source",
            "filter",
            "result",
        ],
    );
    let scan = text_of(&["scan", d, "--from", "key00010", "--limit", "2"]);
    assert_eq!(scan, "key       value\nkey00010  value\nkey00011  value\n");
}

/// Every file of `dir`: name -> (contents, modification time).
fn image(
    dir: &std::path::Path,
) -> std::collections::BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                (std::fs::read(e.path()).unwrap(), meta.modified().unwrap()),
            )
        })
        .collect()
}

/// A store several tables deep with overwrites and deletes, and writes
/// left only in its WAL: every study command reads it (WAL included) and
/// leaves every file as it was. A read-write open under default options
/// would flush the WAL to a new table and delete it.
#[test]
fn study_commands_change_no_file_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let options = bloomlsm::Options {
        memtable_bytes: 16 << 10,
        background_work: false,
        ..bloomlsm::Options::default()
    };
    let db = bloomlsm::Db::open(dir.path(), options).unwrap();
    for round in 0..4 {
        for i in 0..1500 {
            let key = format!("key{i:05}");
            if (i + round) % 5 == 0 {
                db.delete(key.as_bytes()).unwrap();
            } else {
                db.put(key.as_bytes(), format!("v{round}").as_bytes())
                    .unwrap();
            }
        }
    }
    db.flush().unwrap();
    db.put(b"only-in-the-wal", b"yes").unwrap();
    db.delete(b"key00001").unwrap();
    db.close().unwrap();
    assert!(table_files(dir.path()) > 1);
    let before = image(dir.path());
    let table = dir
        .path()
        .join(before.keys().find(|n| n.ends_with(".sst")).unwrap());

    assert_eq!(ok_json(&["get", d, "only-in-the-wal"])["value"], "yes");
    // The last round deleted every key i with i % 5 == 2; the WAL deletes key00001.
    assert_eq!(ok_json(&["get", d, "key00003"])["value"], "v3");
    assert_eq!(cli(&["get", d, "key00001"]).status.code(), Some(1));
    assert_eq!(cli(&["get", d, "key00002"]).status.code(), Some(1));
    let scan = ok_json(&["scan", d, "--from", "key00000", "--to", "key00006"]);
    let keys: Vec<&str> = scan
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["key00000", "key00003", "key00004", "key00005"]);
    let all = ok_json(&["scan", d, "--limit", "100000"]);
    assert_eq!(all.as_array().unwrap().len(), 1500 - 300 - 1 + 1);
    let trace = ok_json(&["trace", d, "only-in-the-wal"]);
    assert_eq!(trace["trace"]["steps"][0]["source"], "memtable");
    assert_eq!(
        ok_json(&["trace", d, "key00002"])["value"],
        serde_json::Value::Null
    );
    ok_json(&["stats", d]);
    let stats = ok_json(&["stats", d, "--absent-gets", "500"]);
    assert!(stats["reads_saved"].as_u64().unwrap() > 0);
    ok_json(&["inspect", table.to_str().unwrap(), "--probes", "1000"]);
    assert!(
        image(dir.path()) == before,
        "a study command changed the store"
    );

    // Across processes: while this process holds the store read-only, a
    // command that writes is refused and a study command runs beside it,
    // and while it holds it read-write, a study command is refused.
    let reader = bloomlsm::Db::open_read_only(dir.path(), bloomlsm::Options::default()).unwrap();
    let out = cli(&["put", d, "a", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("locked"));
    let out = cli(&["get", d, "key00003"]);
    assert!(
        out.status.success(),
        "a study command beside a reader: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    reader.close().unwrap();
    assert!(
        image(dir.path()) == before,
        "the refused put changed the store"
    );
    let writer = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    let out = cli(&["get", d, "key00003"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("locked"));
    writer.close().unwrap();
}

/// A table whose in-place filter rebuild never completed (the process died
/// mid-append: bytes past the size the manifest records) is whole to the
/// store, which reads it at its recorded size, and to `inspect`, which
/// reads the record from the store's manifest (it took the file's length
/// as the table's and called it corrupt).
#[test]
fn inspect_reads_a_table_with_an_unfinished_append() {
    let (dir, table) = store_with_table();
    let mut bytes = std::fs::read(&table).unwrap();
    // Half an append: a filter block's worth of bytes, no footer yet.
    bytes.extend(std::iter::repeat_n(0xab, 300));
    std::fs::write(&table, bytes).unwrap();
    let db = bloomlsm::Db::open_read_only(dir.path(), bloomlsm::Options::default()).unwrap();
    assert_eq!(db.get(b"key00042").unwrap().as_deref(), Some(&b"value"[..]));
    drop(db);
    let out = cli(&["inspect", table.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
