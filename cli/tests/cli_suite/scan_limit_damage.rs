//! `scan --limit N` reads one pair past the limit to say whether the range
//! holds more. When that read fails (a damaged block right after the
//! limit), the note says so, naming the damage, instead of saying
//! nothing, which reads as "the range ends here". The pairs printed are
//! the first N, and the exit status 0 (the pairs asked for were read);
//! without the limit the scan fails (exit 2) naming the same damage.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Output};

fn scan(d: &str, limit: usize) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["--json", "scan", d, "--limit", &limit.to_string()])
        .output()
        .unwrap()
}

#[test]
fn a_failed_read_past_the_limit_is_noted() {
    let (dir, table) = bloomlsm_tests::store_with_one_table((0..3000).map(|i| format!("k{i:05}")));
    let d = dir.path().to_str().unwrap();
    // A byte early in the second half of the table's data: a block after
    // the first ones.
    let mut bytes = std::fs::read(&table).unwrap();
    let data_bytes = {
        let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
            .args([
                "--json",
                "inspect",
                table.to_str().unwrap(),
                "--probes",
                "1",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["properties"]["data_bytes"].as_u64().unwrap() as usize
    };
    bytes[data_bytes / 2] ^= 0x04;
    std::fs::write(&table, bytes).unwrap();

    let whole = scan(d, 100_000);
    assert_eq!(whole.status.code(), Some(2), "{whole:?}");
    let damage = String::from_utf8(whole.stderr).unwrap();
    let damage = damage.trim().strip_prefix("error: ").unwrap().to_string();
    assert!(damage.contains("data block at offset"), "{damage}");

    // The most pairs that read without error: the first pairs before the
    // damaged block (a scan of one more fails).
    let (mut ok, mut failed) = (0, 3000);
    while failed - ok > 1 {
        let mid = (ok + failed) / 2;
        if scan(d, mid).status.success() {
            ok = mid;
        } else {
            failed = mid;
        }
    }
    assert!(ok > 0, "the damage is in the first block");
    // They are all the pairs before the damaged block: the next key is in
    // it (a get reads the one block that can hold its key, and fails),
    // the one before is not. Before, the merge dropped the pair in hand
    // when the read after it failed, so a scan of all of them failed.
    let get = |i: usize| {
        Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
            .args(["get", d, &format!("k{i:05}")])
            .output()
            .unwrap()
    };
    assert_eq!(get(ok - 1).status.code(), Some(0), "{:?}", get(ok - 1));
    assert_eq!(get(ok).status.code(), Some(2), "{:?}", get(ok));
    let out = scan(d, ok);
    assert!(out.status.success(), "{out:?}");
    let pairs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pairs.as_array().unwrap().len(), ok);
    let note = String::from_utf8(out.stderr).unwrap();
    assert!(
        note.starts_with(&format!("note: --limit {ok} reached")) && note.contains(&damage),
        "{note}"
    );
    assert_eq!(note.lines().count(), 1, "{note}");
}
