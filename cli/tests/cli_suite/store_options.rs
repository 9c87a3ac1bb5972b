//! The study commands open a store read-only under default options, not
//! the store's: a store made with more levels than the default 7 must
//! still be readable (a read-only open compacts nothing, so the number of
//! levels only bounds which levels it can hold).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .output()
        .unwrap()
}

/// A closed store made with 12 levels, holding tables in L11.
fn twelve_level_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let options = bloomlsm::Options {
        num_levels: 12,
        ..bloomlsm::Options::default()
    };
    let db = bloomlsm::Db::open(dir.path(), options).unwrap();
    // Four L0 tables trigger a compaction of L0 into the last level, L11
    // (dynamic level bytes).
    for key in ["a", "deep", "m", "z"] {
        db.put(key.as_bytes(), b"value").unwrap();
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    assert!(db.stats().levels[11].tables > 0);
    db.close().unwrap();
    dir
}

#[test]
fn a_store_with_twelve_levels_can_be_studied() {
    let dir = twelve_level_store();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["get", d, "deep"],
        vec!["scan", d],
        vec!["trace", d, "deep"],
        vec!["stats", d, "--absent-gets", "10"],
    ] {
        let out = cli(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stats = String::from_utf8(cli(&["--json", "stats", d]).stdout).unwrap();
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["levels"][0]["level"], 11, "{stats}");
}

#[test]
fn a_store_with_twelve_levels_is_written_with_num_levels() {
    let dir = twelve_level_store();
    let d = dir.path().to_str().unwrap();
    let refused = cli(&["put", d, "new", "v"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("num_levels of at least 12"), "{err}");
    for args in [
        vec!["--num-levels", "12", "put", d, "new", "v"],
        vec!["--num-levels", "12", "delete", d, "deep"],
    ] {
        let out = cli(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(cli(&["get", d, "new"]).status.success());
    assert_eq!(cli(&["get", d, "deep"]).status.code(), Some(1));
    // Out of range is refused by the parser, before any open.
    assert_eq!(
        cli(&["--num-levels", "65", "get", d, "a"]).status.code(),
        Some(2)
    );
}
